"""Environment helpers that fail loudly: a typo in a deployment variable must stop the
server at start-up, not silently fall back to an insecure default."""

from __future__ import annotations

import os
from urllib.parse import parse_qs, parse_qsl, urlencode, urlsplit, urlunsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def envbool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be one of true/false/1/0/yes/no/on/off, got {raw!r}")


def envint(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
    return value


def envlist(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    items = [item.strip() for item in raw.split(",") if item.strip()]
    if not items:
        raise ImproperlyConfigured(f"{name} is set but contains no value")
    return items


def envstr(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def redis_url_db(url: str) -> int:
    """The database number a Redis URL selects (path ``/N`` or ``?db=N``; 0 when absent).

    Needed to put the cache beside, never inside, the channel layer's database."""
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    raw = (
        query["db"][0] if "db" in query else parts.path.strip("/") if parts.scheme != "unix" else ""
    )
    if raw == "":
        return 0
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"Redis URL {url!r} selects no valid database number") from None
    if value < 0:
        raise ImproperlyConfigured(f"Redis URL {url!r} selects a negative database number")
    return value


def redis_url_with_db(url: str, db: int) -> str:
    """The same Redis server and credentials with database ``db`` selected."""
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "db"]
    if parts.scheme == "unix":
        query.append(("db", str(db)))
        # Written by hand: urlunsplit drops the "//" of a URL without a host.
        return f"unix://{parts.netloc}{parts.path}?{urlencode(query)}"
    return urlunsplit(parts._replace(path=f"/{db}", query=urlencode(query)))
