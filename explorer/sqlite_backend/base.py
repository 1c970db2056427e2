"""Django's SQLite backend, except that a full disk does not take reads down.

A new connection to a WAL database must create the database's shared-memory file (and runs
``PRAGMA journal_mode=WAL``); on a full disk that fails with a "disk I/O error" and every
page, read-only ones included, became a 500. Then this backend opens the file read-only and
immutable instead (no shared-memory file needed): pages read what the last checkpoint
holds, and every write is refused and told as "the disk is full" (``explorer.diskfull``),
with nothing written. The next connection, once space is free again, is a normal one.
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any

from django.db.backends.sqlite3 import base

from explorer import diskfull

log = logging.getLogger(__name__)


class DatabaseWrapper(base.DatabaseWrapper):
    disk_full_fallback = False

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        self.disk_full_fallback = False
        try:
            return super().get_new_connection(conn_params)
        except sqlite3.OperationalError as exc:
            path = str(conn_params.get("database", ""))
            if self.is_in_memory_db() or not diskfull.is_disk_full(exc, database_path=path):
                raise
            log.warning("The disk is full (%s): reading %s read-only", exc, path)
            conn = sqlite3.connect(**{**conn_params, "database": _read_only_uri(path), "uri": True})
            base.register_functions(conn)
            conn.execute("PRAGMA foreign_keys = ON")
            self.disk_full_fallback = True
            return conn

    def is_usable(self) -> bool:
        # A read-only connection is for the request that opened it, never kept for later.
        return not self.disk_full_fallback and super().is_usable()


def _read_only_uri(path: str) -> str:
    """The database file as a read-only, immutable URI (no shared memory, no locks)."""
    if path.startswith("file:"):
        path = path[5:].split("?", 1)[0]
    return Path(path).resolve().as_uri() + "?mode=ro&immutable=1"
