"""The cache back ends: a Redis cache whose every key expires, and a quicker file cache.

Redis has no entry limit like the file cache's ``MAX_ENTRIES``; a key stored without a
lifetime (``timeout=None``) would stay until Redis runs out of memory. Clamping every lifetime
to ``MAX_TIMEOUT`` seconds bounds the cache by what is rendered in that window, whatever the
caller asks for. A hard memory bound is Redis's own ``maxmemory`` (docs/deploy.md).
"""

from __future__ import annotations

import pickle
import threading
import zlib
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.filebased import FileBasedCache
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


class QuickFileCache(FileBasedCache):
    """Django's file cache, made cheaper to write for what this site keeps in it.

    The kept figures and fragments of a big session are hundreds of kilobytes to megabytes,
    written on the request that built them. Django compresses them at zlib's default level
    and lists the whole cache folder on every write to see whether it must cull. Here:

    - zlib level 1: about a quarter of the time of the default level on this site's JSON
      and pickles, for files about a quarter larger; reading is as fast (the format is
      unchanged, so files written by either class read back with the other);
    - the entry count is checked on every ``CULL_EVERY``-th write of this process, so the
      folder holds at most ``MAX_ENTRIES`` + ``CULL_EVERY`` files per writing process
      between checks, instead of being listed on every write.
    """

    CULL_EVERY = 16
    LEVEL = 1

    def __init__(self, dir: str, params: dict[str, Any]) -> None:
        super().__init__(dir, params)
        self._writes = 0
        self._writes_lock = threading.Lock()

    def _write_content(self, file, timeout, value) -> None:
        expiry = self.get_backend_timeout(timeout)
        file.write(pickle.dumps(expiry, self.pickle_protocol))
        file.write(zlib.compress(pickle.dumps(value, self.pickle_protocol), self.LEVEL))

    def _cull(self) -> None:
        with self._writes_lock:
            self._writes += 1
            due = self._writes % self.CULL_EVERY == 1 or self.CULL_EVERY <= 1
        if due:
            super()._cull()
