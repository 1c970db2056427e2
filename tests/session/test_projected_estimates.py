"""The running estimate along a route equals the engine's estimate of every prefix."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.session.context import ProjectedEstimates, projection_from_path
from explorer.session.tokens import estimate_projected_context

TEXTS = st.sampled_from(["", "a", "hello there", "😀 é", "x" * 41, "y" * 400])
USAGE = st.sampled_from(
    [
        {"input": 50, "output": 3, "cacheRead": 0, "cacheWrite": 0},
        {"input": 10, "output": 1, "cacheRead": 5, "cacheWrite": 0, "totalTokens": 16},
        {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},  # not valid usage
        {"totalTokens": 1234.5},
        {"input": "x", "output": 0, "cacheRead": 0, "cacheWrite": 0},  # NaN size
    ]
)


def _message(draw, i: int) -> dict:
    kind = draw(st.sampled_from(["user", "call", "text", "result", "system", "bash", "odd"]))
    call = f"call_{draw(st.integers(0, 3))}"
    if kind == "user":
        return {"role": "user", "content": draw(TEXTS), "timestamp": i}
    if kind in ("call", "text"):
        block = (
            {"type": "toolCall", "id": call, "name": "read", "arguments": {"p": draw(TEXTS)}}
            if kind == "call"
            else {"type": "text", "text": draw(TEXTS)}
        )
        return {
            "role": "assistant",
            "content": [block, {"type": "thinking", "thinking": draw(TEXTS)}],
            "usage": draw(USAGE),
            "stopReason": draw(st.sampled_from(["stop", "toolUse", "error", "aborted"])),
            "timestamp": i,
        }
    if kind == "result":
        return {
            "role": "toolResult",
            "toolCallId": call,
            "content": [{"type": "text", "text": draw(TEXTS)}],
            "timestamp": i,
        }
    if kind == "system":
        message = {"role": "system", "content": draw(TEXTS)}
        if draw(st.booleans()):
            message["timestamp"] = i
        if draw(st.booleans()):
            message["sections"] = {"s": draw(TEXTS), "t": None}
        return message
    if kind == "bash":
        return {"role": "bashExecution", "command": "ls", "output": draw(TEXTS)}
    # Malformed content: repaired or counted as the agent would (NaN included).
    return {"role": draw(st.sampled_from(["user", "assistant"])), "content": None}


@st.composite
def routes(draw) -> list[dict]:
    n = draw(st.integers(1, 45))
    ids = [f"e{i}" for i in range(n)]
    if draw(st.integers(0, 9)) == 0 and n > 2:  # a repeated id: the engine answers per prefix
        ids[draw(st.integers(1, n - 1))] = ids[0]
    path: list[dict] = []
    for i in range(n):
        entry: dict = {"id": ids[i], "parentId": ids[i - 1] if i else None, "timestamp": "t"}
        kind = draw(
            st.sampled_from(
                ["message"] * 8
                + ["edit"] * 3
                + ["compaction", "compaction", "branch", "custom", "thinking", "model", "usage"]
            )
        )
        if kind == "message" or i == 0:
            entry.update(type="message", message=_message(draw, i))
        elif kind == "edit":
            # Any target: an earlier entry (also one folded by a compaction), a later id, itself.
            entry.update(type="context_edit", targetId=f"e{draw(st.integers(0, n))}")
            entry["replacement"] = draw(
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
            entry.update(type="compaction", summary=draw(TEXTS), tokensBefore=100)
            entry["firstKeptEntryId"] = draw(
                st.sampled_from([f"e{draw(st.integers(0, i))}", "nowhere", None])
            )
            if draw(st.booleans()):
                entry["systemMessage"] = {"role": "system", "content": "cp", "timestamp": 1}
        elif kind == "branch":
            entry.update(type="branch_summary", summary=draw(TEXTS), fromId="e0")
        elif kind == "custom":
            entry.update(type="custom_message", customType="note", content=draw(TEXTS))
        elif kind == "thinking":
            entry.update(type="thinking_level_change", thinkingLevel="high")
        elif kind == "model":
            entry.update(type="model_change", provider="q", modelId="m")
        else:
            entry.update(type="usage", usage=draw(USAGE))
        path.append(entry)
    return path


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@settings(max_examples=400, deadline=None)
@given(routes())
def test_running_estimate_equals_each_prefix(path):
    run = ProjectedEstimates()
    answers = []
    for i, entry in enumerate(path):
        run.feed(entry)
        prefix = path[: i + 1]
        expected = estimate_projected_context(projection_from_path(prefix), prefix).tokens
        got = run.tokens()
        assert _same(got, expected), (i, got, expected)
        answers.append(expected)
    assert len(run) == len(path)
    # Any earlier prefix can still be asked for afterwards.
    assert all(_same(run.tokens_at(i), answers[i]) for i in range(len(path)))
    assert run.exact == (len({e["id"] for e in path}) < len(path))


def test_an_edit_of_an_earlier_entry_recounts_it():
    user = {"role": "user", "content": "x" * 400}
    path = [
        {"id": "a", "parentId": None, "type": "message", "message": user},
        {"id": "b", "parentId": "a", "type": "context_edit", "targetId": "a", "replacement": None},
    ]
    run = ProjectedEstimates()
    run.feed(path[0])
    assert run.tokens() == 100
    run.feed(path[1])
    assert run.tokens() == 0


@settings(max_examples=300, deadline=None)
@given(routes())
def test_running_every_message_estimate_equals_each_prefix(path):
    """``estimate()``: the projection of each prefix with every message estimated (the
    Timeline's estimate line and the edit preview's basis), whatever usage says."""
    from explorer.session.tokens import estimate_every_message

    run = ProjectedEstimates()
    for i, entry in enumerate(path):
        run.feed(entry)
        prefix = path[: i + 1]
        expected = estimate_every_message(projection_from_path(prefix).messages).tokens
        assert _same(run.estimate(), expected), (i, run.estimate(), expected)
        assert _same(run.estimate_at(i), expected)
