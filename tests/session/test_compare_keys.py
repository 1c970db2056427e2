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
from explorer.analysis.compare import (
    MessageKey,
    _signature,
    checked_diff_rows,
    diff_rows,
    projected_rows,
)
from explorer.session.context import _walk_up, build_entry_index
from explorer.session.manager import SessionManager
from explorer.session.messages import session_entry_to_context_messages
from explorer.session.tokens import OmittedMessage, estimate_tokens
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
    assert assert_same_difference(entries) >= 0  # a cycle leaves no leaf to compare


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


def _stood_in(entries: list[Any]) -> dict[int, dict[str, Any]]:
    """Stand-ins (by the real entry's id()) for every user or tool-result message no
    context edit of the session targets, with the estimate its own message has: what
    ``queries.omitted`` makes from the stored figures, for any line size."""
    dicts = [e for e in entries if isinstance(e, dict)]
    targeted = {e.get("targetId") for e in dicts if e.get("type") == "context_edit"}
    out: dict[int, dict[str, Any]] = {}
    for e in dicts:
        m = e.get("message") if e.get("type") == "message" else None
        eid = e.get("id")
        if not (isinstance(m, dict) and m.get("role") in ("user", "toolResult")):
            continue
        if not isinstance(eid, str) or eid in targeted:
            continue
        estimate = estimate_tokens(session_entry_to_context_messages(e)[0])
        if math.isfinite(estimate):
            out[id(e)] = {**e, "message": OmittedMessage(m["role"], int(estimate))}
    return out


def assert_stand_ins_give_the_same_difference(entries: list[Any]) -> tuple[int, int]:
    """(pairs decided with stand-ins, pairs where a stand-in's content might decide). Where
    decided, every row is the real one but for the stand-ins' text."""
    routes = _routes(entries)
    stand_ins = _stood_in(entries)
    decided = undecided = 0
    for a in routes:
        for b in routes:
            real = diff_rows(projected_rows(a), projected_rows(b))
            sa = [stand_ins.get(id(e), e) for e in a]
            sb = [stand_ins.get(id(e), e) for e in b]
            rows, open_ = checked_diff_rows(projected_rows(sa), projected_rows(sb))
            if open_:
                undecided += 1
                continue
            decided += 1
            stood = {s["id"] for s in stand_ins.values()}
            assert [(d.side, d.source_id, d.role, d.tokens, d.source_b) for d in rows] == [
                (d.side, d.source_id, d.role, d.tokens, d.source_b) for d in real
            ]
            assert [d.text for d in rows if d.source_id not in stood] == [
                d.text for d in real if d.source_id not in stood
            ]
    return decided, undecided


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_stand_ins_give_the_difference_of_the_real_messages(entries):
    decided, undecided = assert_stand_ins_give_the_same_difference(entries)
    assert decided >= 0 and undecided >= 0  # the rows are checked inside


def test_a_stand_in_that_might_equal_the_other_side_is_undecided():
    """Two branches ending in tool results of the same estimate from different entries:
    equal content would be shared, so the stand-ins cannot decide; a different estimate can."""
    root = {"type": "message", "id": "u", "parentId": None, "message": {"role": "user", "content": "go"}}  # fmt: skip

    def tool(i: str, text: str) -> dict[str, Any]:
        message = {"role": "toolResult", "toolCallId": "c", "content": [{"type": "text", "text": text}]}  # fmt: skip
        return {"type": "message", "id": i, "parentId": "u", "message": message}

    same = [root, tool("x", "abcd")], [root, tool("y", "abcd")]
    other = [root, tool("x", "abcd")], [root, tool("y", "abcdefgh")]
    for (a, b), open_ in ((same, True), (other, False)):
        stand_ins = _stood_in([*a, *b])
        sa, sb = ([stand_ins.get(id(e), e) for e in p] for p in (a, b))
        rows, undecided = checked_diff_rows(projected_rows(sa), projected_rows(sb))
        assert undecided is open_
    real = diff_rows(projected_rows(same[0]), projected_rows(same[1]))
    assert [(d.side, d.source_b) for d in real][-1] == ("both", "y")  # shared by content


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_stand_ins_in_real_pi_sessions(path):
    entries = SessionManager.load_readonly(str(path)).get_entries()
    decided, _ = assert_stand_ins_give_the_same_difference(entries)
    assert decided > 0
