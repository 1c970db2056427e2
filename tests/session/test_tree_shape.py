"""`TreeShape`: a kept and extended shape folds exactly as one built from scratch."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.session.graph import GraphNode, TreeShape, fold_tree


def _records(seed: int, n: int) -> list[tuple[str, str | None, str, str | None]]:
    """A random append-only tree: each entry's parent is an earlier one, mostly the last."""
    rng = random.Random(seed)
    out: list[tuple[str, str | None, str, str | None]] = []
    for i in range(n):
        if not out or rng.random() < 0.03:
            parent = None
        elif rng.random() < 0.8:
            parent = out[-1][0]
        else:
            parent = rng.choice(out)[0]
        role = rng.choice(["user", "assistant", "toolResult"])
        kind = "compaction" if rng.random() < 0.02 else "message"
        out.append((f"e{i:05d}", parent, kind, role if kind == "message" else None))
    return out


def _fold(nodes, shape, cursor):
    graph = fold_tree(nodes, active_path=_path(nodes, cursor), cursor_id=cursor, shape=shape)
    return [
        (i.kind, i.entry_id, i.parent_key, i.count, i.leaves, i.side_branches, i.user_turns)
        for i in graph.items
    ]


def _path(nodes, leaf):
    parent = {n.id: n.parent_id for n in (nodes.values() if isinstance(nodes, dict) else nodes)}
    out = []
    while leaf:
        out.append(leaf)
        leaf = parent.get(leaf)
    return out[::-1]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 400), cut=st.floats(0.0, 1.0))
def test_an_extended_shape_folds_like_a_fresh_one(seed, n, cut):
    records = _records(seed, n)
    k = int(len(records) * cut)
    shape = TreeShape.build([(r[0], r[1]) for r in records[:k]])
    assert shape.extend([(r[0], r[1]) for r in records[k:]])
    fresh = TreeShape.build([(r[0], r[1]) for r in records])
    assert shape.sizes == fresh.sizes and shape.children == fresh.children
    assert shape.roots == fresh.roots
    nodes = [GraphNode(i, p, t, r) for i, p, t, r in records]
    cursor = records[-1][0]
    assert _fold(nodes, shape, cursor) == _fold(nodes, None, cursor)


def test_what_an_extension_cannot_take_asks_for_a_rebuild():
    base = [("a", None), ("b", "a"), ("c", "zzz")]  # c waits for a parent not written yet
    shape = TreeShape.build(base)
    assert "zzz" in shape.missing
    assert not TreeShape.build(base).extend([("b", "a")])  # a repeated id
    assert not TreeShape.build(base).extend([("zzz", "a")])  # the awaited parent arrives
    assert not TreeShape.build(base).extend([("d", "e"), ("e", "a")])  # a later parent
    assert TreeShape.build(base).extend([("d", "b"), ("e", None), ("f", "e")])


def test_a_shape_of_other_nodes_is_not_used():
    records = _records(3, 50)
    nodes = [GraphNode(i, p, t, r) for i, p, t, r in records]
    stale = TreeShape.build([(r[0], r[1]) for r in records[:40]])
    cursor = records[-1][0]
    assert _fold(nodes, stale, cursor) == _fold(nodes, None, cursor)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 300))
def test_nodes_given_as_a_mapping_fold_like_the_list(seed, n):
    records = _records(seed, n)
    nodes = [GraphNode(i, p, t, r) for i, p, t, r in records]
    by_id = {node.id: node for node in nodes}
    shape = TreeShape.build([(r[0], r[1]) for r in records])
    cursor = records[len(records) // 2][0]
    assert _fold(by_id, shape, cursor) == _fold(nodes, shape, cursor) == _fold(nodes, None, cursor)


@settings(max_examples=60, deadline=None)
@given(
    links=st.dictionaries(
        st.sampled_from([f"n{i}" for i in range(12)]),
        st.lists(st.sampled_from([f"n{i}" for i in range(12)]), max_size=3),
        max_size=12,
    ),
    starts=st.lists(st.sampled_from([f"n{i}" for i in range(12)]), max_size=4),
)
def test_subtree_sizes_agree_with_the_guarded_walk_on_any_links(links, starts):
    """The breadth-first sizes equal the depth-first walk's, loops and repeats included
    (they fall back to it), so the fast path changes no figure."""
    from explorer.session.graph import _subtree_sizes, _subtree_sizes_walk

    assert _subtree_sizes(starts, links) == _subtree_sizes_walk(starts, links)


def test_subtree_sizes_of_a_deep_forest_are_counted_without_recursion():
    from explorer.session.graph import _subtree_sizes

    chain = {f"c{i}": [f"c{i + 1}"] for i in range(60_000)}
    chain["c10"].append("side")
    sizes = _subtree_sizes(["c0", "other"], chain)
    assert sizes["c0"] == (60_002, 2) and sizes["other"] == (1, 1) and sizes["side"] == (1, 1)


def test_graph_nodes_pickle_to_equal_nodes():
    import pickle

    plain = GraphNode("a", None, "message", "user")
    marked = GraphNode("b", "a", "label", None, "mine", "a title", frozenset({"hidden"}))
    back = pickle.loads(pickle.dumps({"a": plain, "b": marked}))
    assert back == {"a": plain, "b": marked}
    assert back["b"].flags == frozenset({"hidden"}) and back["b"].title == "a title"
