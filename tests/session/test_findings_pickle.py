"""`TreeFindings` pickles its stubs as columns and comes back equal, whatever the entries."""

from __future__ import annotations

import pickle

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.analysis.integrity import TreeFindings, _stub_columns, _Stubs
from explorer.session.diagnostics import index_ids
from tests.session.test_integrity_incremental import _entries

_ODD = [
    {"type": "message", "id": "m1", "parentId": None},  # a message stub without its message
    {"type": "label", "id": "l1", "parentId": "m1"},  # a label stub without its target
    {"type": "message", "id": "m2", "parentId": "m1", "message": {"role": "user", "x": 1}},
    {"type": "message", "id": "m3", "parentId": "m2", "message": "not an object"},
    {"id": "m4", "type": "message", "parentId": "m3", "message": {"role": "user"}},  # order
    {"type": "context_edit", "id": "c1", "parentId": "m4", "targetId": "m2", "replacement": None},
    {"type": "model_change", "id": ["odd"], "parentId": {"a": 1}},
    {"type": "label", "id": "l2", "parentId": "m4", "targetId": "m1"},
]


def _same_stubs(entries):
    back = _Stubs(_stub_columns(entries))
    assert list(back) == list(entries) and back == entries and len(back) == len(entries)
    assert [list(e) for e in back] == [list(e) for e in entries]  # key order too
    assert back.id_index() == index_ids(entries)
    cut = len(entries) // 2
    grown = _Stubs(_stub_columns(entries[:cut])) + entries[cut:]
    assert list(grown) == list(entries) and grown.id_index() == index_ids(entries)
    assert list(_Stubs(grown.columns())) == list(entries)
    if entries:
        assert grown[-1] == entries[-1] and grown[1:3] == tuple(entries[1:3])


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(0, 200), odd=st.sampled_from([0, 0.1, 0.4]))
def test_findings_come_back_equal_after_a_pickle(seed, n, odd):
    entries = _entries(seed, n, odd)
    _same_stubs(entries)
    cut = n // 2
    found = TreeFindings.check(entries[:cut], list(range(2, cut + 2)))
    found = found.extended(entries[cut:], list(range(cut + 2, n + 2)))
    back = pickle.loads(pickle.dumps(found, pickle.HIGHEST_PROTOCOL))
    assert back == found
    # A restored copy extends as the original does.
    more = _entries(seed + 1, 5, odd)
    for k, e in enumerate(more):
        e["id"] = f"z{k}"
    lines = list(range(n + 2, n + 2 + len(more)))
    assert back.extended(more, lines) == found.extended(more, lines)
    # Extended while its stubs are still columns, then packed again: still equal.
    again = pickle.loads(pickle.dumps(back.extended(more, lines)))
    assert again == found.extended(more, lines)
    assert again.extended([], []) == again


def test_entries_of_other_shapes_are_kept_whole():
    _same_stubs(_ODD)
    found = TreeFindings.check(_ODD, list(range(1, len(_ODD) + 1)))
    assert pickle.loads(pickle.dumps(found)) == found
    assert found.problems  # the odd parent and the edit of a non-editable entry are found


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(0, 120),
    odd=st.sampled_from([0, 0.1, 0.4]),
    budget=st.sampled_from([0, 1, 8]),
)
def test_the_searched_id_index_answers_as_the_dict_does(seed, n, odd, budget):
    """A restored copy's id index searches the id column instead of building the dict;
    every answer, before and after it gives up and builds the dict, is the dict's."""
    from explorer.analysis import integrity

    kept, integrity.SEARCHES_BEFORE_DICT = integrity.SEARCHES_BEFORE_DICT, budget
    try:
        _answers_as_the_dict(integrity, seed, n, odd)
    finally:
        integrity.SEARCHES_BEFORE_DICT = kept


def _answers_as_the_dict(integrity, seed, n, odd):
    entries = _entries(seed, n, odd)
    entries += [{"type": "message", "id": 7, "parentId": None}, {"type": "x", "id": True}]
    cut = len(entries) // 2
    stubs = _Stubs(_stub_columns(entries[:cut])) + entries[cut:]
    want = index_ids(entries)
    index = integrity._IdIndex(stubs)
    asked = [*want, "absent", 1, 7.0, None, "", ("t",)]
    for key in asked:
        assert index.get(key) == want.get(key)
        assert (key in index) == (key in want)
    assert index.present(set(asked[-6:-1]) | set(list(want)[:3])) == {
        k for k in [*asked[-6:-1], *list(want)[:3]] if k in want
    }
    assert index == want and len(index) == len(want)
    grown = index.plus({"new": 10**6})
    assert grown["new"] == 10**6 and "new" not in index and grown == {**want, "new": 10**6}


def test_a_restored_copy_extends_without_building_its_id_index():
    entries = _entries(3, 400, 0)
    found = TreeFindings.check(entries, list(range(2, 402)))
    back = pickle.loads(pickle.dumps(found, pickle.HIGHEST_PROTOCOL))
    tip = entries[-1]["id"]
    more = [
        {"type": "message", "id": f"new{k}", "parentId": tip if k == 0 else f"new{k - 1}"}
        for k in range(3)
    ]
    grown = back.extended(more, [402, 403, 404])
    assert grown.index._dict is None  # answered by searching the column: the point of it
    assert back.index._dict is None
    assert grown == TreeFindings.check(entries + more, list(range(2, 405)))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 150), odd=st.sampled_from([0, 0.1, 0.4]))
def test_a_restored_copy_extended_by_a_chain_equals_a_fresh_check(seed, n, odd):
    """Appended entries whose parents are appended too, with edits, labels and a dangling
    parent among them: the restored copy's batched lookups find what a fresh check does."""
    entries = _entries(seed, n, odd)
    found = TreeFindings.check(entries, list(range(2, n + 2)))
    back = pickle.loads(pickle.dumps(found, pickle.HIGHEST_PROTOCOL))
    first, tip = entries[0]["id"], entries[-1]["id"]
    chain = [
        {"type": "message", "id": "q0", "parentId": tip, "message": {"role": "user"}},
        {"type": "message", "id": "q1", "parentId": "q0", "message": {"role": "assistant"}},
        {"type": "label", "id": "q2", "parentId": "q1", "targetId": first},
        {
            "type": "context_edit",
            "id": "q3",
            "parentId": "q2",
            "targetId": "q0",
            "replacement": None,
        },
        {"type": "message", "id": "q4", "parentId": "nowhere", "message": {"role": "user"}},
        {"type": "label", "id": "q5", "parentId": "q4", "targetId": "absent"},
    ]
    lines = list(range(n + 2, n + 2 + len(chain)))
    grown = back.extended(chain, lines)
    assert grown == TreeFindings.check(entries + chain, list(range(2, n + 2)) + lines)
