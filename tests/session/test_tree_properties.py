"""Property tests: random trees round trip losslessly, branches never mix, deep trees work."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.session import jsonfmt
from explorer.session.diagnostics import validate_bytes
from explorer.session.manager import SessionManager

from .manager_helpers import A, Clock, SeqRng, U, read_bytes

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(),
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=5), children, max_size=4),
    ),
    max_leaves=10,
)

ops = st.lists(
    st.one_of(
        st.tuples(st.just("user"), st.text(max_size=20)),
        st.tuples(st.just("assistant"), st.text(max_size=20)),
        st.tuples(st.just("branch"), st.integers(min_value=0, max_value=10_000)),
        st.tuples(st.just("reset"), st.none()),
        st.tuples(st.just("label"), st.integers(min_value=0, max_value=10_000)),
        st.tuples(st.just("custom"), json_values),
    ),
    min_size=1,
    max_size=40,
)


def _build(manager, operations):
    ids = []
    for kind, arg in operations:
        if kind == "user":
            ids.append(manager.append_message(U(arg)))
        elif kind == "assistant":
            ids.append(manager.append_message(A(arg)))
        elif kind == "branch" and ids:
            manager.branch(ids[arg % len(ids)])
        elif kind == "reset":
            manager.reset_leaf()
        elif kind == "label" and ids:
            ids.append(manager.append_label_change(ids[arg % len(ids)], f"L{arg}"))
        elif kind == "custom":
            ids.append(manager.append_custom_entry("ext", arg))
    return ids


def _dump(entries):
    return [jsonfmt.dumps(e) for e in entries]


def _ancestors_or_self(by_id, entry_id):
    seen = []
    current = by_id.get(entry_id)
    while current is not None and current["id"] not in seen:
        seen.append(current["id"])
        current = by_id.get(current["parentId"]) if current["parentId"] else None
    return set(seen)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_random_trees_round_trip_losslessly(operations):
    with tempfile.TemporaryDirectory() as d:
        m = SessionManager.create("/w/proj", d, clock=Clock(), rng=SeqRng())
        m.append_message(U("first"))  # makes the file appear
        _build(m, operations)
        path = m.get_session_file()
        data = read_bytes(path)
        assert m.to_bytes() == data
        reopened = SessionManager.open(path)
        assert read_bytes(path) == data
        assert reopened.to_bytes() == data
        # Compared as JSON: numbers are doubles, as in JavaScript.
        assert _dump(reopened.get_entries()) == _dump(m.get_entries())
        assert reopened.get_leaf_id() == m.get_entries()[-1]["id"]
        assert reopened.get_labels() == m.get_labels()
        assert _dump([n.to_json() for n in reopened.get_tree()]) == _dump(
            [n.to_json() for n in m.get_tree()]
        )
        assert validate_bytes(data).ok
        readonly = SessionManager.load_readonly(data)
        assert _dump(readonly.get_entries()) == _dump(m.get_entries())


@settings(max_examples=60, deadline=None)
@given(ops)
def test_get_branch_never_mixes_branches(operations):
    m = SessionManager.in_memory("/w", clock=Clock(), rng=SeqRng())
    _build(m, operations)
    by_id = m.by_id
    for entry in m.get_entries():
        branch = m.get_branch(entry["id"])
        assert branch[-1] is entry
        assert branch[0]["parentId"] is None
        allowed = _ancestors_or_self(by_id, entry["id"])
        assert {e["id"] for e in branch} == allowed
        for parent, child in zip(branch, branch[1:], strict=False):
            assert child["parentId"] == parent["id"]
    # Every entry appears exactly once in the tree.
    seen = []
    stack = list(m.get_tree())
    while stack:
        node = stack.pop()
        seen.append(node.entry["id"])
        stack.extend(node.children)
    assert sorted(seen) == sorted(e["id"] for e in m.get_entries())


@settings(max_examples=40, deadline=None)
@given(ops, st.integers(min_value=0, max_value=10_000))
def test_branched_session_keeps_exactly_one_route(operations, pick):
    m = SessionManager.in_memory("/w", clock=Clock(), rng=SeqRng())
    ids = _build(m, operations)
    targets = [e["id"] for e in m.get_entries() if e["type"] != "label"]
    if not targets:
        return
    target = targets[pick % len(targets)]
    route = [e["id"] for e in m.get_branch(target) if e["type"] != "label"]
    labels = {k: v for k, v in m.get_labels().items() if k in route}
    before = m.build_session_context().messages if m.get_leaf_id() == target else None
    m.create_branched_session(target)
    kept = [e["id"] for e in m.get_entries() if e["type"] != "label"]
    assert kept == route
    assert m.get_labels() == labels
    if before is not None:
        assert m.build_session_context().messages == before
    assert ids is not None


@settings(max_examples=50, deadline=None)
@given(json_values, st.text())
def test_unknown_fields_and_types_survive_reopen(payload, text):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "s.jsonl")
        lines = [
            jsonfmt.dumps(
                {
                    "type": "session",
                    "version": 3,
                    "id": "s",
                    "timestamp": "t",
                    "cwd": "/w",
                    "extra": payload,
                }
            ),
            jsonfmt.dumps(
                {
                    "type": "message",
                    "id": "a",
                    "parentId": None,
                    "timestamp": "t",
                    "message": U(text),
                    "zz": payload,
                }
            ),
            jsonfmt.dumps(
                {"type": "future", "id": "b", "parentId": "a", "timestamp": "t", "data": payload}
            ),
        ]
        data = ("\n".join(lines) + "\n").encode("utf-8")
        with open(path, "wb") as fh:
            fh.write(data)
        m = SessionManager.open(path)
        assert m.to_bytes() == data
        m.append_message(U("more"))
        assert read_bytes(path).startswith(data)
        assert jsonfmt.dumps(m.get_entry("b")["data"]) == jsonfmt.dumps(payload)


DEPTH = 12_000


def test_deep_tree_without_recursion(tmp_path):
    limit = sys.getrecursionlimit()
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock(), rng=SeqRng())
    first = m.append_message(U("start"))
    for i in range(DEPTH):
        m.append_message(A(f"a{i}") if i % 2 else U(f"u{i}"))
    mid = m.get_branch()[DEPTH // 2]["id"]
    m.branch(mid)
    m.append_message(U("side"))
    assert sys.getrecursionlimit() == limit
    assert len(m.get_branch()) == DEPTH // 2 + 2
    tree = m.get_tree()
    assert tree[0].entry["id"] == first
    depth = 0
    node = tree[0]
    while node.children:
        node = node.children[0]
        depth += 1
    assert depth == DEPTH
    as_json = tree[0].to_json()
    assert as_json["entry"]["id"] == first
    assert jsonfmt.dumps(as_json).count('"entry"') == DEPTH + 2
    assert len(m.build_session_context().messages) == DEPTH // 2 + 2
    path = m.get_session_file()
    reopened = SessionManager.open(path)
    assert len(reopened.get_branch()) == DEPTH // 2 + 2
    assert validate_bytes(read_bytes(path)).ok
    reopened.branch(reopened.get_entries()[DEPTH]["id"])
    new_file = reopened.create_branched_session(reopened.get_leaf_id())
    assert len(SessionManager.open(new_file).get_entries()) == DEPTH + 1


def test_deep_cycle_is_reported_and_walks_stop():
    entries = [{"type": "session", "version": 3, "id": "s", "timestamp": "t", "cwd": "/w"}]
    n = 11_000
    for i in range(n):
        entries.append(
            {
                "type": "message",
                "id": f"e{i}",
                "parentId": f"e{(i + 1) % n}",
                "timestamp": "t",
                "message": U("x"),
            }
        )
    m = SessionManager.in_memory("/w", entries=entries)
    assert len(m.get_branch()) == n
    assert m.get_tree() == []
    data = "".join(jsonfmt.dumps(e) + "\n" for e in entries).encode()
    report = validate_bytes(data)
    assert [p.code for p in report.errors] == ["parent-cycle"]
    assert f"{n} entries" in report.errors[0].message


_odd_ids = st.one_of(
    st.sampled_from(["a", "b", "c", "", "root"]),
    st.none(),
    st.integers(0, 3),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
    st.booleans(),
)
_odd_entry = st.fixed_dictionaries(
    {},
    optional={
        "type": st.one_of(
            st.sampled_from(
                [
                    "message",
                    "label",
                    "compaction",
                    "context_edit",
                    "custom_message",
                    "session_info",
                    "session",
                    "weird",
                ]
            ),
            json_values,
        ),
        "id": _odd_ids,
        "parentId": _odd_ids,
        "timestamp": st.sampled_from(["2025-01-01T00:00:00.000Z", "bad", 5, None]),
        "message": json_values,
        "targetId": _odd_ids,
        "label": json_values,
        "replacement": json_values,
        "firstKeptEntryId": _odd_ids,
        "firstKeptEntryIndex": json_values,
        "name": json_values,
        "systemMessage": json_values,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_odd_entry, json_values), max_size=8), st.sampled_from([1, 2, 3, None]))
def test_pathological_files_never_crash_loading_queries_or_diagnostics(body, version):
    from explorer.session.errors import SessionError

    head = {"type": "session", "id": "s", "timestamp": "t", "cwd": "/w"}
    if version:
        head["version"] = version
    data = ("\n".join(jsonfmt.dumps(x) for x in [head, *body]) + "\n").encode()
    report = validate_bytes(data)
    assert report.header is not None
    m = SessionManager.load_readonly(data)
    m.get_tree()
    m.get_branch()
    m.to_bytes()
    m.get_session_name()
    m.get_leaf_entry()
    for entry in m.get_entries()[:3]:
        key = entry.get("id")
        m.get_children(key)
        m.get_branch(key)
        m.get_label(key)
        with contextlib.suppress(SessionError):
            m.create_branched_session(key)
    try:
        m.append_label_change("nope", "x")
    except SessionError as error:
        assert str(error) == "Entry nope not found"
    assert m.append_message(U("x")) == m.get_leaf_id()
