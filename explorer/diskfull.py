"""A full disk, told as such: what counts as one, and the words for it.

SQLite says "database or disk is full" (or, when it cannot even grow its shared-memory file,
a "disk I/O error"), PostgreSQL "could not extend file" (SQLSTATE 53100), the OS ENOSPC.
Every write runs in one transaction, so a write refused for space leaves nothing half-way;
this module only lets the web (507 Insufficient Storage) and ``import_sessions`` say so in
words instead of a traceback or a generic 500.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3

MESSAGE = (
    "The disk is full: nothing was written. Reading goes on; ask an admin to free some "
    "space, then try again."
)

# SQLite's primary result codes (the low byte of an extended code).
_SQLITE_FULL = 13
_SQLITE_IOERR = 10
_SQLITE_READONLY = 8
_PG_DISK_FULL = "53100"
# A disk with less than this free counts as full when SQLite reports an I/O error on it.
NEARLY_FULL_BYTES = 1024 * 1024


def _chain(exc: BaseException | None):
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def nearly_full(path: str) -> bool:
    """Whether the file system holding ``path`` has (almost) no space left."""
    try:
        return shutil.disk_usage(os.path.dirname(os.path.abspath(path)) or ".").free < (
            NEARLY_FULL_BYTES
        )
    except OSError:
        return False


def is_disk_full(exc: BaseException, *, database_path: str | None = None) -> bool:
    """Whether ``exc`` (or what caused it) is a storage-full refusal.

    ``database_path``: the SQLite file; an I/O error there counts when its disk has no
    space left (SQLite cannot tell why a write of its shared-memory file failed)."""
    for e in _chain(exc):
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if getattr(e, "sqlstate", None) == _PG_DISK_FULL:
            return True
        code = getattr(e, "sqlite_errorcode", None)
        if isinstance(e, sqlite3.Error) and code is not None:
            if code & 0xFF == _SQLITE_FULL:
                return True
            if code & 0xFF == _SQLITE_IOERR and database_path and nearly_full(database_path):
                return True
        if "database or disk is full" in str(e) or "No space left on device" in str(e):
            return True
    return False


def is_read_only_fallback_write(exc: BaseException) -> bool:
    """A write attempted on the read-only connection a full disk left this process with
    (``explorer.sqlite_backend``): the disk was full when the connection opened."""
    from django.db import connections

    if not any(
        getattr(c, "disk_full_fallback", False) for c in connections.all(initialized_only=True)
    ):
        return False
    return any(
        isinstance(e, sqlite3.Error)
        and (getattr(e, "sqlite_errorcode", 0) or 0) & 0xFF == _SQLITE_READONLY
        for e in _chain(exc)
    )


def refused_for_space(exc: BaseException) -> bool:
    """Whether a write failed for want of space: a full disk, or a write on the read-only
    connection a full disk left (the default database's file decides an I/O error)."""
    from django.conf import settings

    path = str(settings.DATABASES["default"].get("NAME", ""))
    return is_disk_full(exc, database_path=path) or is_read_only_fallback_write(exc)
