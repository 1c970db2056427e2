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
