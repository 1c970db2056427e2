"""Fixture builders of SPEC section 8.0 for the message, context and token tests."""

from __future__ import annotations

import copy
from typing import Any

_ABSENT: Any = object()
AUTO: Any = object()

TS = "2025-01-01T00:00:01.000Z"
TS_MS = 1735689601000


def Z() -> dict[str, Any]:
    return {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


def UT(n: int) -> dict[str, Any]:
    usage = Z()
    usage["input"] = n
    usage["totalTokens"] = n
    return usage


def U(t: Any) -> dict[str, Any]:
    return {"role": "user", "content": t, "timestamp": 1}


def A(t: str, usage: dict[str, Any] | None = None, stop: str = "stop") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": t}],
        "api": "test-api",
        "provider": "test",
        "model": "m1",
        "usage": Z() if usage is None else copy.deepcopy(usage),
        "stopReason": stop,
        "timestamp": 2,
    }


def AC(name: str, args: Any) -> dict[str, Any]:
    message = A("")
    message["content"] = [{"type": "toolCall", "id": "call_1", "name": name, "arguments": args}]
    message["stopReason"] = "toolUse"
    return message


def R(t: str) -> dict[str, Any]:
    return {
        "role": "toolResult",
        "toolCallId": "call_1",
        "toolName": "read",
        "content": [{"type": "text", "text": t}],
        "isError": False,
        "timestamp": 3,
    }


def SYS(
    content: Any,
    sections: Any = _ABSENT,
    tools_added: Any = _ABSENT,
    tools_removed: Any = _ABSENT,
    ts: Any = _ABSENT,
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "system", "content": content}
    if sections is not _ABSENT:
        message["sections"] = sections
    if tools_added is not _ABSENT:
        message["toolsAdded"] = tools_added
    if tools_removed is not _ABSENT:
        message["toolsRemoved"] = tools_removed
    if ts is not _ABSENT:
        message["timestamp"] = ts
    return message


def _base(kind: str, entry_id: str, parent: Any, timestamp: str = TS) -> dict[str, Any]:
    return {"type": kind, "id": entry_id, "parentId": parent, "timestamp": timestamp}


def msg(entry_id: str, message: dict[str, Any], parent: Any = AUTO) -> dict[str, Any]:
    entry = _base("message", entry_id, parent)
    entry["message"] = message
    return entry


def compaction(
    entry_id: str,
    summary: str,
    first_kept: Any,
    tokens_before: Any = 1000,
    system_message: Any = _ABSENT,
    parent: Any = AUTO,
) -> dict[str, Any]:
    entry = _base("compaction", entry_id, parent)
    entry["summary"] = summary
    if first_kept is not _ABSENT:
        entry["firstKeptEntryId"] = first_kept
    entry["tokensBefore"] = tokens_before
    if system_message is not _ABSENT:
        entry["systemMessage"] = system_message
    return entry


def edit(
    entry_id: str, target: str, replacement: Any = _ABSENT, parent: Any = AUTO
) -> dict[str, Any]:
    entry = _base("context_edit", entry_id, parent)
    entry["targetId"] = target
    if replacement is not _ABSENT:
        entry["replacement"] = replacement
    return entry


def model_change(entry_id: str, provider: str, model_id: str, parent: Any = AUTO) -> dict[str, Any]:
    entry = _base("model_change", entry_id, parent)
    entry["provider"] = provider
    entry["modelId"] = model_id
    return entry


def thinking(entry_id: str, level: str, parent: Any = AUTO) -> dict[str, Any]:
    entry = _base("thinking_level_change", entry_id, parent)
    entry["thinkingLevel"] = level
    return entry


def custom_message(
    entry_id: str, custom_type: str, content: Any, display: bool, parent: Any = AUTO
) -> dict[str, Any]:
    return {
        "type": "custom_message",
        "customType": custom_type,
        "content": content,
        "display": display,
        "id": entry_id,
        "parentId": parent,
        "timestamp": TS,
    }


def custom(entry_id: str, custom_type: str, data: Any, parent: Any = AUTO) -> dict[str, Any]:
    return {
        "type": "custom",
        "customType": custom_type,
        "data": data,
        "id": entry_id,
        "parentId": parent,
        "timestamp": TS,
    }


def chain(*entries: dict[str, Any]) -> list[dict[str, Any]]:
    """Link entries in order: an AUTO parent becomes the previous entry's id (None first)."""
    previous = None
    for entry in entries:
        if entry["parentId"] is AUTO:
            entry["parentId"] = previous
        previous = entry["id"]
    return list(entries)


def ids(entries: list[dict[str, Any]]) -> list[str]:
    return [entry["id"] for entry in entries]
