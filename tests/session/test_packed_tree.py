"""`PackedTree`: the packed form of a tree's records and shape answers every read exactly as
the dict forms (`TreeShape.build`, `NodeTable.of`) of the same records do, after pickling
and after any sequence of extensions, and folds to the same graph."""

from __future__ import annotations

import pickle
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.session import packed
from explorer.session.graph import NodeTable, TreeShape, fold_tree
from explorer.session.packed import PackedTree

Record = tuple[str, "str | None", str, "str | None"]


def _records(seed: int, n: int, *, odd: bool = False) -> list[Record]:
    """A random append-only tree; with ``odd``, also dangling parents, parents named before
    they appear, self parents, empty parents and cycles, as damaged files have them."""
    rng = random.Random(seed)
    out: list[Record] = []
    for i in range(n):
        r = rng.random()
        if not out or r < 0.03:
            parent: str | None = None
        elif odd and r < 0.06:
            parent = rng.choice(["gone", "", f"e{i:05d}", f"e{i + 3:05d}"])
        elif r < 0.8:
            parent = out[-1][0]
        else:
            parent = rng.choice(out)[0]
        role = rng.choice(["user", "assistant", "toolResult"])
        kind = rng.choice(["compaction", "label"]) if rng.random() < 0.03 else "message"
        out.append((f"e{i:05d}", parent, kind, role if kind == "message" else None))
    if odd and n > 4:  # a cycle no root reaches: e1 -> e3 -> e1
        out[1] = (out[1][0], out[3][0], out[1][2], out[1][3])
        out[3] = (out[3][0], out[1][0], out[3][2], out[3][3])
    return out


def _facts(shape) -> tuple:
    return (
        dict(shape.children.items()),
        list(shape.roots),
        dict(shape.sizes.items()),
        dict(shape.parent.items()),
        set(shape.missing),
        len(shape.parent),
    )


def _same_as_fresh(tree: PackedTree, records: list[Record]) -> None:
    fresh = TreeShape.build(records)
    assert _facts(tree) == _facts(fresh)
    ids = [r[0] for r in records] + ["absent", "", None]
    for eid in ids:  # every single read fold_tree and its callers make
        assert tree.children.get(eid, ()) == fresh.children.get(eid, ())
        assert (eid in tree.children) == (eid in fresh.children)
        assert tree.sizes.get(eid, (1, 1)) == fresh.sizes.get(eid, (1, 1))
        assert (eid in tree.sizes) == (eid in fresh.sizes)
    table, plain = NodeTable(tree.rows), NodeTable.of(records)
    assert len(table) == len(plain) and list(table) == list(plain)
    assert {k: table[k] for k in plain} == {k: plain[k] for k in plain}


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 300), odd=st.booleans())
def test_a_packed_tree_reads_like_the_dict_forms(seed, n, odd):
    records = _records(seed, n, odd=odd)
    tree = PackedTree.pack(records)
    assert tree is not None
    _same_as_fresh(tree, records)
    _same_as_fresh(pickle.loads(pickle.dumps(tree)), records)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(2, 300),
    cuts=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4),
    odd=st.booleans(),
    pickled=st.booleans(),
)
def test_extensions_give_what_packing_everything_gives(seed, n, cuts, odd, pickled):
    """Appended in several batches (each on the tree the last one made, maybe unpickled in
    between), the tree equals a fresh build, or the extension asks for one."""
    records = _records(seed, n, odd=odd)
    points = sorted({int(n * c) for c in cuts} | {n})
    tree = PackedTree.pack(records[: points[0]])
    assert tree is not None
    done = points[0]
    for point in points[1:]:
        kept = _facts(tree)
        grown = tree.extended(records[done:point])
        assert _facts(tree) == kept  # the tree extended is left as it was
        if grown is None:  # what TreeShape.extend cannot take either
            shape = TreeShape.build(records[:done])
            assert not shape.extend([(r[0], r[1]) for r in records[done:point]]) or odd
            tree = PackedTree.pack(records[:point])
            assert tree is not None
        else:
            tree = grown
        done = point
        if pickled:
            tree = pickle.loads(pickle.dumps(tree))
        _same_as_fresh(tree, records[:done])


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 400), cut=st.floats(0.0, 1.0))
def test_a_packed_tree_folds_like_the_dict_shape(seed, n, cut):
    records = _records(seed, n)
    k = max(1, int(n * cut))
    tree = PackedTree.pack(records[:k])
    assert tree is not None
    tree = tree.extended(records[k:])
    assert tree is not None
    plain = NodeTable.of(records)
    shape = TreeShape.build(records)
    rng = random.Random(seed)
    for cursor in [records[-1][0], rng.choice(records)[0]]:
        path = _path(records, cursor)
        want = fold_tree(plain, active_path=path, cursor_id=cursor, shape=shape, max_nodes=40)
        got = fold_tree(
            NodeTable(tree.rows), active_path=path, cursor_id=cursor, shape=tree, max_nodes=40
        )
        assert _items(got) == _items(want)


def _items(graph) -> list[tuple]:
    return [
        (i.kind, i.entry_id, i.parent_key, i.count, i.leaves, i.side_branches, i.user_turns)
        for i in graph.items
    ]


def _path(records: list[Record], leaf: str) -> list[str]:
    parent = {r[0]: r[1] for r in records}
    out: list[str] = []
    while leaf and leaf not in out:
        out.append(leaf)
        leaf = parent.get(leaf)  # type: ignore[assignment]
    return out[::-1]


def test_repeated_ids_are_left_to_the_dict_forms():
    records = [("a", None, "message", "user"), ("b", "a", "message", "user"), ("a", "b", "x", None)]
    assert PackedTree.pack(records) is None
    tree = PackedTree.pack(records[:2])
    assert tree is not None
    assert tree.extended([("a", "b", "message", "user")]) is None  # a repeated id
    assert tree.extended([("c", "later", "message", "user")]) is None  # a parent not there
    assert tree.extended([("c", "c", "message", "user")]) is not None  # its own parent: a root


def test_an_extension_past_the_overlay_bound_asks_for_packing_again(monkeypatch):
    monkeypatch.setattr(packed, "OVERLAY_AT_MOST", 3)
    records = _records(1, 10)
    tree = PackedTree.pack(records[:5])
    assert tree is not None
    tree = tree.extended(records[5:8])
    assert tree is not None
    assert tree.extended(records[8:9]) is None
    repacked = PackedTree.pack(records[:9])
    assert repacked is not None and repacked.packed == 9


def test_a_deep_route_is_packed_and_extended_without_recursion():
    n = 20_000
    records = [(f"e{i}", f"e{i - 1}" if i else None, "message", "user") for i in range(n)]
    tree = PackedTree.pack(records)
    assert tree is not None
    tree = tree.extended([("tip", f"e{n - 1}", "message", "assistant")])
    assert tree is not None
    assert tree.sizes["e0"] == (n + 1, 1)
    assert tree.children["e19999"] == ["tip"]
    assert pickle.loads(pickle.dumps(tree)).sizes["e0"] == (n + 1, 1)
