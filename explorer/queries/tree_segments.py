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
    # The entry table's (session, id) key keeps ids unique, so the fold's total (its node
    # count) is the session's entries; the segments hold them all unless parents loop.
    total = sum(s.length for s in segments.values())
    if total != session.entry_count or not total:
        # Counted where the two disagree, and where no entry is placed: a session whose
        # every entry is in a parent loop has no segment, whatever its counter says.
        total = Entry.objects.filter(session=session).count()

    def load(segs: Sequence[int]) -> dict[int, list[tuple[GraphNode, int]]]:
        rows = (
            SegmentEntry.objects.filter(segment_id__in=segs)
            .order_by("segment_id", "offset")
            .values_list(
                "segment_id", "entry__entry_id", "entry__parent_id", "entry__type",
                "entry__role", "entry__position",
            )
        )  # fmt: skip
        out: dict[int, list[tuple[GraphNode, int]]] = {}
        for seg, eid, parent, kind, role, position in rows:
            node = GraphNode(eid, parent, kind, role or None, labels.get(eid), flags=marks_of(eid))
            out.setdefault(seg, []).append((node, position))
        return out

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

    return SegmentTree(segments, load, place, total)
