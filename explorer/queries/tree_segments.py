"""The Tree tab's tree read from the segments (``explorer.segment_store``): the segment
rows in one query, then the entry index rows of the segments the fold walks
(``explorer.session.segfold``), never a row per entry of the session."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

from django.db import connection

from explorer.models import Entry, Segment, SegmentEntry, Session
from explorer.segment_store import q_offset
from explorer.session import jsonfmt
from explorer.session.graph import DISTINCT_TYPES, GraphNode
from explorer.session.segfold import Row, SegmentSpec, SegmentTree


def segment_tree(
    session: Session,
    labels: Mapping[str, str],
    marks_of: Callable[[str], frozenset[str]],
) -> SegmentTree:
    """The session's tree for :func:`~explorer.session.segfold.fold_segments`, each node
    carrying its label and marks (``marks_of``)."""
    segments = {
        pk: SegmentSpec(head, position, parent, offset, length)
        for pk, head, position, parent, offset, length in Segment.objects.filter(session=session)
        .order_by()
        .values_list(
            "pk", "head__entry_id", "head_position", "parent_segment_id", "parent_offset", "length"
        )
    }
    # The entry table's (session, id) key keeps ids unique, so the fold's total (its node
    # count) is the session's entries; the segments hold them all unless parents loop.
    total = sum(s.length for s in segments.values())
    if total != session.entry_count or not total:
        # Counted where the two disagree, and where no entry is placed: a session whose
        # every entry is in a parent loop has no segment, whatever its counter says.
        total = Entry.objects.filter(session=session).count()

    def place(entry_id: str) -> tuple[int, int] | None:
        # The entry's row by the (session, entry id) key, then its member row by the entry:
        # a join ordered by position made SQLite walk the session's members.
        pks = list(
            Entry.objects.filter(session=session, entry_id=entry_id).values_list("pk", flat=True)[
                :1
            ]
        )
        if not pks:
            return None
        row = (
            SegmentEntry.objects.filter(entry_id=pks[0]).values_list("segment_id", "offset").first()
        )
        if row is None or row[0] is None:
            return None
        return row[0], row[1]

    return SegmentTree(segments, _Reader(labels, marks_of), place, total)


# Ids named in one statement at most (labelled, pinned, the cursor; offsets of a segment):
# beyond, the segments are read whole (a fold with thousands of pins) or in batches.
_MAX_NAMED = 900


class _Reader:
    """A segment's entries for :class:`SegmentTree`: whole, the marked ones (one statement
    with a condition on type and role: SQLite steps over the plain runs' index rows but
    makes no Python row of them), or at given offsets."""

    def __init__(self, labels: Mapping[str, str], marks_of: Callable[[str], frozenset[str]]):
        self.labels = labels
        self.marks_of = marks_of

    def _rows(self, rows: Iterable[tuple[Any, ...]]) -> dict[int, list[Row]]:
        out: dict[int, list[Row]] = {}
        labels, marks_of = self.labels, self.marks_of
        for seg, offset, eid, parent, kind, role, position in rows:
            node = GraphNode(eid, parent, kind, role or None, labels.get(eid), flags=marks_of(eid))
            out.setdefault(seg, []).append((offset, node, position))
        return out

    def whole(self, segs: Sequence[int]) -> dict[int, list[Row]]:
        return self._rows(
            SegmentEntry.objects.filter(segment_id__in=segs)
            .order_by("segment_id", "offset")
            .values_list(
                "segment_id", "offset", "entry__entry_id", "entry__parent_id", "entry__type",
                "entry__role", "entry__position",
            )
        )  # fmt: skip

    def marked(self, segs: Sequence[int], keep: Collection[str]) -> dict[int, list[Row]] | None:
        # Ids as the entry table stores them (a lone surrogate shown as U+FFFD).
        ids = sorted({jsonfmt.visible(i) for i in (*keep, *self.labels)})
        if len(ids) + len(segs) > _MAX_NAMED:
            return None
        types = sorted(DISTINCT_TYPES)
        named = f"OR e.entry_id IN ({', '.join(['%s'] * len(ids))})" if ids else ""
        where = (
            f"m.segment_id IN ({', '.join(['%s'] * len(segs))}) AND "
            f"(e.type IN ({', '.join(['%s'] * len(types))}) "
            f"OR (e.type = %s AND e.role = %s) {named})"
        )
        return self._rows(_member_rows(where, [*segs, *types, "message", "user", *ids]))

    def at(self, places: Mapping[int, Collection[int]]) -> dict[int, list[Row]]:
        off = q_offset()
        out: dict[int, list[Row]] = {}
        pairs = [(seg, o) for seg, offsets in places.items() for o in offsets]
        for k in range(0, len(pairs), _MAX_NAMED // 2):
            batch = pairs[k : k + _MAX_NAMED // 2]
            by_seg: dict[int, list[int]] = {}
            for seg, o in batch:
                by_seg.setdefault(seg, []).append(o)
            where = " OR ".join(
                f"(m.segment_id = %s AND m.{off} IN ({', '.join(['%s'] * len(os))}))"
                for os in by_seg.values()
            )
            params = [p for seg, os in by_seg.items() for p in (seg, *os)]
            for seg, rows in self._rows(_member_rows(where, params)).items():
                out.setdefault(seg, []).extend(rows)
        return out


def _member_rows(where: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    """(segment, offset, id, parent, type, role, position) of the segment members (``m``,
    their entries ``e``) meeting ``where``."""
    entries = connection.ops.quote_name(Entry._meta.db_table)
    members = connection.ops.quote_name(SegmentEntry._meta.db_table)
    off = q_offset()
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT m.segment_id, m.{off}, e.entry_id, e.parent_id, e.type, e.role, "
            f"e.position FROM {members} m JOIN {entries} e ON e.id = m.entry_id "
            f"WHERE {where}",
            list(params),
        )
        return cur.fetchall()
