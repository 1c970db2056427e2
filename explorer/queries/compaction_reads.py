"""The route as the Compactions tab reads it: its compactions and branch summaries by
depth, where given entries sit on it, and the entries at the depths a window lists.

A route placed in the segments is read by depth through its chain of segments
(:mod:`explorer.route_parts`): its marks (compactions, branch summaries) from the session's
entries of those types (the ``entry_by_type`` index) kept where the chain holds them, and a
window's entries by their depths. The route itself, thousands of index rows on a long
session, is not read: what a compaction replaced is counted from the compactions' depths
(``analysis.compactions.replaced_count``). A leaf in no segment (a loop, or below one) has
its route walked (``light_path``) and read through the same questions, so the tab's
functions are the same for both and give the same answers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from django.db import connection

from explorer import route_parts
from explorer.models import Session
from explorer.queries.routes import LightEntry, light_path
from explorer.segment_store import q_offset
from explorer.session import jsonfmt

MARK_TYPES = ("compaction", "branch_summary")
_RUN_GAP = 64  # depths this far apart are read by separate ranges, not one


class Mark(NamedTuple):
    """A compaction or branch summary on a route: its depth (index on the route), id, type
    and entry key."""

    depth: int
    entry_id: str
    type: str
    pk: int


class CompactionRoute:
    """What the Compactions tab asks of a route (:func:`compaction_route`)."""

    marks: list[Mark]  # the route's compactions and branch summaries, in route order

    def depths_of(self, ids: Iterable[Any]) -> dict[str, int]:
        """The depth of each of ``ids`` that is on the route (ids not on it left out)."""
        raise NotImplementedError

    def at(self, depths: Iterable[int]) -> dict[int, tuple[str, int]]:
        """(entry id, entry key) of the route's entries at ``depths``."""
        raise NotImplementedError

    def whole(self) -> Sequence[LightEntry]:
        """The route's index rows (what the rare reads needing every entry of it use)."""
        raise NotImplementedError


class WalkedRoute(CompactionRoute):
    """A route whose index rows are at hand (``light_path``'s)."""

    def __init__(self, light: Sequence[LightEntry]) -> None:
        self.light = light
        self.marks = [
            Mark(i, e.entry_id, e.type, e.pk) for i, e in enumerate(light) if e.type in MARK_TYPES
        ]
        self._index: dict[str, int] | None = None

    def depths_of(self, ids: Iterable[Any]) -> dict[str, int]:
        if self._index is None:
            self._index = {e.entry_id: i for i, e in enumerate(self.light)}
        index = self._index
        return {i: index[i] for i in ids if isinstance(i, str) and i in index}

    def at(self, depths: Iterable[int]) -> dict[int, tuple[str, int]]:
        return {d: (self.light[d].entry_id, self.light[d].pk) for d in depths}

    def whole(self) -> Sequence[LightEntry]:
        return self.light


class PlacedRoute(CompactionRoute):
    """A route placed in the segments, read by depth through its chain."""

    def __init__(self, session: Session, leaf: str, chain: route_parts.Chain) -> None:
        self.session, self.leaf, self.chain = session, leaf, chain
        self._places = {
            seg: (start, upto)
            for (seg, upto), start in zip(chain.segments, chain.starts, strict=True)
        }
        self.marks = self._read_marks()

    def _depth(self, segment: int | None, offset: int | None) -> int | None:
        place = self._places.get(segment) if segment is not None else None
        if place is None or offset is None or offset > place[1]:
            return None
        return place[0] + offset

    def _read_marks(self) -> list[Mark]:
        """The session's compactions and branch summaries by type (its index), kept where the
        chain holds them: a handful against the route's thousands of entries. Should the
        session hold more of them than the route has entries, the route's own entries are
        read instead (by range, through the chain), so the read never outgrows the route."""
        from explorer.models import Entry, SegmentEntry

        entries = connection.ops.quote_name(Entry._meta.db_table)
        members = connection.ops.quote_name(SegmentEntry._meta.db_table)
        off = q_offset()
        bound = self.chain.end + 1
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT m.segment_id, m.{off}, e.entry_id, e.type, e.id FROM {entries} e "  # noqa: S608
                f"JOIN {members} m ON m.entry_id = e.id "
                f"WHERE e.session_id = %s AND e.type IN (%s, %s) "
                # Ordered as the (session, type, position) index holds them, so the planner
                # reads that index, not the whole session's covering one (12 ms against 1 ms
                # on a 150,000-entry session).
                "ORDER BY e.type, e.position LIMIT %s",
                [self.session.pk, *MARK_TYPES, bound + 1],
            )
            rows = cur.fetchall()
        if len(rows) > bound:
            found = route_parts.rows_between(
                self.chain,
                0,
                self.chain.end,
                "e.entry_id, e.type, e.id",
                where="e.type IN (%s, %s)",
                params=MARK_TYPES,
            )
            return [Mark(int(d), eid, kind, pk) for d, eid, kind, pk in found]
        marks = []
        for seg, offset, eid, kind, pk in rows:
            depth = self._depth(seg, offset)
            if depth is not None:
                marks.append(Mark(depth, eid, kind, pk))
        marks.sort()
        return marks

    def depths_of(self, ids: Iterable[Any]) -> dict[str, int]:
        """Looked up by id; an id the entry table cannot hold as it is (a lone surrogate is
        stored as U+FFFD) names no stored entry, as on a walked route."""
        from explorer.models import Entry, SegmentEntry

        wanted = list(
            dict.fromkeys(i for i in ids if isinstance(i, str) and jsonfmt.visible(i) == i)
        )
        if not wanted:
            return {}
        entries = connection.ops.quote_name(Entry._meta.db_table)
        members = connection.ops.quote_name(SegmentEntry._meta.db_table)
        off = q_offset()
        out: dict[str, int] = {}
        with connection.cursor() as cur:
            for k in range(0, len(wanted), 500):
                chunk = wanted[k : k + 500]
                marks = ", ".join(["%s"] * len(chunk))
                cur.execute(
                    f"SELECT e.entry_id, m.segment_id, m.{off} FROM {entries} e "  # noqa: S608
                    f"JOIN {members} m ON m.entry_id = e.id "
                    f"WHERE e.session_id = %s AND e.entry_id IN ({marks})",
                    [self.session.pk, *chunk],
                )
                for eid, seg, offset in cur.fetchall():
                    depth = self._depth(seg, offset)
                    if depth is not None:
                        out[eid] = depth
        return out

    def at(self, depths: Iterable[int]) -> dict[int, tuple[str, int]]:
        """Read by ranges of depth (one per run of nearby depths: a window is one or two)."""
        wanted = sorted(set(depths))
        out: dict[int, tuple[str, int]] = {}
        runs: list[list[int]] = []
        for d in wanted:
            if runs and d - runs[-1][-1] <= _RUN_GAP:
                runs[-1].append(d)
            else:
                runs.append([d])
        keep = set(wanted)
        for run in runs:
            for d, eid, pk in route_parts.rows_between(
                self.chain, run[0], run[-1], "e.entry_id, e.id"
            ):
                if d in keep:
                    out[int(d)] = (eid, pk)
        return out

    def whole(self) -> Sequence[LightEntry]:
        return light_path(self.session, self.leaf)


def compaction_route(session: Session, cursor: str | None) -> CompactionRoute:
    """The route to ``cursor`` as the Compactions tab reads it: by depth through its chain of
    segments where it is placed, else walked (``light_path``)."""
    if not cursor:
        return WalkedRoute([])
    chain = route_parts.chain(session.pk, cursor)
    if chain is None:
        return WalkedRoute(light_path(session, cursor))
    return PlacedRoute(session, cursor, chain)


def as_route(route: CompactionRoute | Sequence[LightEntry]) -> CompactionRoute:
    """``route`` as a :class:`CompactionRoute` (a walked route's index rows wrapped)."""
    return route if isinstance(route, CompactionRoute) else WalkedRoute(route)
