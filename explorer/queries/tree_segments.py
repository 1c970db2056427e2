"""The Tree tab's tree read from the segments (``explorer.segment_store``): the segment
rows in one query, then the entry index rows of the segments the fold walks
(``explorer.session.segfold``), never a row per entry of the session."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from explorer.models import Entry, Segment, SegmentEntry, Session
from explorer.session.graph import GraphNode
from explorer.session.segfold import SegmentSpec, SegmentTree


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
    # Entries in no segment are a repeated id's later records or entries under a parent
    # loop: rare, and only then are ids counted and repeated ids' last records read.
    unplaced = SegmentEntry.objects.filter(session=session, segment__isnull=True).exists()
    if unplaced:
        total = Entry.objects.filter(session=session).values("entry_id").distinct().count()
    else:
        total = sum(s.length for s in segments.values())

    def load(segs: Sequence[int]) -> dict[int, list[tuple[GraphNode, int]]]:
        rows = (
            SegmentEntry.objects.filter(segment_id__in=segs)
            .order_by("segment_id", "offset")
            .values_list(
                "segment_id", "entry__entry_id", "entry__parent_id", "entry__type",
                "entry__role", "entry__position",
            )
        )  # fmt: skip
        listed = list(rows)
        last: dict[str, tuple[str, str | None, str, str | None]] = {}
        if unplaced:
            # A repeated id is drawn as its last record (as a dict of the nodes holds it).
            for eid, parent, kind, role, _p in (
                Entry.objects.filter(session=session, entry_id__in={r[1] for r in listed})
                .order_by("position")
                .values_list("entry_id", "parent_id", "type", "role", "position")
            ):
                last[eid] = (eid, parent, kind, role)
        out: dict[int, list[tuple[GraphNode, int]]] = {}
        for seg, eid, parent, kind, role, position in listed:
            eid, parent, kind, role = last.get(eid, (eid, parent, kind, role))
            node = GraphNode(eid, parent, kind, role or None, labels.get(eid), flags=marks_of(eid))
            out.setdefault(seg, []).append((node, position))
        return out

    def place(entry_id: str) -> tuple[int, int] | None:
        row = (
            SegmentEntry.objects.filter(session=session, entry__entry_id=entry_id)
            .order_by("entry__position")
            .values_list("segment_id", "offset")
            .first()
        )
        if row is None or row[0] is None:
            return None
        return row[0], row[1]

    return SegmentTree(segments, load, place, total)
