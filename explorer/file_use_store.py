"""The files each entry's tool calls read and modify, kept with the entry when it arrives.

Compare lists the files a route read and modified after the common ancestor
(``describe.files_of_uses`` over every reply's ``describe.file_uses`` in route order). On a
long route that meant parsing thousands of tool-calling replies per request; an entry's
calls never change, so its uses are worked out once, when it is stored, and kept in
:class:`explorer.models.FileUse` (one row per entry that names a file, none for the rest).

- :class:`FileUseWriter` is driven by ``route_store.FigureWriter`` next to the route
  figures and segments: every import batch (new, grown, legacy, Claude Code and Codex
  files in their Pi form) and every append (``storage.append_lines``) writes the rows in
  the entries' own transaction;
- migration ``0028_file_uses`` fills stored sessions, parsing only the lines whose route
  tool-call count rose;
- :func:`uses_at` reads them by position.

The writer speaks raw SQL on a table name it is given, as the route figures' does.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import orjson
from django.db import connection

from explorer.key_lookups import rows_for_keys
from explorer.session.describe import file_uses

__all__ = ["TABLE", "FileUseWriter", "encode", "uses_at"]

TABLE = "explorer_fileuse"

Uses = list[tuple[str, str]]


def encode(value: dict) -> str | None:
    """The stored form of an entry's ``file_uses`` (JSON pairs, in call order), or None
    when it names no file (no row). ASCII-escaped, so a path with a lone surrogate or NUL
    (a crafted line) is stored and read back exactly on SQLite and PostgreSQL alike."""
    uses = file_uses(value)
    return json.dumps(uses) if uses else None


def decode(text: str) -> Uses:
    """The uses of a stored row (orjson, about 5x faster on the thousands of rows a long
    route's Compare reads; the standard parser for what orjson refuses, a lone surrogate)."""
    try:
        pairs = orjson.loads(text)
    except orjson.JSONDecodeError:
        pairs = json.loads(text)
    return [(kind, path) for kind, path in pairs]


class FileUseWriter:
    """Rows of the entries of one session as they are stored (``add``), inserted by
    :meth:`write` right after their batch of entries."""

    def __init__(self, session_pk: int, *, table: str = TABLE) -> None:
        self.session_pk = session_pk
        self.table = connection.ops.quote_name(table)
        self.queued: list[tuple[int, int, str]] = []
        self.mark = "?" if connection.vendor == "sqlite" else "%s"

    def add(self, position: int, value: dict) -> None:
        text = encode(value)
        if text is not None:
            self.queued.append((self.session_pk, position, text))

    def write(self) -> None:
        if not self.queued:
            return
        marks = ", ".join([self.mark] * 3)
        insert = f"INSERT INTO {self.table} (session_id, position, uses) VALUES ({marks})"
        connection.ensure_connection()
        cursor = connection.connection.cursor()
        try:
            cursor.executemany(insert, self.queued)
        finally:
            cursor.close()
        self.queued = []


def uses_at(session_pk: int, positions: Iterable[int]) -> dict[int, Uses]:
    """Position → the stored file uses of the entries at ``positions`` that name a file
    (a position without a row names none)."""
    from explorer.models import FileUse

    table = connection.ops.quote_name(FileUse._meta.db_table)
    rows = rows_for_keys(
        f"SELECT position, uses FROM {table} "  # noqa: S608
        "WHERE session_id = %s AND position IN ({keys})",
        sorted(set(positions)),
        before=[session_pk],
    )
    return {position: decode(text) for position, text in rows}
