"""Route figures kept with the entries: written with them, read instead of walking routes.

The engine (``explorer.session.route_figures``) computes an entry's figures from its
parent's plus the entry; this module keeps them in :class:`explorer.models.RouteFigure`, one
row per entry, written in the same transaction as the entry rows:

- an import streams lines through :class:`FigureWriter` (the parents' figures of the last
  few thousand entries kept in memory, older ones read back from the table), and its rows
  go in with each batch of entries;
- an append (``storage.append_lines``) calls :func:`write_appended` after inserting rows;
- migration ``0021_route_figures`` fills stored sessions with the same writer, and
  ``0023_route_messages`` fills them again for the column it adds.

The writer speaks raw SQL on table names (and columns) it is given, so a migration can run
it against the historical tables: each names the columns its own state has. Readers (:func:`figures_at`, :func:`figures_of`,
:func:`spend_after`) return the engine's dataclass.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.db import connection

from explorer.file_use_store import FileUseWriter
from explorer.segment_store import SegmentWriter, on_route_of
from explorer.session import exactsum, jsonfmt
from explorer.session.edit_delta import EditDelta, edit_difference
from explorer.session.route_figures import RouteFigures, next_figures, route_span, span_start

__all__ = [
    "FigureWriter",
    "fill_session",
    "figures_at",
    "figures_at_tips",
    "figures_of",
    "spend_after",
    "write_appended",
]

# The table's columns after the entry and the session, in RouteFigures' field order.
FIELDS = (
    "depth",
    "turns",
    "responses",
    "input",
    "output",
    "cache_read",
    "cache_write",
    "unpriced",
    "tokens",
    "cost",
    "tool_calls",
    "compaction_id",
    "edit_id",
    "prev_edit_id",
    "role",
    "text_size",
    "context_tokens",
    "usage_tokens",
    "trailing",
    "pending_targets",
    "big_usage",
    "every_estimate",
    "messages",
    "cost_partials",
    "message_entries",
    "file_use_entries",
)
# Columns added after migration 0021 created the table, each with the value a writer at an
# older state reads back in its place (that writer never writes it; 0033 fills its own).
LATER: dict[str, Any] = {
    "messages": 0,
    "cost_partials": None,
    "message_entries": 0,
    "file_use_entries": 0,
}
KEPT = 4096  # figures of the most recent entries kept in memory while writing
# Context edits walked back on a route to find the one in force on an edit's target;
# further back, the edit is estimated afresh.
EDIT_CHAIN_WALK = 64


def _nan_to_none(value: float) -> float | None:
    return None if value != value else value


# The widest integer a BIGINT column holds (SQLite and PostgreSQL alike).
_INT64 = 2**63 - 1


def _whole(value: int) -> int:
    """An integer for a BIGINT column: clamped (the exact usage goes to ``big_usage``)."""
    return max(-_INT64, min(_INT64, value))


def _real(value: float | None) -> float | None:
    """A number for a float column: NaN as null, an integer past a double as ±infinity
    (a crafted usage of 400 digits must not stop an import)."""
    if value is None:
        return None
    try:
        number = float(value)
    except OverflowError:
        number = math.inf if value > 0 else -math.inf
    return _nan_to_none(number)


def _big_usage(figures: RouteFigures) -> str:
    """The exact usage sums when one is past a BIGINT (JSON), else ``""``."""
    usage = (figures.input, figures.output, figures.cache_read, figures.cache_write)
    return json.dumps(usage) if any(abs(v) > _INT64 for v in usage) else ""


def _id(value: str | None) -> str | None:
    """An id as the entry table stores it: lone surrogates and NUL made visible."""
    return jsonfmt.visible(value) if value else value


def to_row(figures: RouteFigures) -> tuple[Any, ...]:
    """The column values of :data:`FIELDS` (NaN as null: SQLite cannot store it)."""
    return (
        figures.depth,
        figures.turns,
        figures.responses,
        _whole(figures.input),
        _whole(figures.output),
        _whole(figures.cache_read),
        _whole(figures.cache_write),
        figures.unpriced,
        _real(figures.tokens),
        _real(figures.cost),
        figures.tool_calls,
        _id(figures.compaction_id),
        _id(figures.edit_id),
        _id(figures.prev_edit_id),
        _id(figures.role),
        figures.text_size,
        _real(figures.context_tokens),
        _real(figures.usage_tokens),
        _real(figures.trailing),
        json.dumps(sorted(figures.pending_targets)) if figures.pending_targets else "",
        _big_usage(figures),
        _real(figures.every_estimate),
        figures.messages,
        partials_text(figures.cost_partials),
        figures.message_entries,
        figures.file_use_entries,
    )


def partials_text(partials: tuple[float, ...] | None) -> str | None:
    """The stored form of a route's exact cost (``exactsum.dumps``; NULL: not exact)."""
    return exactsum.dumps(list(partials)) if partials is not None else None


def partials_of(text: str | None) -> tuple[float, ...] | None:
    """:func:`partials_text` read back (NULL, or a row an older state wrote: None)."""
    if text is None:
        return None
    return tuple(exactsum.loads(text) or ())


def from_row(row: Sequence[Any], fields: Sequence[str] = FIELDS) -> RouteFigures:
    """The dataclass of a row of ``fields`` values (:data:`FIELDS`, or the columns of an
    older state, which a migration's writer reads back: the rest take the dataclass'
    defaults, and that writer never writes them)."""
    if tuple(fields) != FIELDS:
        named = {**LATER, **dict(zip(fields, row, strict=True))}
        row = [named[f] for f in FIELDS]
    values = list(row)
    for k in (16, 18, 21):  # context_tokens, trailing, every_estimate: null stands for NaN
        if values[k] is None:
            values[k] = float("nan")
    values[19] = frozenset(json.loads(values[19])) if values[19] else frozenset()
    values[23] = partials_of(values[23])
    big = values.pop(20)
    if big:  # usage past a BIGINT column: the exact sums
        values[3:7] = json.loads(big)
    return RouteFigures(*values)


class FigureWriter:
    """Figures of entries as they are stored, parents first.

    ``add`` computes an entry's figures when its parent's are known (in memory or in the
    table) and queues its row; an entry whose parent is not stored yet (later in the file,
    or never) waits for :meth:`finish`. The rare entries whose estimate is made afresh read
    the route back: the lines of the entry writer's batch not inserted yet through
    ``unflushed`` (id → raw line), the rest from the entry table. :meth:`write` inserts the
    queued rows and is called by the entry writer right after each batch of entries;
    ``flush_entries`` inserts that batch before :meth:`finish` reads it.
    """

    def __init__(
        self,
        session_pk: int,
        *,
        entry_table: str = "explorer_entry",
        figure_table: str = "explorer_routefigure",
        flush_entries: Callable[[], None] | None = None,
        unflushed: Callable[[str], str | None] | None = None,
        segments: bool = True,
        fields: Sequence[str] = FIELDS,
        file_uses: bool = True,
        also_reads: int | None = None,
    ) -> None:
        self.session_pk = session_pk
        # A grown file's import writes its entries to a hidden staging session
        # (``files.imports``) whose parents are in the stored one: both are read back.
        self.read_pks: tuple[int, ...] = (
            (session_pk,) if also_reads is None else (session_pk, also_reads)
        )
        self.within = f"IN ({', '.join(['%s'] * len(self.read_pks))})"
        # The columns written: a migration names those of its own state (a later column
        # does not exist there yet).
        self.fields = tuple(fields)
        unknown = set(self.fields) - set(FIELDS)
        if unknown or set(FIELDS) - set(self.fields) - set(LATER):
            raise ValueError(f"not the route figure columns of a state: {self.fields}")
        self.picks = [FIELDS.index(f) for f in self.fields]
        # The tree's segments go with the figures (``explorer.segment_store``); off for
        # migration 0021, whose tables come before theirs.
        self.segments = SegmentWriter(session_pk) if segments else None
        # The files each entry names (``explorer.file_use_store``); off for the migrations
        # before 0027, whose states have no table for them.
        self.uses = FileUseWriter(session_pk) if file_uses else None
        self.entry_table = connection.ops.quote_name(entry_table)
        self.figure_table = connection.ops.quote_name(figure_table)
        self.flush_entries = flush_entries
        self.unflushed = unflushed
        self.recent: OrderedDict[str, RouteFigures] = OrderedDict()
        self.unwritten: dict[str, RouteFigures] = {}  # queued rows' figures, by id
        self.queued: list[tuple[Any, ...]] = []
        self.waiting: list[int] = []  # positions of entries whose parent is not stored yet
        self.mark = "?" if connection.vendor == "sqlite" else "%s"

    # -- writing -----------------------------------------------------------------------

    def add(self, entry_id: str, parent_id: str | None, position: int, value: dict) -> None:
        """Figure the entry stored (or queued) at ``position``."""
        if self.segments is not None:
            self.segments.add(entry_id, parent_id, position)
        if self.uses is not None:
            self.uses.add(position, value)
        parent: RouteFigures | None = None
        if parent_id is not None:
            parent = self._figures(parent_id)
            if parent is None:
                self.waiting.append(position)
                return
        self._add(entry_id, position, value, parent)

    def _add(self, entry_id: str, position: int, value: dict, parent: RouteFigures | None) -> None:
        figures = next_figures(
            parent,
            value,
            lambda: self._span(value, parent),
            self._exists,
            edit_delta=lambda: self._edit_delta(value, parent),
        )
        self.recent[entry_id] = figures
        self.unwritten[entry_id] = figures
        if len(self.recent) > KEPT:
            self.recent.popitem(last=False)
        self.queued.append((*to_row(figures), position))

    def write(self) -> None:
        """Insert the queued rows (their entries must be in the entry table): the entries'
        keys in one read of the batch's position range, then one plain insert."""
        if self.segments is not None:
            self.segments.write()
        if self.uses is not None:
            self.uses.write()
        if not self.queued:
            return
        positions = [row[-1] for row in self.queued]
        sql = (
            f"SELECT position, id FROM {self.entry_table} "
            f"WHERE session_id = %s AND position >= %s AND position <= %s"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [self.session_pk, min(positions), max(positions)])
            pk_at = dict(cur.fetchall())
        n = len(self.fields)
        picks = self.picks
        rows = [(pk_at[row[-1]], self.session_pk, *(row[i] for i in picks)) for row in self.queued]
        columns = ", ".join(
            connection.ops.quote_name(c) for c in ("entry_id", "session_id", *self.fields)
        )
        marks = ", ".join([self.mark] * (n + 2))
        insert = f"INSERT INTO {self.figure_table} ({columns}) VALUES ({marks})"
        connection.ensure_connection()
        cursor = connection.connection.cursor()
        try:
            cursor.executemany(insert, rows)
        finally:
            cursor.close()
        self.queued = []
        self.unwritten = {}

    def finish(self) -> None:
        """Figure the entries that waited for a later parent (or for one that never came:
        the engine's route stops at a missing parent, so they are roots), then write."""
        if self.flush_entries is not None:
            self.flush_entries()
        self.write()
        waiting = self.waiting
        self.waiting = []
        while waiting:
            rows = self._entry_rows(waiting)
            later: list[int] = []
            progressed = False
            for position, entry_id, parent_id, raw in rows:
                parent = self._figures(parent_id) if parent_id is not None else None
                if parent is None and parent_id is not None and self._stored(parent_id):
                    later.append(position)  # its parent waits too: after it
                    continue
                value = _parse(raw)
                self._add(entry_id, position, value, parent)
                progressed = True
            self.write()
            if not progressed:  # a cycle (refused by the import): figured as roots
                for position, entry_id, _parent, raw in self._entry_rows(later):
                    self._add(entry_id, position, _parse(raw), None)
                self.write()
                break
            waiting = later
        if self.segments is not None:
            self.segments.finish()

    # -- reading back ------------------------------------------------------------------

    def _figures(self, entry_id: str) -> RouteFigures | None:
        known = self.recent.get(entry_id) or self.unwritten.get(entry_id)
        if known is not None:
            return known
        columns = ", ".join(f"f.{connection.ops.quote_name(c)}" for c in self.fields)
        sql = (
            f"SELECT {columns} FROM {self.figure_table} f JOIN {self.entry_table} e "
            f"ON e.id = f.entry_id WHERE e.session_id {self.within} AND e.entry_id = %s"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [*self.read_pks, _id(entry_id)])
            row = cur.fetchone()
        return from_row(row, self.fields) if row is not None else None

    def _stored(self, entry_id: str) -> bool:
        sql = f"SELECT 1 FROM {self.entry_table} WHERE session_id {self.within} AND entry_id = %s"
        with connection.cursor() as cur:
            cur.execute(sql, [*self.read_pks, _id(entry_id)])
            return cur.fetchone() is not None

    def _exists(self, entry_id: str) -> bool:
        # Figured already, so it cannot come later on the route of the entry being figured.
        # A stored entry without figures waits for its parent and may well be a descendant
        # (an edit naming it then applies to it); one not found counts as not there, which
        # is only slower, never wrong.
        return entry_id in self.recent or self._figures(entry_id) is not None

    def _entry_rows(self, positions: list[int]) -> list[tuple[int, str, str | None, str]]:
        out: list[tuple[int, str, str | None, str]] = []
        for k in range(0, len(positions), 500):
            chunk = positions[k : k + 500]
            sql = (
                f"SELECT position, entry_id, parent_id, raw FROM {self.entry_table} "
                f"WHERE session_id = %s AND position IN ({', '.join(['%s'] * len(chunk))})"
            )
            with connection.cursor() as cur:
                cur.execute(sql, [self.session_pk, *chunk])  # waiting: this writer's own
                out.extend(cur.fetchall())
        out.sort()
        return out

    def _span(self, entry: dict, parent: RouteFigures | None) -> list[dict]:
        """The route's context span above ``entry`` (``route_figures.route_span``), read from
        the entry table: only as many entries up as the span can reach."""
        parent_id = entry.get("parentId")
        if parent is None or not isinstance(parent_id, str):
            return []
        compaction, first_kept = span_start(parent, entry)
        reach = parent.depth  # to the root, unless a compaction bounds the span
        if compaction is not None:
            if entry.get("type") == "compaction":
                low: int | None = parent.depth + 1
            else:
                raw = self.unflushed(compaction) if self.unflushed is not None else None
                line = _parse(raw) if raw is not None else self._lines([compaction]).get(compaction)
                first = line.get("firstKeptEntryId") if line is not None else None
                first_kept = first if isinstance(first, str) else None
                held = self._figures(compaction)
                low = held.depth if held is not None else None  # unknown: walk to the root
            # A first kept entry above the compaction is an ancestor, so figured already; one
            # without figures (or deeper) is not on the route and bounds nothing.
            kept = self._figures(first_kept) if first_kept is not None else None
            if low is not None:
                if kept is not None and kept.depth < low:
                    low = kept.depth
                reach = max(0, parent.depth - low)
        by_id: dict[str, dict] = {}
        current: str | None = parent_id
        while current is not None and reach >= 0 and self.unflushed is not None:
            raw = self.unflushed(jsonfmt.visible(current))
            if raw is None:
                break
            value = _parse(raw)
            by_id[current] = value
            reach -= 1
            up = value.get("parentId")
            current = up if isinstance(up, str) and up else None
        if current is not None and reach >= 0:
            by_id.update(self._walk(jsonfmt.visible(current), reach))
        return route_span(entry, parent, by_id.get)

    def _edit_delta(self, edit: dict, parent: RouteFigures | None) -> EditDelta | None:
        """What a context edit appended to a stored route changes, from its target's line
        and the edit of it in force before (``edit_delta.edit_difference``), instead of the
        whole context span read and estimated again; None to estimate afresh.

        Only for appends (an import's batch is not in the tables the checks read): the
        target and the parent must be placed in the stored segments, which say whether the
        target is on the route; the depths say whether it is in the live range (after the
        latest compaction, or from its first kept entry on)."""
        if self.unflushed is not None or parent is None or self.segments is None:
            return None
        target_id, parent_id = edit.get("targetId"), edit.get("parentId")
        if not isinstance(target_id, str) or not isinstance(parent_id, str):
            return None
        target = self._figures(target_id)
        if target is None or target_id == edit.get("id"):
            return None
        on = on_route_of(self.session_pk, _id(target_id), _id(parent_id))
        if on is None:
            return None
        if not on:
            return 0, 0  # never in this route's context: the edit changes no message
        live = self._live_from(parent)
        if live is None:
            return None
        if target.depth < live:
            return 0, 0
        settled, before = self._edit_in_force(target_id, parent, live)
        line = self._lines([target_id]).get(target_id) if settled else None
        if line is None:
            return None
        return edit_difference(line, before, edit)

    def _live_from(self, parent: RouteFigures) -> int | None:
        """The depth where the route's live range starts (0 without a compaction; past
        the whole route when the compaction keeps nothing before it); None when the
        compaction itself or its first kept entry cannot be placed."""
        compaction = parent.compaction_id
        if compaction is None:
            return 0
        held = self._figures(compaction)
        line = self._lines([compaction]).get(compaction)
        if held is None or line is None:
            return None
        first = line.get("firstKeptEntryId")
        kept = self._figures(first) if isinstance(first, str) and first != compaction else None
        if kept is None:
            return held.depth  # nothing before the compaction is kept (nor the compaction)
        on = on_route_of(self.session_pk, _id(first), _id(compaction))
        if on is None:
            return None
        return kept.depth if on else held.depth

    def _edit_in_force(
        self, target_id: str, parent: RouteFigures, live: int
    ) -> tuple[bool, dict | None]:
        """(found out, the latest edit of ``target_id`` in the live range on the route to
        ``parent`` or None), walking the route's chain of edits back; not found out when
        the chain is longer than :data:`EDIT_CHAIN_WALK` or an edit's line is unreadable."""
        current = parent.edit_id
        for _ in range(EDIT_CHAIN_WALK):
            if current is None:
                return True, None
            held = self._figures(current)
            if held is None or held.depth < live:
                return True, None  # older edits are shallower still: out of the live range
            line = self._lines([current]).get(current)
            if line is None:
                return False, None
            if line.get("targetId") == target_id:
                return True, line
            current = held.prev_edit_id
        return False, None

    def _walk(self, entry_id: str, reach: int) -> dict[str, dict]:
        """Parsed entries from ``entry_id`` up ``reach`` parent links, by id."""
        table = self.entry_table
        sql = f"""
            WITH RECURSIVE walk(entry_id, parent_id, n) AS (
                SELECT entry_id, parent_id, 0 FROM {table}
                WHERE session_id {self.within} AND entry_id = %s
                UNION ALL
                SELECT e.entry_id, e.parent_id, walk.n + 1
                FROM {table} e JOIN walk ON e.session_id {self.within}
                AND e.entry_id = walk.parent_id
                WHERE walk.n < %s AND walk.parent_id <> walk.entry_id
            )
            SELECT entry_id FROM walk
        """
        with connection.cursor() as cur:
            cur.execute(sql, [*self.read_pks, _id(entry_id), *self.read_pks, reach])
            ids = [r[0] for r in cur.fetchall()]
        return self._lines(ids)

    def _lines(self, ids: Iterable[str]) -> dict[str, dict]:
        wanted = list(dict.fromkeys(ids))
        out: dict[str, dict] = {}
        for k in range(0, len(wanted), 500):
            chunk = wanted[k : k + 500]
            sql = (
                f"SELECT raw FROM {self.entry_table} "
                f"WHERE session_id {self.within} "
                f"AND entry_id IN ({', '.join(['%s'] * len(chunk))})"
            )
            with connection.cursor() as cur:
                cur.execute(sql, [*self.read_pks, *map(_id, chunk)])
                for (raw,) in cur.fetchall():
                    value = _parse(raw)
                    if isinstance(value.get("id"), str):
                        out[value["id"]] = value
        return out


def _parse(raw: str) -> dict:
    try:
        value = jsonfmt.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def fill_session(
    session_pk: int,
    *,
    entry_table: str,
    figure_table: str,
    fields: Sequence[str],
    batch: int = 1000,
) -> None:
    """Figure every stored entry of a session without rows, in file order: what a migration
    runs on its historical tables (``fields``: the columns its state has; the tree's
    segments and the file uses are left alone, 0022 and 0027 fill their own)."""
    writer = FigureWriter(
        session_pk,
        entry_table=entry_table,
        figure_table=figure_table,
        segments=False,
        fields=fields,
        file_uses=False,
    )
    table = connection.ops.quote_name(entry_table)
    sql = (
        f"SELECT entry_id, parent_id, position, raw FROM {table} "
        f"WHERE session_id = %s AND position > %s ORDER BY position LIMIT %s"
    )
    after = -1
    while True:
        with connection.cursor() as cur:
            cur.execute(sql, [session_pk, after, batch])
            rows = cur.fetchall()
        if not rows:
            break
        for entry_id, parent_id, position, raw in rows:
            writer.add(entry_id, parent_id, position, _parse(raw))
        writer.write()
        after = rows[-1][2]
    writer.finish()


def write_appended(session_pk: int, rows: Sequence[Any], values: Sequence[dict]) -> None:
    """Figures of entries just inserted by an append (``rows`` are the saved entries, in
    file order, ``values`` their parsed lines), in the append's transaction."""
    writer = FigureWriter(session_pk)
    for row, value in zip(rows, values, strict=True):
        writer.add(row.entry_id, row.parent_id, row.position, value)
    writer.finish()


# ---------------------------------------------------------------------------------------------
# Reading


def figures_at(session: Any, entry_id: str | None) -> RouteFigures | None:
    """The figures of the route ending at ``entry_id`` (None for an unknown entry)."""
    if not entry_id:
        return None
    return figures_of(session, [entry_id]).get(entry_id)


def figures_of(session: Any, entry_ids: Iterable[str]) -> dict[str, RouteFigures]:
    """Figures of many entries at once (id → figures; unknown ids left out)."""
    from explorer.models import RouteFigure

    wanted = list(dict.fromkeys(i for i in entry_ids if i))
    asked = {jsonfmt.visible(i): i for i in wanted}
    out: dict[str, RouteFigures] = {}
    for k in range(0, len(wanted), 500):
        rows = (
            # Filtered on the entry's session: the planner then looks the ids up in the
            # entries' (session, id) index and each row by its key, never scanning a session.
            RouteFigure.objects.filter(
                entry__session_id=session.pk, entry__entry_id__in=wanted[k : k + 500]
            )
            .order_by()
            .values_list("entry__entry_id", *FIELDS)
        )
        for row in rows:
            # The column holds an id's visible form: answer under the id asked for.
            out[asked.get(row[0], row[0])] = from_row(row[1:])
    return out


def figures_at_tips(sessions: Iterable[Any]) -> dict[int, RouteFigures]:
    """Figures of each session's newest entry (its file's own leaf), in two queries for a
    whole list page (session pk → figures; a session without entries or rows left out)."""
    from django.db.models import OuterRef, Q, Subquery

    from explorer.models import Entry, RouteFigure, Session

    pks = [s.pk for s in sessions]
    if not pks:
        return {}
    # Each session's newest position by its (session, position) index, one step each.
    newest = Entry.objects.filter(session_id=OuterRef("pk")).order_by("-position")
    tips = (
        Session.every.filter(pk__in=pks)
        .annotate(last=Subquery(newest.values("position")[:1]))
        .exclude(last=None)
        .order_by()
        .values_list("pk", "last")
    )
    wanted = Q()
    for session_pk, last in tips:
        # On the entry's columns: found by its (session, position) index, then the row by
        # its key (on the row's own session column the planner scans a session's rows).
        wanted |= Q(entry__session_id=session_pk, entry__position=last)
    if not wanted:
        return {}
    rows = RouteFigure.objects.filter(wanted).order_by().values_list("entry__session_id", *FIELDS)
    return {row[0]: from_row(row[1:]) for row in rows}


def spend_after(session: Any, leaf_id: str, ancestor_id: str | None) -> dict[str, float] | None:
    """What the route to ``leaf_id`` spent after ``ancestor_id`` (one of its ancestors, or
    None for the whole route): tokens, cost, responses and provider usage, by subtracting
    the ancestor's prefix sums from the leaf's. Float sums subtract up to rounding; a
    caller needing the engine's exact sum adds the entries instead."""
    both = figures_of(session, [leaf_id, *([ancestor_id] if ancestor_id else [])])
    leaf = both.get(leaf_id)
    if leaf is None:
        return None
    base = both.get(ancestor_id) if ancestor_id else None
    keys = ("tokens", "cost", "responses", "input", "output", "cache_read", "cache_write")
    return {k: getattr(leaf, k) - (getattr(base, k) if base is not None else 0) for k in keys}
