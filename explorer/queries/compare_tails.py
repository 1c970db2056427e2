"""A route's part after the common ancestor as Compare reads it: what it adds up to from a
few stored rows, and only the entries the page lists or aligns as rows.

Two routes that parted near the root hold tens of thousands of entries each after the
ancestor (23,858 on one route of the benchmark's 2 GB session). The page lists the newest
:data:`compare.ROUTE_SHOWN` of them and aligns the live range; everything else it shows of
the part is a sum, and :class:`SparseTail` reads none of the part's entry rows for it: each
is a row of a table of multi-KB lines, and reading 24,000 of them (one page each) was most
of the page's time.

- The cost, the message count and the count of entries naming a file are the leaf's route
  figures less the ancestor's. The cost is kept as an exact sum
  (``RouteFigures.cost_partials``), so the difference rounded once is the correctly
  rounded sum of the part's costs: the engine's figure (``analysis.compare.route_stats``),
  whatever order the costs are added in.
- The compactions and settings that place the live range are read by type from the
  session's (:func:`session_marks`: a few hundred index rows) and kept where the route
  holds them.
- The file uses are the ``FileUse`` rows in each (segment, offset) range's span of file
  positions, each checked to be a member of the range, and their number checked against
  the route figures' count; a range where it falls short (entries stored before their
  parent, so not in file order) is read through its members.

Rows are built only from the lowest depth the live range or the listing asks for.

:class:`WholeTail` answers the same from a part read whole (``compare_walked``, the
reference the sparse reading is tested against).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from django.db import connection

from explorer import file_use_store
from explorer.file_use_store import Uses, uses_at
from explorer.queries.chain_context import MARKS, TailRow, tail_rows
from explorer.route_parts import Chain, figure_rows, rows_between
from explorer.session import exactsum

__all__ = ["SparseTail", "WholeTail", "marks_on", "session_marks"]


class Mark(NamedTuple):
    """A compaction or settings entry of the part (``chain_context``'s mark rows)."""

    depth: int
    entry_id: str
    parent_id: str | None
    type: str
    position: int
    pk: int


def session_marks(session_pk: int) -> list[tuple[Any, ...]]:
    """(segment, offset, type, position, pk) of every placed compaction, thinking level and
    model change of the session (:data:`chain_context.MARKS`), from the entries' (session,
    type, position) index alone: a few hundred index rows where a route holds tens of
    thousands of entries (SQLite is told the index: left to itself it may scan the
    session's skeleton index instead)."""
    from explorer.models import Entry, SegmentEntry
    from explorer.segment_store import q_offset

    entries = connection.ops.quote_name(Entry._meta.db_table)
    members = connection.ops.quote_name(SegmentEntry._meta.db_table)
    hint = "INDEXED BY entry_by_type" if connection.vendor == "sqlite" else ""
    kinds = ", ".join(["%s"] * len(MARKS))
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT m.segment_id, m.{q_offset()}, e.type, e.position, e.id "  # noqa: S608
            f"FROM {entries} e {hint} JOIN {members} m ON m.entry_id = e.id "
            f"WHERE e.session_id = %s AND e.type IN ({kinds})",
            [session_pk, *MARKS],
        )
        return [r for r in cur.fetchall() if r[0] is not None and r[1] is not None]


def marks_on(route: Chain, low: int, high: int, marks: Sequence[tuple[Any, ...]]) -> list[Mark]:
    """The marks of ``marks`` (:func:`session_marks`) the route holds at depths ``low`` to
    ``high``, in route order, with their ids and parents (read for these alone)."""
    from explorer.models import Entry

    kept = []
    for seg, offset, kind, position, pk in marks:
        depth = route.depth_of(seg, offset)
        if depth is not None and low <= depth <= high:
            kept.append((depth, kind, position, pk))
    if not kept:
        return []
    ids = {
        pk: (eid, parent)
        for pk, eid, parent in Entry.objects.filter(pk__in=[k[3] for k in kept])
        .order_by()
        .values_list("pk", "entry_id", "parent_id")
    }
    out = [Mark(d, *ids[pk], kind, position, pk) for d, kind, position, pk in kept if pk in ids]
    out.sort(key=lambda m: m.depth)
    return out


class WholeTail:
    """The part read whole, as ``chain_context.TailRow`` in route order."""

    def __init__(self, rows: Sequence[TailRow], base: TailRow | None) -> None:
        self.rows = list(rows)
        self.base = base
        self.length = len(self.rows)

    def last(self, n: int) -> list[TailRow]:
        """The newest ``n`` entries of the part."""
        return self.rows[-n:] if n else []

    def messages(self, leaf: Any = None, base: Any = None) -> int:
        return sum(1 for e in self.rows if e.type == "message")

    def cost(self, leaf: Any = None, base: Any = None) -> float:
        """The part's costs added up exactly and rounded once (``exactsum.total``, as the
        engine's ``analysis.compare.route_stats``)."""
        return exactsum.total([e.cost for e in self.rows if e.cost])

    def calling(self) -> list[TailRow]:
        """The replies that called tools: where the route's stored tool-call count goes up
        from the entry before (a route without figure rows counts none)."""
        before = (self.base.calls or 0) if self.base is not None else 0
        out: list[TailRow] = []
        for e in self.rows:
            now = before if e.calls is None else e.calls
            if now > before:
                out.append(e)
            before = now
        return out

    def to_parse(self, holding: Any) -> list[str]:
        """The calling replies whose lines are read (masked): those holding a secret."""
        return [e.entry_id for e in self.calling() if e.entry_id in holding]

    def file_uses(self, session_pk: int, holding: Any, parsed: dict[str, dict]) -> Uses:
        """The file uses of the calling replies in route order: stored with each reply, or
        from its masked parse in ``parsed`` for one in ``holding``."""
        from explorer.session.describe import file_uses

        calling = self.calling()
        uses = uses_at(session_pk, [e.position for e in calling if e.entry_id not in holding])
        out: Uses = []
        for e in calling:
            if e.entry_id in holding:
                out.extend(file_uses(parsed.get(e.entry_id, {})))
            else:
                out.extend(uses.get(e.position, ()))
        return out


class SparseTail:
    """The part of ``route`` at depths ``first`` to its end, read sparsely (see the
    module's docstring). ``marks``: the session's (:func:`session_marks`), read once for
    both routes."""

    def __init__(
        self, session_pk: int, route: Chain, first: int, marks: Sequence[tuple[Any, ...]]
    ) -> None:
        self.session_pk = session_pk
        self.route = route
        self.first = first
        self.length = max(route.end - first + 1, 0)
        self._rows: list[TailRow] = []
        self._low = route.end + 1
        # A member missing where one was read: the segments do not settle the part (the
        # caller reads both routes whole).
        self.broken = False
        self.marks = marks_on(route, first, route.end, marks) if self.length else []
        self._uses: list[tuple[str, str]] | None = None
        self._scanned: list[tuple[int, str, float]] | None = None

    def scanned(self) -> list[tuple[int, str, float]]:
        """(depth, type, cost) of the part's entries with a cost or not a message, read
        once through its members: only where no route figures settle a sum (entry rows
        stored without them)."""
        if self._scanned is None:
            self._scanned = (
                rows_between(
                    self.route,
                    self.first,
                    self.route.end,
                    "e.type, e.cost",
                    where="e.cost <> 0 OR e.type <> 'message'",
                )  # fmt: skip
                if self.length
                else []
            )
        return self._scanned

    def spent(self) -> list[tuple[int, float]]:
        """(depth, cost) of the part's entries with a cost (:meth:`scanned`)."""
        return [(d, c) for d, _kind, c in self.scanned() if c]

    def since(self, low: int) -> list[TailRow]:
        """The part's rows at depths ``low`` (at least :attr:`first`) to its end, read once
        from the lowest depth asked for."""
        low = max(low, self.first)
        if low < self._low:
            more = tail_rows(self.route, low, self._low - 1)
            if len(more) != self._low - low:
                self.broken = True
            self._rows = [*more, *self._rows]
            self._low = low
        return self._rows[low - self._low :]

    def last(self, n: int) -> list[TailRow]:
        return self.since(self.route.end - n + 1) if n else []

    def messages(self, leaf: Any, base: Any) -> int:
        """The part's entries of type "message": the count on the leaf's route figures less
        the ancestor's (``base``; None: the part starts at a root)."""
        if leaf is None or (base is None and self.first > 0):
            return self.length - sum(1 for _d, kind, _c in self.scanned() if kind != "message")
        return leaf.message_entries - (base.message_entries if base is not None else 0)

    def cost(self, leaf: Any, base: Any) -> float:
        """The part's costs summed exactly and rounded once: the leaf's exact route cost
        less the ancestor's (``exactsum.rounded``), the figure ``WholeTail.cost`` adds up."""
        partials = leaf.cost_partials if leaf is not None else None
        below = base.cost_partials if base is not None else (None if self.first > 0 else ())
        if partials is None or below is None:  # no rows, or past the floats: added up
            return exactsum.total([c for _d, c in self.spent()])
        return exactsum.rounded(partials, below)

    def use_rows(self) -> list[tuple[str, str]]:
        """(entry id, the stored uses' text) of each entry of the part with stored file
        uses, in route order (:func:`_part_uses`), read once."""
        if self._uses is None:
            self._uses = _part_uses(self.session_pk, self.route, self.first) if self.length else []
        return self._uses

    def to_parse(self, holding: Any) -> list[str]:
        """The entries with stored uses whose lines are read (masked): those holding a
        secret."""
        return [eid for eid, _text in self.use_rows() if eid in holding]

    def file_uses(self, session_pk: int, holding: Any, parsed: dict[str, dict]) -> Uses:
        """The stored file uses of the part in route order, a repeated text decoded once
        (a later use of the same uses adds nothing to ``describe.files_of_uses``, which
        keeps the first-seen order); from the masked parse in ``parsed`` for an entry that
        holds a secret (in ``holding``). An entry without stored uses names no file: its
        masked line names none either, so only these are read."""
        from explorer.session.describe import file_uses

        seen: set[str] = set()
        out: Uses = []
        for eid, text in self.use_rows():
            if eid in holding:
                out.extend(file_uses(parsed.get(eid, {})))
            elif text not in seen:
                seen.add(text)
                out.extend(file_use_store.decode(text))
        return out


def _part_uses(session_pk: int, route: Chain, first: int) -> list[tuple[str, str]]:
    """(entry id, uses' text) of the route's entries at depths ``first`` on that have
    ``FileUse`` rows, in route order.

    Per (segment, offset range) of the part: how many of its entries name a file is the
    route figures' count at its last entry less the one at the entry before its first
    (none: nothing read). The rows are read from the range's span of file positions (from
    its first entry's to its last's), each kept where its entry is a member of the range;
    where fewer are kept than counted (members outside that span: entries stored before
    their parent), or a figure row is missing, the range is read through its members."""
    from explorer.models import Entry, FileUse, SegmentEntry
    from explorer.segment_store import q_offset

    spans = route.spans(first, route.end)
    start = {seg: s for (seg, _u), s in zip(route.segments, route.starts, strict=True)}
    wanted = set()
    for seg, f, u in spans:
        wanted.update(d for d in (start[seg] + f - 1, start[seg] + f, start[seg] + u) if d >= 0)
    at = figure_rows(route, sorted(wanted), "f.file_use_entries, e.position")
    entries = connection.ops.quote_name(Entry._meta.db_table)
    members = connection.ops.quote_name(SegmentEntry._meta.db_table)
    uses = connection.ops.quote_name(FileUse._meta.db_table)
    off = q_offset()
    # SQLite is told the plan: the rows by position, each entry's id from the covering
    # skeleton index (never its row, which holds the line), then its member row. Left to
    # itself it read each entry's row, or scanned a range of the index per use
    # (``+ 0``: the position range is the uses', not carried over to the entries).
    sqlite = connection.vendor == "sqlite"
    join = "CROSS JOIN" if sqlite else "JOIN"
    hint = "INDEXED BY entry_skeleton" if sqlite else ""
    out: list[tuple[str, str]] = []
    for seg, f, u in spans:
        lo, hi = start[seg] + f, start[seg] + u
        if lo in at and hi in at and (lo == 0 or lo - 1 in at):
            count = at[hi][0] - (at[lo - 1][0] if lo > 0 else 0)
            if count == 0:
                continue
            with connection.cursor() as cur:
                cur.execute(
                    f"SELECT m.{off}, e.entry_id, u.uses FROM {uses} u {join} {entries} e "  # noqa: S608
                    f"{hint} ON e.session_id = u.session_id AND e.position = u.position + 0 "
                    f"{join} {members} m ON m.entry_id = e.id WHERE u.session_id = %s "
                    f"AND u.position BETWEEN %s AND %s AND m.segment_id = %s "
                    f"AND m.{off} BETWEEN %s AND %s",
                    [session_pk, at[lo][1], at[hi][1], seg, f, u],
                )
                found = cur.fetchall()
            if len(found) == count:
                found.sort(key=lambda r: r[0])
                out.extend((eid, text) for _o, eid, text in found)
                continue
        # Not settled by the positions: the range's members joined to their rows.
        rows = rows_between(
            route, lo, hi, "e.entry_id, u.uses",
            join=f"JOIN {uses} u ON e.role = 'assistant' AND e.type = 'message' "
            "AND u.session_id = e.session_id AND u.position = e.position",
        )  # fmt: skip
        out.extend((eid, text) for _d, eid, text in rows)
    return out
