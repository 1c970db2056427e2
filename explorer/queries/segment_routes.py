"""A route read from the tree's stored segments, by position ranges, instead of walked.

The route walk (``routes._walk_up``) looks every entry up by its parent's id, one step per
entry: on the 2 GB benchmark session a Compare's three routes of ~2,000-3,000 entries took
0.2 s that way. The stored segments (``explorer.segment_store``) give a route as a short
chain of (segment, last offset), and a segment's entries are mostly neighbours in the file;
so the route is read as a few position ranges of the covering skeleton index (session,
position, id, parent, type), each range's chain picked out by its parent links from the
segment's last entry on the route back to its head.

Every answer is checked against what the walk would give (each entry the parent of the
next, each segment's chain ending at its head, the root's parent not stored): where the
segments cannot settle a route (an entry in no segment: below a loop; a chain not found in
its range; ranges far larger than the route, as when a branch's entries lie far apart in
the file) the answer is None and the caller walks.
"""

from __future__ import annotations

from typing import Any

from django.db import connection

from explorer.models import Entry, Segment, SegmentEntry
from explorer.queries.routes import LightEntry
from explorer.segment_store import q_offset
from explorer.session import jsonfmt

__all__ = ["segment_route"]

# Rows of the position ranges read, past which the walk is cheaper: a few times the route
# (other branches' entries interleaved) plus a constant for short routes.
SPREAD = 4
SLACK = 2048


def segment_route(session: Any, entry_id: str) -> list[LightEntry] | None:
    """Root→``entry_id`` index rows as ``routes.light_path`` gives them, from the segments;
    None when they do not settle it (the caller walks)."""
    entries = connection.ops.quote_name(Entry._meta.db_table)
    members = connection.ops.quote_name(SegmentEntry._meta.db_table)
    segments = connection.ops.quote_name(Segment._meta.db_table)
    off = q_offset()
    with connection.cursor() as cur:
        # The chain of segments above the entry, its own first: (segment, last offset on
        # the route, head position, parent segment).
        cur.execute(
            f"""
            WITH RECURSIVE up(seg, upto, n) AS (
                SELECT m.segment_id, m.{off}, 0 FROM {entries} e
                JOIN {members} m ON m.entry_id = e.id
                WHERE e.session_id = %s AND e.entry_id = %s
                UNION ALL
                SELECT s.parent_segment_id, s.parent_offset, up.n + 1 FROM {segments} s
                JOIN up ON s.id = up.seg
                WHERE s.parent_segment_id IS NOT NULL AND up.n < %s
            )
            SELECT up.seg, up.upto, s.head_position, s.parent_segment_id
            FROM up JOIN {segments} s ON s.id = up.seg ORDER BY up.n
            """,
            [session.pk, jsonfmt.visible(entry_id), max(session.entry_count, 1) + 1],
        )
        chain = cur.fetchall()
        if not chain or chain[0][0] is None or chain[-1][3] is not None:
            return None  # in no segment, or a chain that does not end at a root
        length = sum(upto + 1 for _seg, upto, _head, _parent in chain)
        # Each segment's last entry on the route: its position bounds the range read.
        wanted = " OR ".join([f"(m.segment_id = %s AND m.{off} = %s)"] * len(chain))
        cur.execute(
            f"SELECT m.segment_id, e.position, e.entry_id FROM {members} m "
            f"JOIN {entries} e ON e.id = m.entry_id WHERE {wanted}",
            [v for seg, upto, _head, _parent in chain for v in (seg, upto)],
        )
        tails = {seg: (position, eid) for seg, position, eid in cur.fetchall()}
        if len(tails) != len(chain) or tails[chain[0][0]][1] != jsonfmt.visible(entry_id):
            return None
        spans = []
        for seg, _upto, head, _parent in chain:
            tail_position = tails[seg][0]
            if tail_position < head:
                return None  # a chain against file order (a parent stored later)
            spans.append((head, tail_position))
        if sum(b - a + 1 for a, b in spans) > SPREAD * length + SLACK:
            return None
        # The session in each term: SQLite then reads each range from the index (one
        # search per term); factored out, it scanned the whole session's rows.
        ranges = " OR ".join(
            ["(session_id = %s AND position >= %s AND position <= %s)"] * len(spans)
        )
        cur.execute(
            f"SELECT entry_id, parent_id, type, position, id FROM {entries} WHERE {ranges}",  # noqa: S608
            [v for a, b in spans for v in (session.pk, a, b)],
        )
        rows = {r[0]: r for r in cur.fetchall()}
        route: list[tuple] = []
        for (_seg, upto, head, _parent), (_pos, tail_id) in zip(
            chain, (tails[c[0]] for c in chain), strict=True
        ):
            piece = _chain(rows, tail_id, upto + 1, head)
            if piece is None:
                return None
            if route and route[-1][1] != piece[0][0]:
                return None  # the segment below does not hang from this one's tail
            route.extend(piece)
        route.reverse()
        root_parent = route[0][1]
        if root_parent is not None and root_parent != route[0][0]:
            cur.execute(
                f"SELECT 1 FROM {entries} WHERE session_id = %s AND entry_id = %s",
                [session.pk, root_parent],
            )
            if cur.fetchone() is not None:
                return None  # the walk would go on: the segments are not this tree's
    return [LightEntry(r[0], r[1], r[2], "", r[3], 0, 0, "", r[4]) for r in route]


def _chain(rows: dict[str, tuple], tail: str, count: int, head: int) -> list[tuple] | None:
    """``count`` rows from ``tail`` up its parent links (leaf first), the last one at
    position ``head``; None when the rows read do not hold that chain."""
    out: list[tuple] = []
    at: str | None = tail
    for _ in range(count):
        row = rows.get(at) if at is not None else None
        if row is None:
            return None
        out.append(row)
        at = row[1]
    return out if out[-1][3] == head else None
