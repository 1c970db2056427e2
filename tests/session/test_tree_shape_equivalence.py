"""`TreeShape.build`'s one-pass build gives the shape the earlier separate passes gave.

The earlier build (children and roots, then parents, then missing ids, then sizes from a
tuple per node) is kept below, in this file only, as the slow reference; generated records
carry what a stored session can: repeated ids, own, later and missing parents, cycles, a
10,000-deep route and a branch point with 1,000 children.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.session.graph import TreeShape, _subtree_sizes_walk


def _ref_build(records: list[tuple[str, str | None]]) -> tuple:
    ids = {nid for nid, _p in records}
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    seen: set[str] = set()
    for nid, p in records:
        if nid in seen:
            continue
        seen.add(nid)
        if not p or p == nid or p not in ids:
            roots.append(nid)
        else:
            children.setdefault(p, []).append(nid)
    parent = {kid: p for p, kids in children.items() for kid in kids}
    missing = {p for nid, p in records if p and p != nid and p not in ids}
    return children, roots, _subtree_sizes_walk(roots, children), parent, missing


def _records(seed: int, n: int, odd: float, deep: int = 0, fan: int = 0) -> list:
    rng = random.Random(seed)
    out: list[tuple[str, str | None]] = [(f"d{i}", f"d{i - 1}" if i else None) for i in range(deep)]
    if fan:
        out.append(("hub", out[-1][0] if out else None))
        out += [(f"f{i}", "hub") for i in range(fan)]
    for i in range(n):
        ids = [r[0] for r in out]
        nid = rng.choice(ids) if ids and rng.random() < odd / 3 else f"e{i}"
        r = rng.random()
        if not ids or r < 0.03:
            parent = rng.choice([None, ""])
        elif r < odd:
            parent = rng.choice([f"e{i + rng.randint(1, 5)}", "ghost", nid])
        elif r < 0.8:
            parent = ids[-1]
        else:
            parent = rng.choice(ids)
        out.append((nid, parent))
    if odd and len(out) > 6:  # a loop of two and a loop of three
        out[-1], out[-2] = (out[-1][0], out[-2][0]), (out[-2][0], out[-1][0])
        a, b, c = out[-3][0], out[-4][0], out[-5][0]
        out[-3], out[-4], out[-5] = (a, b), (b, c), (c, a)
    return out


def _same(records: list) -> TreeShape:
    shape = TreeShape.build(records)
    ref = _ref_build(records)
    assert (shape.children, shape.roots, shape.sizes, shape.parent, shape.missing) == ref
    # Children lists keep file order, and the dict lists parents in first-child order.
    assert list(shape.children) == list(ref[0])
    return shape


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 100_000), n=st.integers(0, 300), odd=st.sampled_from([0, 0.05, 0.4]))
def test_generated_records_build_the_reference_shape(seed, n, odd):
    _same(_records(seed, n, odd))


def test_a_deep_route_and_a_wide_branch_point_build_the_reference_shape():
    _same(_records(3, 500, 0.05, deep=10_000, fan=1_000))
    clean = _same(_records(3, 0, 0, deep=10_000, fan=1_000))
    assert clean.sizes["hub"] == (1_001, 1_000)
    assert clean.sizes["d0"] == (11_001, 1_000) and clean.roots == ["d0"]


def test_stored_rows_with_more_fields_build_the_same_shape():
    records = _records(8, 200, 0.1)
    rows = [(nid, p, "message", "user") for nid, p in records]
    a, b = TreeShape.build(records), TreeShape.build(rows)
    assert (a.children, a.roots, a.sizes, a.parent, a.missing) == (
        b.children,
        b.roots,
        b.sizes,
        b.parent,
        b.missing,
    )


def test_a_repeated_id_is_attached_once_under_its_first_parent():
    shape = TreeShape.build([("a", None), ("b", "a"), ("c", "a"), ("b", "c"), ("b", "zz")])
    assert shape.children == {"a": ["b", "c"]}
    assert shape.parent == {"b": "a", "c": "a"}
    assert shape.missing == {"zz"}
    assert shape.sizes == {"a": (3, 2), "b": (1, 1), "c": (1, 1)}
