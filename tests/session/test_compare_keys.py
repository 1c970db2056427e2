"""Compare's projection difference matches messages by :class:`MessageKey`, which digests a
message only when two distinct objects of the same shape meet. These tests hold it to the
digest comparison it replaced: the same rows, the same sides, the same counts."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.analysis import compare
from explorer.analysis.compare import MessageKey, _signature, diff_rows, projected_rows
from explorer.session.context import _walk_up, build_entry_index
from explorer.session.manager import SessionManager
from tests.conftest import pi_fixture_files
from tests.session.test_route_figures import sessions

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([2**70, 2**71, -(2**70)]),
    st.sampled_from([0.0, -0.0, 1.0, 1.5, math.nan, math.inf, -math.inf]),
    st.sampled_from(["", "a", "b", "a\ud800", "b\ud800", "x" * 40, "x" * 39 + "y"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["role", "content", "text"]), inner, max_size=3),
    ),
    max_leaves=6,
)


@settings(max_examples=400, deadline=None)
@given(VALUES, VALUES)
def test_keys_are_equal_exactly_when_the_digests_are(a, b):
    ka, kb = MessageKey(a), MessageKey(b)
    same = _signature(a) == _signature(b)
    assert (ka == kb) is same and (kb == ka) is same
    if same:
        assert hash(ka) == hash(kb)


def _reference(rows: list[Any]) -> list[Any]:
    """The rows as they were: the key replaced by the message's digest."""
    return [(*r[:4], _signature(r[4].message)) for r in rows]


def _leaves(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    parents = {e.get("parentId") for e in entries}
    return [e for e in entries if e.get("id") not in parents][-4:]


def _routes(entries: list[Any]) -> list[list[dict[str, Any]]]:
    dicts = [e for e in entries if isinstance(e, dict)]
    index = build_entry_index(dicts)
    out = []
    for leaf in _leaves(dicts):
        path = _walk_up(leaf, index)
        path.reverse()
        out.append(path)
    return out


def assert_same_difference(entries: list[Any]) -> int:
    """Every pair of (up to four) routes' difference equals the digest comparison's, with
    the two routes sharing the parsed objects (as Compare reads them) and with route B a
    copy (no object shared: every match goes through the digest)."""
    routes = _routes(entries)
    pairs = 0
    for a in routes:
        for b in routes:
            for path_b in (b, copy.deepcopy(b)):
                ra, rb = projected_rows(a), projected_rows(path_b)
                assert diff_rows(ra, rb) == diff_rows(_reference(ra), _reference(rb))
                pairs += 1
    return pairs


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_the_difference_of_generated_sessions_is_the_digest_comparison(entries):
    """Generated sessions hold context edits (undos included), compactions with and without
    checkpoints, branch summaries and custom messages."""
    assert assert_same_difference(entries) > 0


def test_equal_content_from_different_entries_still_matches():
    """Checkpoints of two compactions with the same system prompt: distinct objects of
    equal content are shared by content, as before."""
    system = {"role": "system", "content": "prompt " * 50, "timestamp": 1}
    a = [{"type": "message", "id": "s1", "parentId": None, "message": system}]
    b = [{"type": "message", "id": "s2", "parentId": None, "message": dict(system)}]
    rows = diff_rows(projected_rows(a), projected_rows(b))
    assert [(r.side, r.source_id, r.source_b) for r in rows] == [("both", "s1", "s2")]


def test_a_shared_multi_megabyte_message_is_never_digested(monkeypatch):
    """Both routes' shared messages are the same parsed objects: they match without the
    digest, which serialized and hashed every byte of a 3.7 MB tool result per route."""
    big = {"role": "toolResult", "toolCallId": "c", "content": [{"type": "text", "text": "x" * 4_000_000}]}  # fmt: skip
    root = {"type": "message", "id": "u", "parentId": None, "message": {"role": "user", "content": "go"}}  # fmt: skip
    tool = {"type": "message", "id": "t", "parentId": "u", "message": big}
    ends = [
        {
            "type": "message",
            "id": f"a{i}",
            "parentId": "t",
            "message": {"role": "user", "content": f"side {i}"},
        }  # fmt: skip
        for i in range(2)
    ]
    digested: list[Any] = []
    original = compare._signature
    monkeypatch.setattr(compare, "_signature", lambda m: digested.append(m) or original(m))
    rows = diff_rows(projected_rows([root, tool, ends[0]]), projected_rows([root, tool, ends[1]]))
    assert [r.side for r in rows] == ["both", "both", "a", "b"]
    assert all(m is not big for m in digested)


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_the_difference_of_real_pi_sessions_is_the_digest_comparison(path):
    entries = SessionManager.load_readonly(str(path)).get_entries()
    assert assert_same_difference(entries) > 0
