"""The search index: each entry's visible text, stored once when it arrives."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from django.db import connection, transaction

from explorer.models import Entry, EntryText, Session
from explorer.secrets import redact_for_search
from explorer.session import jsonfmt
from explorer.session.describe import entry_text

# ---------------------------------------------------------------------------------------------
# The search index: each entry's visible text, stored once when it arrives


_TEXT_COLUMNS = ("session_id", "entry_id", "position", "type", "role", "text")


def search_row(
    session_pk: int,
    entry_id: str,
    position: int,
    fields: dict[str, Any],
    value: Any,
    *,
    escaped: bool = True,
) -> tuple | None:
    """One search-index row for a parsed entry, or None when it shows no text.

    Secrets never enter the index: no query can match inside one or show it in a snippet.
    Raw SQL skips the fields' conversion, so lone surrogates / NUL show as U+FFFD here too.
    ``escaped=False`` (the line has no ``\\u`` escape, so it cannot hold either) skips that
    pass over texts of several MB.
    """
    text = redact_for_search(entry_text(value)) if isinstance(value, dict) else ""
    if not text:
        return None
    if not escaped:
        return (
            session_pk,
            entry_id,
            position,
            fields.get("type") or "",
            fields.get("role") or "",
            text,
        )
    v = jsonfmt.visible
    kind = fields.get("type") or ""
    role = fields.get("role") or ""
    return (session_pk, v(entry_id), position, v(kind), v(role), v(text))


_FTS_TABLE = "explorer_entrytext_fts"  # SQLite's trigram index over EntryText (0008, 0012)


def store_search_rows(rows: list[tuple]) -> None:
    """Store these search rows (``search_row``'s tuples) and index them, as one step.

    The only writer of ``EntryText``: every path that stores entries (the importer's batches,
    and ``index_new_entries`` after web appends, follow and turns) comes through here, so
    none can store text that search cannot find. On SQLite the FTS5 trigram table is filled
    with one ``INSERT … SELECT`` over the rows just stored (migration 0012 dropped the
    per-row trigger, which made every multi-MB text its own FTS5 insert and was most of a
    big import's time). The rows are the ids above the highest one before the insert: the
    transaction holds SQLite's single write lock (``BEGIN IMMEDIATE``; in a deferred one a
    writer that committed after the read makes this insert fail), so no other writer's rows
    can land in between.
    PostgreSQL's pg_trgm index (0011) follows the table by itself. A session's rows come in
    file order (both callers store positions above every stored one, in order), so their
    ids run in file order too.
    """
    if not rows:
        return
    if any(a[0] == b[0] and a[2] >= b[2] for a, b in pairwise(rows)):
        # Search pages walk a session's rows in id order as file order (queries'
        # _first_hit_ids): a batch out of order would list its hits out of order.
        raise ValueError("search rows must be stored in file order")
    sqlite = connection.vendor == "sqlite"
    q = "?" if sqlite else "%s"
    table = connection.ops.quote_name(EntryText._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(c) for c in _TEXT_COLUMNS)
    sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join([q] * len(_TEXT_COLUMNS))})"
    with transaction.atomic():
        connection.ensure_connection()
        cursor = connection.connection.cursor()
        try:
            if sqlite:
                cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}")
                (before,) = cursor.fetchone()
            cursor.executemany(sql, rows)
            if sqlite:
                cursor.execute(
                    f"INSERT INTO {_FTS_TABLE}(rowid, text) SELECT id, text FROM {table}"
                    " WHERE id > ?",
                    (before,),
                )
        finally:
            cursor.close()


def index_new_entries(session: Session) -> int:
    """Store the visible text of every entry not indexed yet; returns how many rows.

    Entries only ever arrive with higher positions, so everything above the highest indexed
    position is new (entries without text are skipped, so a trailing textless entry is read
    again next time and skipped again; that is cheap). Called inside the transaction that
    stored the entries, so the index never lags behind what a page can show. The importer
    fills the index itself while it streams (``search_row``); this catches what other writers
    (edits, follow appends, turns) stored.
    """
    # The last row of the (session, position) index; an aggregate would read every row of
    # the session in it (SQLite does not take MAX from an index under a WHERE).
    mark = (
        EntryText.objects.filter(session=session)
        .order_by("-position")
        .values_list("position", flat=True)
        .first()
    )
    rows = Entry.objects.filter(session=session)
    if mark is not None:
        rows = rows.filter(position__gt=mark)
    batch: list[tuple] = []
    added = 0
    for eid, position, kind, role, raw in (
        rows.order_by("position")
        .values_list("entry_id", "position", "type", "role", "raw")
        .iterator(chunk_size=2000)
    ):
        try:
            data = jsonfmt.loads(raw)
        except ValueError:
            continue
        row = search_row(session.pk, eid, position, {"type": kind, "role": role}, data)
        if row is not None:
            batch.append(row)
        if len(batch) >= 500:
            store_search_rows(batch)
            added += len(batch)
            batch = []
    if batch:
        store_search_rows(batch)
        added += len(batch)
    return added
