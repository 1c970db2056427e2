"""A route's part after the common ancestor as Compare reads it: what it adds up to from a
few sparse rows, and only the entries the page lists or aligns as rows.

Two routes that parted near the root hold tens of thousands of entries each after the
ancestor (20,651 on one route of the benchmark's 2 GB session). The page lists the newest
:data:`compare.ROUTE_SHOWN` of them and aligns the live range; everything else it shows of
the part is a sum. So :class:`SparseTail` reads, in one statement over the part's
(segment, offset) ranges, only the entries a sum needs one by one: those with a cost
(added in route order from zero, as the engine adds them: a subtraction of two float prefix
sums can differ in the last bits), those that are not messages (the message count is the
part's length less them; the compactions and settings among them place the live range)
and those with stored file uses (the distinct uses decoded once each). Counts and integer
sums come from the route figures (leaf minus ancestor). Rows are built only from the
lowest depth the live range or the listing asks for.

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
from explorer.route_parts import Chain, rows_between

__all__ = ["Spent", "SparseTail", "WholeTail"]


class Spent(NamedTuple):
    """An entry of the part with a cost, at its depth."""

    depth: int
    cost: float


class Mark(NamedTuple):
    """A compaction or settings entry of the part (``chain_context``'s mark rows)."""

    depth: int
    entry_id: str
    parent_id: str | None
    type: str
    position: int
    pk: int


class WholeTail:
    """The part read whole, as ``chain_context.TailRow`` in route order."""

    def __init__(self, rows: Sequence[TailRow], base: TailRow | None) -> None:
        self.rows = list(rows)
        self.base = base
        self.length = len(self.rows)

    def last(self, n: int) -> list[TailRow]:
        """The newest ``n`` entries of the part."""
        return self.rows[-n:] if n else []

    def spent(self) -> list[Any]:
        return self.rows

    def messages(self) -> int:
        return sum(1 for e in self.rows if e.type == "message")

    def cost(self) -> float:
        cost = 0.0
        for e in self.rows:
            cost += e.cost or 0.0
        return cost

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
    module's docstring)."""

    def __init__(self, route: Chain, first: int) -> None:
        from explorer.models import FileUse

        self.route = route
        self.first = first
        self.length = max(route.end - first + 1, 0)
        self._rows: list[TailRow] = []
        self._low = route.end + 1
        self.broken = False  # a member missing from a range read: the segments do not settle it
        self.spent_rows: list[Spent] = []
        self.marks: list[Mark] = []
        self.non_messages = 0
        # (entry id, the stored uses' text) of each entry with stored uses, route order
        self.use_rows: list[tuple[str, str]] = []
        if self.length == 0:
            return
        uses = connection.ops.quote_name(FileUse._meta.db_table)
        found = rows_between(
            route, first, route.end,
            "e.entry_id, e.parent_id, e.type, e.position, e.cost, u.uses, e.id",
            # Only an assistant reply names files (``describe.file_uses``): the uses are
            # looked up for those alone, not for every entry of the part.
            join=f"LEFT JOIN {uses} u ON e.role = 'assistant' AND e.type = 'message' "
            "AND u.session_id = e.session_id AND u.position = e.position",
            where="e.cost <> 0 OR e.type <> 'message' OR u.uses IS NOT NULL",
        )  # fmt: skip
        for depth, eid, parent, kind, position, cost, text, pk in found:
            if cost:
                self.spent_rows.append(Spent(depth, cost))
            if kind != "message":
                self.non_messages += 1
                if kind in MARKS:
                    self.marks.append(Mark(depth, eid, parent, kind, position, pk))
            if text is not None:
                self.use_rows.append((eid, text))

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

    def spent(self) -> list[Spent]:
        return self.spent_rows

    def messages(self) -> int:
        return self.length - self.non_messages

    def cost(self) -> float:
        cost = 0.0
        for e in self.spent_rows:
            cost += e.cost
        return cost

    def to_parse(self, holding: Any) -> list[str]:
        """The entries with stored uses whose lines are read (masked): those holding a
        secret."""
        return [eid for eid, _text in self.use_rows if eid in holding]

    def file_uses(self, session_pk: int, holding: Any, parsed: dict[str, dict]) -> Uses:
        """The stored file uses of the part in route order, a repeated text decoded once
        (a later use of the same uses adds nothing to ``describe.files_of_uses``, which
        keeps the first-seen order); from the masked parse in ``parsed`` for an entry that
        holds a secret (in ``holding``). An entry without stored uses names no file: its
        masked line names none either, so only these are read."""
        from explorer.session.describe import file_uses

        seen: set[str] = set()
        out: Uses = []
        for eid, text in self.use_rows:
            if eid in holding:
                out.extend(file_uses(parsed.get(eid, {})))
            elif text not in seen:
                seen.add(text)
                out.extend(file_use_store.decode(text))
        return out
