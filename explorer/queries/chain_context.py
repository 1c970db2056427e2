"""A route's live range (what ``entries.context_light`` gives) read from its chain of
segments: the newest compaction on the route, its first kept entry and the settings
entries before them are found by index columns over the chain's ranges, and only the rows
from the live range's start are built. Compare reads each route's part after the common
ancestor this way, with the shared prefix's rows read once, and only from where a live
range starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from django.db import connection

from explorer.models import Entry, RouteFigure
from explorer.queries.entries import load_entries
from explorer.queries.routes import LightEntry
from explorer.route_parts import Chain, rows_between
from explorer.segment_store import q_offset

# The columns a route's light rows carry (``routes.light_path``), after the depth.
ROW_COLS = "e.entry_id, e.parent_id, e.type, e.position, e.id"

# Settings entries searched before a live range's start (``entries.context_light``).
MARKS = ("compaction", "thinking_level_change", "model_change")


def light_rows(route: Chain, low: int, high: int) -> list[LightEntry]:
    """The route's light rows at depths ``low`` to ``high``, root first."""
    return [_light(r) for r in rows_between(route, low, high, ROW_COLS)]


class TailRow(NamedTuple):
    """An entry of a route's part after the common ancestor, with what Compare adds up of
    it: its stored cost and its route's tool calls (``RouteFigure``; None without a row).
    It answers ``entry_id``, ``parent_id``, ``type`` and ``position`` as a
    ``routes.LightEntry`` does, and costs a tuple to build, not a frozen dataclass: a tail
    can be 20,000 entries long."""

    depth: int
    entry_id: str
    parent_id: str | None
    type: str
    position: int
    cost: float | None
    calls: int | None
    pk: int


def tail_rows(route: Chain, low: int, high: int) -> list[TailRow]:
    """The route's entries at depths ``low`` to ``high`` with their stored cost and route
    tool calls, in one read (the figure rows joined by the entry's key)."""
    figures = connection.ops.quote_name(RouteFigure._meta.db_table)
    rows = rows_between(
        route, low, high, "e.entry_id, e.parent_id, e.type, e.position, e.cost, f.tool_calls, e.id",
        join=f"LEFT JOIN {figures} f ON f.entry_id = e.id",
    )  # fmt: skip
    return [TailRow._make(r) for r in rows]


def _light(r: Sequence[Any]) -> LightEntry:
    return LightEntry(r[1], r[2], r[3], "", r[4], 0, 0, "", r[5])


class Prefix:
    """The rows of the prefix two routes share (depths 0 to ``k``), read once and only
    from the lowest depth asked for."""

    def __init__(self, route: Chain, k: int, marks: list[tuple[Any, ...]] | None = None) -> None:
        self.route = route
        self.k = k
        self.low = k + 1
        self.rows: list[LightEntry] = []
        # Given: the prefix's marks found already (``compare_tails.marks_on``).
        self._marks: list[tuple[Any, ...]] | None = marks

    def marks(self) -> list[tuple[Any, ...]]:
        """The prefix's compactions, thinking level and model changes (:data:`MARKS`), as
        (depth, ``ROW_COLS``...), read once for both routes."""
        if self._marks is None:
            quoted = ", ".join(f"'{t}'" for t in MARKS)
            self._marks = (
                rows_between(self.route, 0, self.k, ROW_COLS, where=f"e.type IN ({quoted})")
                if self.k >= 0
                else []
            )
        return self._marks

    def since(self, low: int) -> list[LightEntry]:
        """The prefix's rows at depths ``low`` to ``k``."""
        if low < self.low:
            self.rows = [*light_rows(self.route, low, self.low - 1), *self.rows]
            self.low = low
        return self.rows[low - self.low :]


def live_range(session: Any, route: Chain, prefix: Prefix, tail: Any) -> list[Any]:
    """``context_light(session, route)[0]`` of the route whose part after the shared prefix
    (depths ``prefix.k + 1`` on) is ``tail`` (``compare_tails.SparseTail``: its marks and
    its rows from a depth on, read only from there): the newest compaction's first kept
    entry on (or the compaction itself, or the whole route without one), after the newest
    thinking level change and the newest model setting (an assistant reply after the newest
    model change, or that change) before it. Rows above the prefix's end are ``prefix``'s."""
    first = prefix.k + 1

    def since(low: int) -> list[Any]:
        return [*prefix.since(low), *tail.since(first)] if low < first else tail.since(low)

    marks = [*prefix.marks(), *tail.marks]
    comps = [r for r in marks if r[3] == "compaction"]
    if not comps:
        return since(0)
    comp = comps[-1]
    fk = load_entries(session, [comp[1]]).get(comp[1], {}).get("firstKeptEntryId")
    start = comp[0]
    if isinstance(fk, str) and start > 0:
        kept = _depth_on(session, route, fk)
        if kept is not None and kept < start:
            start = kept
    head = [r for r in marks if r[0] < start]
    thinking = next((r for r in reversed(head) if r[3] == "thinking_level_change"), None)
    model = next((r for r in reversed(head) if r[3] == "model_change"), None)
    chosen = [thinking] if thinking else []
    assistant = _newest_assistant(session, route, model[0] + 1 if model else 0, start - 1)
    if assistant is not None:
        chosen.append(assistant)
    elif model is not None:
        chosen.append(model)
    return [_light(r) for r in sorted(chosen, key=lambda r: r[0])] + since(start)


def _depth_on(session: Any, route: Chain, entry_id: str) -> int | None:
    """The depth of the entry ``entry_id`` on ``route`` (None: not on it), from its place
    in the segments: one row by the entries' (session, id) index, not a pass down the
    route (a compaction's first kept entry of a 20,000-entry route)."""
    from explorer.models import SegmentEntry

    entries = connection.ops.quote_name(Entry._meta.db_table)
    members = connection.ops.quote_name(SegmentEntry._meta.db_table)
    off = q_offset()
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT m.segment_id, m.{off} FROM {entries} e "  # noqa: S608
            f"JOIN {members} m ON m.entry_id = e.id WHERE e.session_id = %s AND e.entry_id = %s",
            [session.pk, entry_id],
        )
        found = cur.fetchone()
    if found is None or found[0] is None or found[1] is None:
        return None
    return route.depth_of(found[0], found[1])


def _newest_assistant(session: Any, route: Chain, low: int, high: int) -> Any:
    """The newest message at depths ``low`` to ``high`` whose id an assistant reply of the
    session carries (``context_light``'s test, by id), searched back in growing windows:
    it is most often a few entries before the live range."""
    table = Entry._meta.db_table
    where = (
        f"e.type = 'message' AND EXISTS (SELECT 1 FROM {table} x WHERE x.session_id = %s "  # noqa: S608
        "AND x.entry_id = e.entry_id AND x.role = 'assistant')"
    )
    window = 32
    while high >= low:
        lo = max(low, high - window + 1)
        found = rows_between(route, lo, high, ROW_COLS, where=where, params=[session.pk])
        if found:
            return found[-1]
        high, window = lo - 1, window * 4
    return None
