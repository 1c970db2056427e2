"""Property tests: projections of random trees stay on their path and never mutate entries."""

from __future__ import annotations

import copy
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.session.context import (
    build_context_entries,
    build_session_path,
    build_session_projection,
    projection_diagnostics,
    projection_from_path,
)
from explorer.session.jsonfmt import dumps
from explorer.session.sentinel import UNSET
from explorer.session.tokens import estimate_projected_context

TEXTS = st.sampled_from(["", "a", "hello", "😀 é", "x" * 30])


def _message(draw, index: int) -> dict:
    kind = draw(
        st.sampled_from(["user", "assistant_call", "assistant_text", "tool_result", "system"])
    )
    call_id = f"call_{draw(st.integers(0, 3))}"
    if kind == "user":
        return {"role": "user", "content": draw(TEXTS), "timestamp": index}
    if kind == "assistant_call":
        return {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": call_id, "name": "read", "arguments": {"p": draw(TEXTS)}}
            ],
            "provider": "p",
            "model": f"m{index}",
            "usage": {
                "input": draw(st.sampled_from([0, 50, 500])),
                "output": 0,
                "cacheRead": 0,
                "cacheWrite": 0,
            },
            "stopReason": "toolUse",
            "timestamp": index,
        }
    if kind == "assistant_text":
        return {
            "role": "assistant",
            "content": [{"type": "text", "text": draw(TEXTS)}],
            "provider": "p",
            "model": f"m{index}",
            "usage": {"input": 10, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 11},
            "stopReason": draw(st.sampled_from(["stop", "error", "aborted"])),
            "timestamp": index,
        }
    if kind == "tool_result":
        return {
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": "read",
            "content": [{"type": "text", "text": draw(TEXTS)}],
            "isError": False,
            "timestamp": index,
        }
    return {"role": "system", "content": draw(TEXTS), "timestamp": index}


@st.composite
def trees(draw):
    n = draw(st.integers(1, 30))
    entries: list[dict] = []
    for i in range(n):
        eid = f"e{i}"
        parent = (
            None if i == 0 or draw(st.integers(0, 9)) == 0 else f"e{draw(st.integers(0, i - 1))}"
        )
        base = {"type": "", "id": eid, "parentId": parent, "timestamp": "2025-01-01T00:00:00.000Z"}
        kind = draw(
            st.sampled_from(["message"] * 6 + ["edit"] * 3 + ["compaction", "model", "label"])
        )
        if kind == "message" or i == 0:
            base["type"] = "message"
            base["message"] = _message(draw, i)
        elif kind == "edit":
            base["type"] = "context_edit"
            base["targetId"] = f"e{draw(st.integers(0, i - 1))}"
            base["replacement"] = draw(
                st.sampled_from(
                    [
                        None,
                        {"content": "replaced"},
                        {"content": [{"type": "text", "text": "r"}]},
                        {},
                    ]
                )
            )
        elif kind == "compaction":
            base["type"] = "compaction"
            base["summary"] = draw(TEXTS)
            base["firstKeptEntryId"] = f"e{draw(st.integers(0, i))}"
            base["tokensBefore"] = 100
            if draw(st.booleans()):
                base["systemMessage"] = {"role": "system", "content": "cp", "timestamp": 1}
        elif kind == "model":
            base["type"] = "model_change"
            base["provider"] = "q"
            base["modelId"] = f"g{i}"
        else:
            base["type"] = "label"
            base["targetId"] = f"e{draw(st.integers(0, i - 1))}"
            base["label"] = "x"
        entries.append(base)
    leaf = draw(st.one_of(st.just(UNSET), st.sampled_from([e["id"] for e in entries])))
    return entries, leaf


def _on_path(path, entry) -> bool:
    return any(item is entry for item in path)


@settings(max_examples=300, deadline=None)
@given(trees())
def test_projection_stays_on_path_and_never_mutates(case):
    entries, leaf = case
    saved = copy.deepcopy(entries)
    path = build_session_path(entries, leaf)
    for parent, child in zip(path, path[1:], strict=False):
        assert child["parentId"] == parent["id"]
    projection = build_session_projection(entries, leaf)
    path_ids = {entry["id"] for entry in path}

    # Every projected item's source entry is an entry of this path (the same object).
    for item in projection.entries:
        assert _on_path(path, item.source_entry)
    # No message comes from another branch: stored messages are those of path entries.
    stored_messages = {id(e["message"]) for e in entries if e["type"] == "message"}
    path_messages = {id(e["message"]) for e in path if e["type"] == "message"}
    for message in projection.messages:
        if id(message) in stored_messages:
            assert id(message) in path_messages
        if (
            message.get("role") in ("user", "assistant", "toolResult")
            and message.get("timestamp") is not None
        ):
            assert f"e{message['timestamp']}" in path_ids
    # messages is the concatenation of the items' messages
    flat = [m for item in projection.entries for m in item.messages]
    assert len(flat) == len(projection.messages)
    assert all(a is b for a, b in zip(flat, projection.messages, strict=True))
    # the path-based form gives the same projection
    assert projection_from_path(path) == projection
    # context entries are the projection's source entries
    assert [e["id"] for e in build_context_entries(entries, leaf)] == [
        item.source_entry["id"] for item in projection.entries
    ]
    # diagnostics and estimates never fail, and nothing was mutated
    projection_diagnostics(path)
    estimate = estimate_projected_context(projection, path)
    assert estimate.tokens >= 0 or math.isnan(estimate.tokens)
    dumps(projection.to_json())
    assert entries == saved


@settings(max_examples=300, deadline=None)
@given(trees())
def test_latest_edit_per_target_wins(case):
    entries, leaf = case
    projection = build_session_projection(entries, leaf)
    context_entries = [item.source_entry for item in projection.entries]
    latest: dict[str, dict] = {}
    for entry in context_entries:
        if entry["type"] == "context_edit":
            latest[entry["targetId"]] = entry
    for index, item in enumerate(projection.entries):
        source = item.source_entry
        if source["type"] == "compaction" and index > 0:
            assert item.messages == []
            continue
        edit = latest.get(source["id"])
        if source["type"] != "message":
            continue
        stored = source["message"]
        if edit is None:
            assert item.messages == [stored]
            continue
        replacement = edit["replacement"]
        if replacement is None:
            assert item.messages == []
            continue
        (message,) = item.messages
        if stored["role"] == "system":
            assert message is stored
            continue
        assert message is not stored
        assert {k: v for k, v in message.items() if k != "content"} == {
            k: v for k, v in stored.items() if k != "content"
        }
        if "content" not in replacement:
            assert "content" not in message
        elif stored["role"] in ("assistant", "toolResult") and isinstance(
            replacement["content"], str
        ):
            assert message["content"] == [{"type": "text", "text": replacement["content"]}]
        else:
            assert message["content"] == replacement["content"]


@settings(max_examples=200, deadline=None)
@given(trees())
def test_edits_from_other_branches_never_apply(case):
    entries, leaf = case
    path = build_session_path(entries, leaf)
    on_path = {id(e) for e in path}
    # Removing every entry that is not on the path changes nothing in the projection.
    only_path = [e for e in entries if id(e) in on_path]
    leaf_id = path[-1]["id"] if path else None
    assert build_session_projection(only_path, leaf_id) == build_session_projection(entries, leaf)
