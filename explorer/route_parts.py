"""Parts of routes read by depth, from their chains of segments.

A placed entry's route is its chain of segments (``segment_store.chain_root_first``): each
segment's entries from offset 0 up to the place the route leaves it, so the entry at depth
``d`` is found without reading the entries above it. Two routes' common ancestor is where
their chains part, and what one route holds after it, or between two depths, is a few
(segment, offset range) pairs read by the members' (segment, offset) index. Compare reads
each route's part after the common ancestor this way, and only the part of the shared
prefix its page shows, instead of both routes whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from explorer.segment_store import chain_root_first, q_offset
from explorer.session import jsonfmt

__all__ = ["Chain", "ancestor_depth", "chain", "figure_rows", "rows_between"]

SPANS_PER_STATEMENT = 200  # (segment, offset range) pairs in one statement's OR


@dataclass(frozen=True)
class Chain:
    """The route to one entry as its segments, root first, with each segment's first depth."""

    segments: tuple[tuple[int, int], ...]  # (segment, last offset on the route)
    starts: tuple[int, ...] = field(default=())  # depth of each segment's offset 0

    @property
    def end(self) -> int:
        """The depth of the entry the route ends at (its length less one)."""
        return self.starts[-1] + self.segments[-1][1]

    def depth_of(self, segment: int, offset: int) -> int | None:
        """The depth of the entry at (``segment``, ``offset``) when it is on the route."""
        for (seg, upto), start in zip(self.segments, self.starts, strict=True):
            if seg == segment:
                return start + offset if offset <= upto else None
        return None

    def spans(self, low: int, high: int) -> list[tuple[int, int, int]]:
        """(segment, first offset, last offset) of the route's entries at depths ``low`` to
        ``high`` (both included), in route order."""
        out: list[tuple[int, int, int]] = []
        for (seg, upto), start in zip(self.segments, self.starts, strict=True):
            first, last = max(low - start, 0), min(high - start, upto)
            if first <= last:
                out.append((seg, first, last))
        return out


def chain(session_pk: int, entry_id: str) -> Chain | None:
    """The chain of the route to ``entry_id`` (None: unknown, or in no segment)."""
    segments = chain_root_first(session_pk, jsonfmt.visible(entry_id))
    if not segments:
        return None
    starts, depth = [], 0
    for _seg, upto in segments:
        starts.append(depth)
        depth += upto + 1
    return Chain(tuple(segments), tuple(starts))


def ancestor_depth(x: Chain, y: Chain) -> int:
    """The depth of the last entry both routes hold (-1: different roots). Both chains
    hold the same segments down to where they part, and in the last shared one the
    shorter reach."""
    k = -1
    for i, ((sx, ux), (sy, uy)) in enumerate(zip(x.segments, y.segments, strict=False)):
        if sx != sy:
            break
        k = x.starts[i] + min(ux, uy)
        if ux != uy:
            break
    return k


def rows_between(
    route: Chain,
    low: int,
    high: int,
    columns: str,
    *,
    join: str = "",
    where: str = "",
    params: Sequence[Any] = (),
) -> list[tuple[Any, ...]]:
    """(depth, ``columns``...) of the route's entries at depths ``low`` to ``high`` that
    meet ``where`` (on the entry table, aliased ``e``, and the tables ``join`` adds), in
    route order: one statement per
    :data:`SPANS_PER_STATEMENT` segments, each segment's range read by the members'
    (segment, offset) index."""
    from explorer.models import Entry, SegmentEntry

    entries = connection.ops.quote_name(Entry._meta.db_table)
    members = connection.ops.quote_name(SegmentEntry._meta.db_table)
    off = q_offset()
    spans = route.spans(low, high)
    start = {seg: s for (seg, _u), s in zip(route.segments, route.starts, strict=True)}
    out: list[tuple[Any, ...]] = []
    with connection.cursor() as cur:
        for k in range(0, len(spans), SPANS_PER_STATEMENT):
            part = spans[k : k + SPANS_PER_STATEMENT]
            ranges = " OR ".join([f"(m.segment_id = %s AND m.{off} BETWEEN %s AND %s)"] * len(part))
            cur.execute(
                f"SELECT m.segment_id, m.{off}, {columns} FROM {members} m "  # noqa: S608
                f"JOIN {entries} e ON e.id = m.entry_id {join} WHERE ({ranges})"
                + (f" AND ({where})" if where else ""),
                [*(v for span in part for v in span), *params],
            )
            out.extend((start[r[0]] + r[1], *r[2:]) for r in cur.fetchall())
    out.sort(key=lambda r: r[0])
    return out


def figure_rows(route: Chain, depths: Sequence[int], columns: str) -> dict[int, tuple[Any, ...]]:
    """Depth → ``columns`` (of the entry, aliased ``e``, and its route figure row, ``f``) of
    the route's entries at ``depths``, each found by its (segment, offset); an entry
    without a member or a figure row is left out."""
    from explorer.models import Entry, RouteFigure, SegmentEntry

    entries = connection.ops.quote_name(Entry._meta.db_table)
    members = connection.ops.quote_name(SegmentEntry._meta.db_table)
    figures = connection.ops.quote_name(RouteFigure._meta.db_table)
    off = q_offset()
    places = [(s[0], d - start) for d in depths for s, start in _segment_at(route, d)]
    start = {seg: s for (seg, _u), s in zip(route.segments, route.starts, strict=True)}
    out: dict[int, tuple[Any, ...]] = {}
    with connection.cursor() as cur:
        for k in range(0, len(places), SPANS_PER_STATEMENT):
            part = places[k : k + SPANS_PER_STATEMENT]
            where = " OR ".join([f"(m.segment_id = %s AND m.{off} = %s)"] * len(part))
            cur.execute(
                f"SELECT m.segment_id, m.{off}, {columns} FROM {members} m "  # noqa: S608
                f"JOIN {entries} e ON e.id = m.entry_id "
                f"JOIN {figures} f ON f.entry_id = m.entry_id WHERE {where}",
                [v for place in part for v in place],
            )
            for row in cur.fetchall():
                out[start[row[0]] + row[1]] = tuple(row[2:])
    return out


def _segment_at(route: Chain, depth: int) -> list[tuple[tuple[int, int], int]]:
    """The route's (segment, last offset) holding ``depth`` with its first depth (none
    when the route does not reach it)."""
    for seg, start in zip(route.segments, route.starts, strict=True):
        if start <= depth <= start + seg[1]:
            return [(seg, start)]
    return []
