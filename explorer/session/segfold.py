"""The folded tree (``graph.fold_tree``) made from the tree's segments, reading only the
entries the fold walks.

``fold_tree`` needs the children lists, the roots and every subtree's size of the whole
tree, which meant reading (and keeping) a row per entry of the session. Its walk, though,
looks only at the entries it draws or folds into a drawn chain, and at the sizes of the
subtrees it closes. The segments (``explorer.segment_store``: linear runs, one row per
branch) give all of that: an entry's children are the next entry of its segment and the
heads of the segments hanging at it, in file order; a subtree's size is summed over
segment rows. So :class:`SegmentTree` answers ``fold_walk``'s reads with mappings that load
a segment's entries the first time the walk enters it, and the fold equals
``fold_tree``'s on the same tree.

Pure: the caller passes the segment rows and a loader of a segment's entries (as
:class:`GraphNode` with the request's labels and marks, and their file positions).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from .graph import DEFAULT_MAX_NODES, FoldedGraph, GraphNode, fold_walk

__all__ = ["SegmentSpec", "SegmentTree", "fold_segments", "size_within", "subtree_total"]


@dataclass(frozen=True, slots=True)
class SegmentSpec:
    """One segment: its head entry's id and file position, where it hangs (None: a root)
    and how many entries it holds."""

    head: str
    head_position: int
    parent: int | None
    parent_offset: int | None
    length: int


# Segment ids → their entries in offset order, as (node, file position).
MemberLoader = Callable[[Sequence[int]], Mapping[int, Sequence[tuple[GraphNode, int]]]]


class SegmentTree:
    """The tree of ``segments``, its entries loaded per segment on demand (``load``), and
    ``place`` giving an entry's (segment, offset) for the ones not reached from a loaded
    segment (the route, a ``root=`` subtree)."""

    def __init__(
        self,
        segments: Mapping[int, SegmentSpec],
        load: MemberLoader,
        place: Callable[[str], tuple[int, int] | None],
        total: int,
    ) -> None:
        self.segments = segments
        self._load = load
        self._place = place
        self.total = total
        self.hanging: dict[int, list[tuple[int, int]]] = {}
        for sid, spec in segments.items():
            if spec.parent is not None and spec.parent_offset is not None:
                self.hanging.setdefault(spec.parent, []).append((spec.parent_offset, sid))
        self.roots = [
            s.head
            for s in sorted(
                (s for s in segments.values() if s.parent is None), key=lambda s: s.head_position
            )
        ]
        self.where: dict[str, tuple[int, int] | None] = {
            s.head: (sid, 0) for sid, s in segments.items()
        }
        self.members: dict[int, Sequence[tuple[GraphNode, int]]] = {}
        self.nodes: dict[str, GraphNode] = {}
        self._totals: dict[int, tuple[int, int]] = {}

    # -- loading -----------------------------------------------------------------------

    def load(self, segs: Iterable[int]) -> None:
        """Read the entries of the segments not read yet (one call for all of them)."""
        wanted = [s for s in dict.fromkeys(segs) if s not in self.members]
        if not wanted:
            return
        found = self._load(wanted)
        for sid in wanted:
            rows = found.get(sid, ())
            self.members[sid] = rows
            for offset, (node, _position) in enumerate(rows):
                self.where[node.id] = (sid, offset)
                self.nodes.setdefault(node.id, node)

    def spot(self, nid: str) -> tuple[int, int] | None:
        if nid not in self.where:
            self.where[nid] = self._place(nid)
        return self.where[nid]

    def route_segments(self, seg: int) -> list[int]:
        """``seg`` and the segments above it, up to its root."""
        out = []
        cur: int | None = seg
        while cur is not None:
            out.append(cur)
            cur = self.segments[cur].parent
        return out

    def node(self, nid: str) -> GraphNode | None:
        known = self.nodes.get(nid)
        if known is not None:
            return known
        spot = self.spot(nid)
        if spot is None:
            return None
        self.load([spot[0]])
        return self.nodes.get(nid)

    # -- the tree ----------------------------------------------------------------------

    def children_of(self, nid: str) -> list[str]:
        spot = self.spot(nid)
        if spot is None:
            return []
        seg, offset = spot
        spec = self.segments[seg]
        kids: list[tuple[int, str]] = []
        if offset < spec.length - 1:
            self.load([seg])
            node, position = self.members[seg][offset + 1]
            kids.append((position, node.id))
        for o, child in self.hanging.get(seg, ()):
            if o == offset:
                head = self.segments[child]
                kids.append((head.head_position, head.head))
        kids.sort()
        return [k for _p, k in kids]

    def total_of(self, seg: int) -> tuple[int, int]:
        """(entries, leaves) of a segment's subtree, from its head."""
        return subtree_total(seg, lambda s: self.segments[s].length, self.hanging, self._totals)

    def size_of(self, nid: str) -> tuple[int, int] | None:
        spot = self.spot(nid)
        if spot is None:
            return None
        seg, offset = spot
        return size_within(
            seg, offset, lambda s: self.segments[s].length, self.hanging, self._totals
        )


def subtree_total(
    seg: int,
    length_of: Callable[[int], int],
    hanging: Mapping[int, Sequence[tuple[int, int]]],
    totals: dict[int, tuple[int, int]],
) -> tuple[int, int]:
    """(entries, leaves) of the subtree from segment ``seg``'s head, given each segment's
    length and the (offset, child segment) pairs hanging from it; ``totals`` keeps every
    segment's answer for later calls. Children first, without recursion: a tree can be
    thousands of branches deep."""
    known = totals.get(seg)
    if known is not None:
        return known
    stack = [seg]
    while stack:
        top = stack[-1]
        pending = [c for _o, c in hanging.get(top, ()) if c not in totals]
        if pending:
            stack.extend(pending)
            continue
        stack.pop()
        entries, leaves = length_of(top), 1  # the tail is a leaf
        for _o, c in hanging.get(top, ()):
            ce, cl = totals[c]
            entries += ce
            leaves += cl
        totals[top] = (entries, leaves)
    return totals[seg]


def size_within(
    seg: int,
    offset: int,
    length_of: Callable[[int], int],
    hanging: Mapping[int, Sequence[tuple[int, int]]],
    totals: dict[int, tuple[int, int]],
) -> tuple[int, int]:
    """(entries, leaves) of the subtree of the entry at (``seg``, ``offset``): the rest of
    its segment plus every subtree hanging at or below that offset (what
    ``TreeShape.sizes`` holds for the entry)."""
    entries, leaves = length_of(seg) - offset, 1
    for o, c in hanging.get(seg, ()):
        if o >= offset:
            ce, cl = subtree_total(c, length_of, hanging, totals)
            entries += ce
            leaves += cl
    return entries, leaves


class _Children(Mapping[str, list[str]]):
    def __init__(self, tree: SegmentTree) -> None:
        self.tree = tree
        self.known: dict[str, list[str]] = {}

    def __getitem__(self, nid: str) -> list[str]:
        kids = self.known.get(nid)
        if kids is None:
            kids = self.known[nid] = self.tree.children_of(nid)
        if not kids:
            raise KeyError(nid)
        return kids

    def __len__(self) -> int:  # not read by the walk
        return len(self.known)

    def __iter__(self) -> Iterator[str]:
        return iter(self.known)


class _Sizes(Mapping[str, tuple[int, int]]):
    def __init__(self, tree: SegmentTree) -> None:
        self.tree = tree

    def __getitem__(self, nid: str) -> tuple[int, int]:
        size = self.tree.size_of(nid)
        if size is None:
            raise KeyError(nid)
        return size

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Iterator[str]:
        return iter(())


class _Nodes(Mapping[str, GraphNode]):
    def __init__(self, tree: SegmentTree) -> None:
        self.tree = tree

    def __getitem__(self, nid: str) -> GraphNode:
        node = self.tree.node(nid)
        if node is None:
            raise KeyError(nid)
        return node

    def __contains__(self, nid: object) -> bool:
        return isinstance(nid, str) and self.tree.node(nid) is not None

    def __len__(self) -> int:
        return self.tree.total

    def __iter__(self) -> Iterator[str]:  # not read by the walk
        return iter(self.tree.nodes)


def fold_segments(
    tree: SegmentTree,
    *,
    active_path: Sequence[str] = (),
    cursor_id: str | None = None,
    root_id: str | None = None,
    expanded: Iterable[str] = (),
    pinned: Iterable[str] = (),
    max_nodes: int = DEFAULT_MAX_NODES,
) -> FoldedGraph:
    """What ``fold_tree`` gives for the tree ``tree`` describes (same arguments), reading
    the entries of the segments the walk enters and of the active path's."""
    if active_path:
        spot = tree.spot(active_path[-1])
        if spot is not None:
            tree.load(tree.route_segments(spot[0]))
    nodes = _Nodes(tree)
    starts = [root_id] if root_id and root_id in nodes else tree.roots
    return fold_walk(
        nodes,
        _Children(tree),
        tree.roots,
        starts,
        _Sizes(tree),
        active_path=active_path,
        cursor_id=cursor_id,
        expanded=expanded,
        pinned=pinned,
        max_nodes=max_nodes,
    )
