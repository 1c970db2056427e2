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

from bisect import bisect_right
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from .graph import (
    DEFAULT_MAX_NODES,
    DISTINCT_TYPES,
    FoldedGraph,
    GraphNode,
    fold_walk,
    is_user_turn,
)

__all__ = [
    "MemberReader",
    "SegmentSpec",
    "SegmentTree",
    "fold_segments",
    "size_within",
    "subtree_total",
]


@dataclass(frozen=True, slots=True)
class SegmentSpec:
    """One segment: its head entry's id and file position, where it hangs (None: a root)
    and how many entries it holds."""

    head: str
    head_position: int
    parent: int | None
    parent_offset: int | None
    length: int


# One entry of a segment as read: (offset, node, file position).
Row = tuple[int, GraphNode, int]


class MemberReader(Protocol):
    """Reads a segment's entries for :class:`SegmentTree`."""

    def whole(self, segs: Sequence[int]) -> Mapping[int, Sequence[Row]]:
        """Every entry of ``segs``."""
        ...

    def marked(
        self, segs: Sequence[int], keep: Collection[str]
    ) -> Mapping[int, Sequence[Row]] | None:
        """At least the entries of ``segs`` that are labelled, compactions or branch
        summaries, user messages or one of ``keep``; None where it cannot (then the
        segments are read whole)."""
        ...

    def at(self, places: Mapping[int, Collection[int]]) -> Mapping[int, Sequence[Row]]:
        """The entries at these offsets of these segments."""
        ...


class SegmentTree:
    """The tree of ``segments``, its entries read per segment on demand (``reader``), and
    ``place`` giving an entry's (segment, offset) for the ones not reached from a loaded
    segment (the route, a ``root=`` subtree).

    Once :meth:`sparse` is called, a segment is read sparsely: the entries that can stop a
    folded chain (its head, tail and branch points, labelled entries, compactions, branch
    summaries, kept ids, and the user turns the fold draws) with the one before and the two
    after each, plus its user messages (a folded chain counts them). The plain runs between
    are not read; the fold steps over them (``graph.QuietRuns``). An entry asked for that a
    sparse read left out reads its whole segment, as before."""

    def __init__(
        self,
        segments: Mapping[int, SegmentSpec],
        reader: MemberReader,
        place: Callable[[str], tuple[int, int] | None],
        total: int,
    ) -> None:
        self.segments = segments
        self._reader = reader
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
        # segment → offset → (node, file position): every entry of a segment read whole,
        # some of one read sparsely.
        self.members: dict[int, dict[int, tuple[GraphNode, int]]] = {}
        self.whole: set[int] = set()
        self.nodes: dict[str, GraphNode] = {}
        self._totals: dict[int, tuple[int, int]] = {}
        self._keep: frozenset[str] | None = None
        self._stops: dict[int, list[int]] = {}  # sparse segment → stop offsets, sorted
        self._users: dict[int, list[int]] = {}  # sparse segment → user message offsets
        self.stop_ids: set[str] = set()

    # -- loading -----------------------------------------------------------------------

    def sparse(self, keep: Iterable[str]) -> None:
        """Read segments sparsely from now on; ``keep``: ids that stop a plain run."""
        self._keep = frozenset(keep)

    def load(self, segs: Iterable[int]) -> None:
        """Read the entries of the segments not read yet (one call for all of them)."""
        wanted = [s for s in dict.fromkeys(segs) if s not in self.members]
        if not wanted:
            return
        keep = self._keep
        found = None if keep is None else self._reader.marked(wanted, keep)
        if found is None or keep is None:
            self._read_whole(wanted)
            return
        for sid in wanted:
            self.members[sid] = {}
            self._take(sid, found.get(sid, ()))
            got = self.members[sid]
            spec = self.segments[sid]
            stops = {0, spec.length - 1, *(o for o, _c in self.hanging.get(sid, ()))}
            stops.update(
                o
                for o, (node, _p) in got.items()
                if node.label or node.type in DISTINCT_TYPES or node.id in keep
            )
            self._stops[sid] = sorted(stops)
            self._users[sid] = sorted(o for o, (node, _p) in got.items() if is_user_turn(node))
        self._fill({sid: self._stops[sid] for sid in wanted})

    def _read_whole(self, segs: list[int]) -> None:
        found = self._reader.whole(segs)
        for sid in segs:
            self.members[sid] = {}
            self._take(sid, found.get(sid, ()))
            self.whole.add(sid)
            self._stops.pop(sid, None)
            self._users.pop(sid, None)

    def _take(self, sid: int, rows: Iterable[Row]) -> None:
        got = self.members[sid]
        for offset, node, position in rows:
            got[offset] = (node, position)
            self.where[node.id] = (sid, offset)
            self.nodes.setdefault(node.id, node)

    def _fill(self, stops: Mapping[int, Iterable[int]]) -> None:
        """Read the stops given and the entry before and the two after each (what the walk
        reads around a stop), where not read yet."""
        need: dict[int, list[int]] = {}
        for sid, offsets in stops.items():
            got = self.members[sid]
            last = self.segments[sid].length - 1
            want = {o + d for o in offsets for d in (-1, 0, 1, 2)}
            missing = sorted(o for o in want if 0 <= o <= last and o not in got)
            if missing:
                need[sid] = missing
        if need:
            found = self._reader.at(need)
            for sid in need:
                self._take(sid, found.get(sid, ()))
        for sid, offsets in stops.items():
            got = self.members[sid]
            self.stop_ids.update(got[o][0].id for o in offsets if o in got)

    def member(self, seg: int, offset: int) -> tuple[GraphNode, int]:
        """The entry at ``offset`` of ``seg`` (its whole segment read if a sparse read left
        it out)."""
        self.load([seg])
        row = self.members[seg].get(offset)
        if row is None and seg not in self.whole:
            self._read_whole([seg])
            row = self.members[seg].get(offset)
        if row is None:
            raise KeyError((seg, offset))
        return row

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
        if nid not in self.nodes and spot[0] not in self.whole:
            self._read_whole([spot[0]])
        return self.nodes.get(nid)

    # -- the plain runs (graph.QuietRuns) -----------------------------------------------

    def path_candidates(self, path: Sequence[str]) -> tuple[Sequence[str], Collection[str]] | None:
        if self._keep is None or not path:
            return None
        spot = self.spot(path[-1])
        if spot is None:
            return None
        seg, offset = spot
        chain = self.route_segments(seg)
        top = self.segments[chain[-1]]
        length = offset + 1 + sum((self.segments[s].parent_offset or 0) + 1 for s in chain[:-1])
        if length != len(path) or top.head != path[0]:
            return None  # not the tree's route to its last id: the walk reads the path
        self.load(chain)
        if any(s in self.whole for s in chain):
            return None
        plain: set[str] = set()
        upto = offset
        for sid in chain:
            got = self.members[sid]
            stops = set(self._stops[sid])
            plain.update(got[o][0].id for o in self._users[sid] if o <= upto and o not in stops)
            upto = self.segments[sid].parent_offset or 0
        return [a for a in path if a in self.stop_ids or a in plain], plain

    def stop_at(self, ids: Collection[str]) -> None:
        added: dict[int, list[int]] = {}
        for nid in ids:
            spot = self.spot(nid)
            if spot is None or spot[0] not in self._stops:
                continue
            sid, offset = spot
            stops = self._stops[sid]
            at = bisect_right(stops, offset)
            if not at or stops[at - 1] != offset:
                stops.insert(at, offset)
                added.setdefault(sid, []).append(offset)
        if added:
            self._fill(added)

    def quiet_after(self, nid: str) -> tuple[int, str, int, str] | None:
        spot = self.spot(nid)
        if spot is None:
            return None
        seg, offset = spot
        stops = self._stops.get(seg)
        if stops is None or seg in self.whole:
            return None
        if offset >= self.segments[seg].length - 1 or self._branches(seg, offset):
            return None  # not one child
        at = bisect_right(stops, offset)
        if at == len(stops):
            return None
        nxt = stops[at]
        count = nxt - offset - 1
        if count <= 0:
            return None
        users = self._users[seg]
        inside = bisect_right(users, nxt - 1) - bisect_right(users, offset)
        last = self.member(seg, nxt - 1)[0].id
        after = self.member(seg, nxt)[0].id
        return count, last, inside, after

    def _branches(self, seg: int, offset: int) -> bool:
        return any(o == offset for o, _c in self.hanging.get(seg, ()))

    # -- the tree ----------------------------------------------------------------------

    def children_of(self, nid: str) -> list[str]:
        spot = self.spot(nid)
        if spot is None:
            return []
        seg, offset = spot
        spec = self.segments[seg]
        kids: list[tuple[int, str]] = []
        if offset < spec.length - 1:
            node, position = self.member(seg, offset + 1)
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
    the entries of the segments the walk enters and of the active path's: sparsely, the
    plain runs between the entries that can stop a chain stepped over, not read."""
    pinned = list(pinned)
    keep = {*pinned, *(i for i in (cursor_id, root_id) if i)}
    tree.sparse(keep)
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
        quiet=tree,
    )
