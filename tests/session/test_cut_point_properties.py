"""Property: cut points are always legal, on random well-formed paths with edits and compactions."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.session.compaction import find_cut_point, find_projected_cut_point, prepare_compaction
from explorer.session.context import build_session_projection
from explorer.session.tokens import CompactionSettings

TS = "2025-01-01T00:00:01.000Z"

op = st.one_of(
    st.tuples(st.just("user"), st.integers(0, 3000)),
    st.tuples(st.just("assistant"), st.integers(0, 3000)),
    st.tuples(
        st.just("tools"), st.lists(st.integers(0, 4000), min_size=1, max_size=3), st.booleans()
    ),
    st.tuples(st.just("meta")),
    st.tuples(st.just("edit"), st.integers(0, 10_000), st.one_of(st.none(), st.integers(0, 200))),
    st.tuples(st.just("compaction"), st.integers(0, 10_000)),
    st.tuples(st.just("bash"), st.integers(0, 2000)),
)


def build(ops):
    entries = []
    counter = {"n": 0, "call": 0}

    def add(kind, **fields):
        counter["n"] += 1
        entry = {
            "type": kind,
            "id": f"e{counter['n']}",
            "parentId": entries[-1]["id"] if entries else None,
            "timestamp": TS,
            **fields,
        }
        entries.append(entry)
        return entry

    def message(m):
        return add("message", message=m)

    for item in ops:
        kind = item[0]
        if kind == "user":
            message({"role": "user", "content": "u" * item[1], "timestamp": 1})
        elif kind == "assistant":
            message(
                {
                    "role": "assistant",
                    "content": [{"type": "text", "text": "a" * item[1]}],
                    "stopReason": "stop",
                    "timestamp": 2,
                }
            )
        elif kind == "bash":
            message(
                {
                    "role": "bashExecution",
                    "command": "ls",
                    "output": "o" * item[1],
                    "exitCode": 0,
                    "cancelled": False,
                    "truncated": False,
                    "timestamp": 2,
                }
            )
        elif kind == "tools":
            ids = []
            for _ in item[1]:
                counter["call"] += 1
                ids.append(f"call_{counter['call']}")
            message(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "toolCall", "id": cid, "name": "read", "arguments": {"path": cid}}
                        for cid in ids
                    ],
                    "stopReason": "toolUse",
                    "timestamp": 2,
                }
            )
            for cid, size in zip(ids, item[1], strict=True):
                if item[2]:
                    add("model_change", provider="p", modelId="m")
                message(
                    {
                        "role": "toolResult",
                        "toolCallId": cid,
                        "toolName": "read",
                        "content": [{"type": "text", "text": "r" * size}],
                        "isError": False,
                        "timestamp": 3,
                    }
                )
        elif kind == "meta":
            add("label", targetId=entries[-1]["id"] if entries else "x", label="l")
        elif kind == "edit":
            editable = [
                e
                for e in entries
                if e["type"] == "message"
                and e["message"]["role"] in ("user", "assistant", "toolResult")
            ]
            if editable:
                target = editable[item[1] % len(editable)]
                replacement = None if item[2] is None else {"content": "z" * item[2]}
                add("context_edit", targetId=target["id"], replacement=replacement)
        elif kind == "compaction" and entries:
            kept = entries[item[1] % len(entries)]
            add("compaction", summary="S", firstKeptEntryId=kept["id"], tokensBefore=1)
    return entries


def _calls_of(message):
    content = message.get("content") if message.get("role") == "assistant" else None
    if not isinstance(content, list):
        return []
    return [b["id"] for b in content if isinstance(b, dict) and b.get("type") == "toolCall"]


def check_legal(projected, start, cut):
    end = len(projected)
    first = cut.first_kept_entry_index
    assert start <= first <= end
    kept = [m for e in projected[first:] for m in e.messages]
    if kept and first > start:
        # (A cut at `start` removes nothing, so it cannot separate a result from its call.)
        assert kept[0]["role"] != "toolResult", "kept range starts with a tool result"
    # No kept tool result loses a call that is visible in the projection.
    call_index = {}
    for i, e in enumerate(projected):
        for m in e.messages:
            for cid in _calls_of(m):
                call_index[cid] = i
    for e in projected[first:]:
        for m in e.messages:
            if m.get("role") == "toolResult" and m["toolCallId"] in call_index:
                assert call_index[m["toolCallId"]] >= first, "tool result orphaned from its call"
    if cut.is_split_turn:
        assert start <= cut.turn_start_index < first
    else:
        assert cut.turn_start_index == -1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, min_size=1, max_size=30), st.integers(1, 3000))
def test_projected_cut_points_are_legal(ops, keep):
    path = build(ops)
    projection = build_session_projection(path)
    projected = projection.entries
    start = next(
        (
            i + 1
            for i, e in enumerate(projected)
            if e.source_entry["type"] == "compaction" and e.messages
        ),
        0,
    )
    cut = find_projected_cut_point(projected, start, len(projected), keep)
    check_legal(projected, start, cut)

    prep = prepare_compaction(path, CompactionSettings(True, 16384, keep))
    if prep is None:
        return
    first = prep.first_kept_entry_index
    assert projected[first].source_entry["id"] == prep.first_kept_entry_id
    # Summarized history, the turn prefix and the kept range partition the conversation.
    kept = [
        m
        for e in projected[first:]
        if e.source_entry["type"] != "compaction"
        for m in e.messages
        if m.get("role") != "system"
    ]
    everything = [
        m
        for e in projected[start:]
        if e.source_entry["type"] != "compaction"
        for m in e.messages
        if m.get("role") != "system"
    ]
    combined = prep.messages_to_summarize + prep.turn_prefix_messages + kept
    assert len(combined) == len(everything)
    assert combined == everything
    assert prep.messages_to_summarize or prep.turn_prefix_messages


@settings(max_examples=200, deadline=None)
@given(
    st.lists(op.filter(lambda o: o[0] != "compaction"), min_size=1, max_size=30),
    st.integers(1, 3000),
)
def test_raw_cut_points_are_legal(ops, keep):
    path = [e for e in build(ops) if e["type"] != "context_edit"]
    for i, e in enumerate(path):  # re-chain after dropping edits
        e["parentId"] = path[i - 1]["id"] if i else None
    projection = build_session_projection(path)
    cut = find_cut_point(path, 0, len(path), keep)
    check_legal(projection.entries, 0, cut)
    assert cut == find_projected_cut_point(projection.entries, 0, len(path), keep)
