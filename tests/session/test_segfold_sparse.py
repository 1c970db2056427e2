"""The folded tree made from segments read sparsely (``explorer.session.segfold``: the
stops of each segment and their neighbours, the plain runs between them stepped over by
``graph.fold_walk``) equals ``fold_tree`` on the whole tree, with no database: random trees
with long chains, user messages, compactions, labels, pins, unfolded chains, ``root=``
subtrees and small budgets. The segments are cut here as ``explorer.segment_store`` cuts
them (an entry joins its parent's segment when the parent is that segment's tail)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.session.graph import FoldedGraph, GraphNode, fold_tree
from explorer.session.segfold import Row, SegmentSpec, SegmentTree, fold_segments

KINDS = [
    ("message", "user"),
    ("message", "assistant"),
    ("message", "assistant"),
    ("message", "toolResult"),
    ("message", "toolResult"),
    ("compaction", None),
    ("branch_summary", None),
    ("custom", None),
]


class MemoryReader:
    """The rows of each segment in memory; counts what it hands out."""

    def __init__(self, rows: dict[int, list[Row]]) -> None:
        self.rows = rows
        self.handed = 0
        self.wholes = 0

    def whole(self, segs: Sequence[int]) -> dict[int, list[Row]]:
        self.wholes += 1
        out = {s: list(self.rows[s]) for s in segs}
        self.handed += sum(len(r) for r in out.values())
        return out

    def marked(self, segs: Sequence[int], keep: Collection[str]) -> dict[int, list[Row]]:
        out = {
            s: [
                r
                for r in self.rows[s]
                if r[1].label
                or r[1].type in ("compaction", "branch_summary")
                or (r[1].type == "message" and r[1].role == "user")
                or r[1].id in keep
            ]
            for s in segs
        }
        self.handed += sum(len(r) for r in out.values())
        return out

    def at(self, places: Mapping[int, Collection[int]]) -> dict[int, list[Row]]:
        out = {s: [r for r in self.rows[s] if r[0] in set(offs)] for s, offs in places.items()}
        self.handed += sum(len(r) for r in out.values())
        return out


def segment_tree(nodes: list[GraphNode]) -> tuple[SegmentTree, MemoryReader]:
    """Segments of ``nodes`` (in file order, parents first) and a tree reading them."""
    specs: dict[int, SegmentSpec] = {}
    rows: dict[int, list[Row]] = {}
    place: dict[str, tuple[int, int]] = {}
    for position, node in enumerate(nodes, start=1):
        up = place.get(node.parent_id) if node.parent_id else None
        if up is not None and up[1] == specs[up[0]].length - 1:
            seg = up[0]
            spec = specs[seg]
            specs[seg] = SegmentSpec(
                spec.head, spec.head_position, spec.parent, spec.parent_offset, spec.length + 1
            )
        else:
            seg = len(specs) + 1
            specs[seg] = SegmentSpec(
                node.id, position, up[0] if up else None, up[1] if up else None, 1
            )
            rows[seg] = []
        place[node.id] = (seg, len(rows[seg]))
        rows[seg].append((len(rows[seg]), node, position))
    reader = MemoryReader(rows)
    return SegmentTree(specs, reader, place.get, len(nodes)), reader


def flat(graph: FoldedGraph) -> tuple:
    return (
        [(i.key, i.kind, i.entry_id, i.parent_key, i.count, i.last_id, i.node, i.active,
          i.leaves, i.side_branches, i.merged, i.user_turns, [c.key for c in i.children])
         for i in graph.items],
        [r.key for r in graph.roots],
        graph.total_entries,
        graph.truncated,
    )  # fmt: skip


@st.composite
def trees(draw: st.DrawFn) -> list[GraphNode]:
    n = draw(st.integers(1, 160))
    nodes: list[GraphNode] = []
    for i in range(n):
        # Mostly the previous entry's child (long chains), sometimes a branch or a root.
        how = draw(st.integers(0, 19))
        if i == 0 or how == 0:
            parent = None
        elif how < 17:
            parent = nodes[-1].id
        else:
            parent = nodes[draw(st.integers(0, i - 1))].id
        kind, role = KINDS[draw(st.integers(0, len(KINDS) - 1))]
        label = "look" if draw(st.integers(0, 24)) == 0 else None
        nodes.append(GraphNode(f"e{i}", parent, kind, role, label))
    return nodes


def route(nodes: list[GraphNode], leaf: str) -> list[str]:
    parent = {n.id: n.parent_id for n in nodes}
    out = [leaf]
    while parent.get(out[-1]):
        out.append(parent[out[-1]])  # type: ignore[arg-type]
    return out[::-1]


@settings(max_examples=300, deadline=None)
@given(trees(), st.data())
def test_sparse_fold_equals_fold_tree(nodes: list[GraphNode], data: st.DataObject) -> None:
    ids = [n.id for n in nodes]
    parents = {n.parent_id for n in nodes}
    leaves = [i for i in ids if i not in parents]
    cursor = data.draw(st.sampled_from([None, *leaves]))
    path = route(nodes, cursor) if cursor else []
    view: dict = {"max_nodes": data.draw(st.sampled_from([3, 5, 12, 80]))}
    if data.draw(st.booleans()):
        view["pinned"] = data.draw(st.lists(st.sampled_from(ids), max_size=4))
    if path and data.draw(st.integers(0, 4)) == 0:
        view["expanded"] = path[1::3]
    if cursor is None and data.draw(st.integers(0, 3)) == 0:
        view["root_id"] = data.draw(st.sampled_from(ids))
    want = fold_tree(nodes, active_path=path, cursor_id=cursor, **view)
    tree, _reader = segment_tree(nodes)
    got = fold_segments(tree, active_path=path, cursor_id=cursor, **view)
    assert flat(got) == flat(want)


def test_a_long_route_is_read_by_its_stops():
    """A 2,000-entry route of turns (a user message, then 19 replies and tool results) with
    a side branch: the fold equals ``fold_tree``'s, reads no segment whole and hands out a
    small part of the entries (the user messages, stops and their neighbours)."""
    nodes = []
    for i in range(2000):
        role = "user" if i % 20 == 0 else ("assistant" if i % 2 else "toolResult")
        nodes.append(GraphNode(f"e{i}", f"e{i - 1}" if i else None, "message", role))
    nodes += [GraphNode(f"s{k}", "e500" if k == 0 else f"s{k - 1}", "message", "assistant")
              for k in range(300)]  # fmt: skip
    path = route(nodes, "e1999")
    want = fold_tree(nodes, active_path=path, cursor_id="e1999", max_nodes=80)
    tree, reader = segment_tree(nodes)
    got = fold_segments(tree, active_path=path, cursor_id="e1999", max_nodes=80)
    assert flat(got) == flat(want)
    assert reader.wholes == 0
    assert reader.handed < 400  # of 2,300 entries
    assert any(i.kind == "chain" and i.user_turns for i in got.items)
