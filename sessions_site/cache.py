"""A Redis cache whose every key expires.

Redis has no entry limit like the file cache's ``MAX_ENTRIES``; a key stored without a
lifetime (``timeout=None``) would stay until Redis runs out of memory. Clamping every lifetime
to ``MAX_TIMEOUT`` seconds bounds the cache by what is rendered in that window, whatever the
caller asks for. A hard memory bound is Redis's own ``maxmemory`` (docs/deploy.md).
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache


class BoundedRedisCache(RedisCache):
    def __init__(self, server: str, params: dict[str, Any]) -> None:
        params = dict(params)
        options = dict(params.get("OPTIONS") or {})
        self.max_timeout = int(options.pop("MAX_TIMEOUT", 24 * 3600))
        params["OPTIONS"] = options
        super().__init__(server, params)

    def get_backend_timeout(self, timeout: float | None = DEFAULT_TIMEOUT) -> int | None:
        """Seconds until expiry, never unbounded and never above ``max_timeout``."""
        seconds = super().get_backend_timeout(timeout)
        if seconds is None:
            return self.max_timeout
        return min(int(seconds), self.max_timeout)
