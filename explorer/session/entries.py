"""Entry builders (one per entry type, in on-disk key order) and legacy migration.

The key order of every entry type is part of the file format (SPEC sections 1.3-1.5), so each
builder creates its dict in exactly that order and leaves optional keys out when their value
is absent (Python `None`), the way `JSON.stringify` drops `undefined`.
"""

from __future__ import annotations

import math
from typing import Any

from . import jsonfmt
from .ids import RandomSource, generate_entry_id

__all__ = [
    "CURRENT_SESSION_VERSION",
    "branch_summary_entry",
    "compaction_entry",
    "context_edit_entry",
    "custom_entry",
    "custom_message_entry",
    "label_entry",
    "message_entry",
    "migrate_session_entries",
    "model_change_entry",
    "session_header",
    "session_info_entry",
    "session_version",
    "thinking_level_change_entry",
    "usage_entry",
    "version_number",
]

CURRENT_SESSION_VERSION = 3


def is_conversation(entry: Any) -> bool:
    """A user or assistant message. A session's file is first written once it holds one
    (the manager and a branched copy alike), so metadata alone never leaves a file behind."""
    if type(entry) is not dict or entry.get("type") != "message":
        return False
    message = entry.get("message")
    return type(message) is dict and message.get("role") in ("user", "assistant")


def session_header(
    session_id: str, timestamp: str, cwd: str, parent_session: str | None = None
) -> dict[str, Any]:
    header: dict[str, Any] = {
        "type": "session",
        "version": CURRENT_SESSION_VERSION,
        "id": session_id,
        "timestamp": timestamp,
        "cwd": cwd,
    }
    if parent_session is not None:
        header["parentSession"] = parent_session
    return header


def _base(kind: str, entry_id: str, parent_id: Any, timestamp: str) -> dict[str, Any]:
    return {"type": kind, "id": entry_id, "parentId": parent_id, "timestamp": timestamp}


def message_entry(entry_id: str, parent_id: Any, timestamp: str, message: Any) -> dict[str, Any]:
    entry = _base("message", entry_id, parent_id, timestamp)
    entry["message"] = message
    return entry


def thinking_level_change_entry(
    entry_id: str, parent_id: Any, timestamp: str, thinking_level: Any
) -> dict[str, Any]:
    entry = _base("thinking_level_change", entry_id, parent_id, timestamp)
    entry["thinkingLevel"] = thinking_level
    return entry


def model_change_entry(
    entry_id: str, parent_id: Any, timestamp: str, provider: Any, model_id: Any
) -> dict[str, Any]:
    entry = _base("model_change", entry_id, parent_id, timestamp)
    entry["provider"] = provider
    entry["modelId"] = model_id
    return entry


def usage_entry(
    entry_id: str,
    parent_id: Any,
    timestamp: str,
    kind: Any,
    provider: Any,
    model: Any,
    usage: Any,
    note: Any = None,
) -> dict[str, Any]:
    entry = _base("usage", entry_id, parent_id, timestamp)
    entry["kind"] = kind
    entry["provider"] = provider
    entry["model"] = model
    entry["usage"] = usage
    if jsonfmt.truthy(note):
        entry["note"] = note
    return entry


def _put_optional(entry: dict[str, Any], key: str, value: Any) -> None:
    if value is not None and value is not jsonfmt.UNDEFINED:
        entry[key] = value


def compaction_entry(
    entry_id: str,
    parent_id: Any,
    timestamp: str,
    summary: Any,
    first_kept_entry_id: Any,
    tokens_before: Any,
    details: Any = None,
    usage: Any = None,
    from_hook: Any = None,
    system_message: Any = None,
) -> dict[str, Any]:
    entry = _base("compaction", entry_id, parent_id, timestamp)
    entry["summary"] = summary
    entry["firstKeptEntryId"] = first_kept_entry_id
    entry["tokensBefore"] = tokens_before
    _put_optional(entry, "details", details)
    _put_optional(entry, "usage", usage)
    _put_optional(entry, "fromHook", from_hook)
    _put_optional(entry, "systemMessage", system_message)
    return entry


def branch_summary_entry(
    entry_id: str,
    parent_id: Any,
    timestamp: str,
    from_id: Any,
    summary: Any,
    details: Any = None,
    usage: Any = None,
    from_hook: Any = None,
) -> dict[str, Any]:
    entry = _base("branch_summary", entry_id, parent_id, timestamp)
    entry["fromId"] = from_id
    entry["summary"] = summary
    _put_optional(entry, "details", details)
    _put_optional(entry, "usage", usage)
    _put_optional(entry, "fromHook", from_hook)
    return entry


def custom_entry(
    custom_type: Any, data: Any, entry_id: str, parent_id: Any, timestamp: str
) -> dict[str, Any]:
    # Payload keys come before the id here, unlike the other entry types.
    entry: dict[str, Any] = {"type": "custom", "customType": custom_type}
    _put_optional(entry, "data", data)
    entry["id"] = entry_id
    entry["parentId"] = parent_id
    entry["timestamp"] = timestamp
    return entry


def custom_message_entry(
    custom_type: Any,
    content: Any,
    display: Any,
    details: Any,
    entry_id: str,
    parent_id: Any,
    timestamp: str,
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "custom_message",
        "customType": custom_type,
        "content": content,
        "display": display,
    }
    _put_optional(entry, "details", details)
    entry["id"] = entry_id
    entry["parentId"] = parent_id
    entry["timestamp"] = timestamp
    return entry


def context_edit_entry(
    entry_id: str, parent_id: Any, timestamp: str, target_id: Any, replacement: Any
) -> dict[str, Any]:
    entry = _base("context_edit", entry_id, parent_id, timestamp)
    entry["targetId"] = target_id
    entry["replacement"] = replacement
    return entry


def label_entry(
    entry_id: str, parent_id: Any, timestamp: Any, target_id: Any, label: Any
) -> dict[str, Any]:
    entry = _base("label", entry_id, parent_id, timestamp)
    entry["targetId"] = target_id
    _put_optional(entry, "label", label)
    return entry


def session_info_entry(entry_id: str, parent_id: Any, timestamp: str, name: Any) -> dict[str, Any]:
    entry = _base("session_info", entry_id, parent_id, timestamp)
    entry["name"] = name
    return entry


# ---------------------------------------------------------------------------------------------
# Migration (SPEC section 1.6)


def version_number(value: Any) -> float:
    """JavaScript `ToNumber` for the values a hand-written `version` may hold."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if value is None:
        return 0.0
    if isinstance(value, str):
        s = jsonfmt.js_trim(value)
        if not s:
            return 0.0
        try:
            if s.lower().startswith(("0x", "0o", "0b")):
                return float(int(s, 0))
            if s in ("Infinity", "+Infinity"):
                return math.inf
            if s == "-Infinity":
                return -math.inf
            if any(c.isalpha() and c not in "eE" for c in s):
                return math.nan
            return float(s)
        except ValueError:
            return math.nan
    if isinstance(value, list):
        if not value:
            return 0.0
        if len(value) == 1:
            inner = value[0]
            if isinstance(inner, (list, dict)):
                return version_number(inner) if isinstance(inner, list) else math.nan
            return (
                0.0
                if inner is None
                else version_number(inner if not isinstance(inner, bool) else str(inner).lower())
            )
        return math.nan
    return math.nan


def _find_header(entries: list[Any]) -> dict[str, Any] | None:
    for entry in entries:
        if type(entry) is dict and entry.get("type") == "session":
            return entry
    return None


def session_version(entries: list[Any]) -> Any:
    """`header.version ?? 1` of the first session item (1 when there is none)."""
    header = _find_header(entries)
    if header is None:
        return 1
    version = header.get("version")
    return 1 if version is None else version


def _is_index(value: Any, length: int) -> bool:
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and not (isinstance(value, float) and not value.is_integer())
        and 0 <= value < length
    )


def _migrate_v1_to_v2(entries: list[Any], rng: RandomSource | None) -> None:
    # Pi checks collisions against a fresh set that is never filled: plain random draws.
    never_filled: frozenset[str] = frozenset()
    previous: Any = None
    for entry in entries:
        if type(entry) is not dict:
            continue
        if entry.get("type") == "session":
            entry["version"] = 2
            continue
        entry["id"] = generate_entry_id(never_filled, rng)
        entry["parentId"] = previous
        previous = entry["id"]
        if entry.get("type") == "compaction":
            index = entry.get("firstKeptEntryIndex")
            if isinstance(index, (int, float)) and not isinstance(index, bool):
                if _is_index(index, len(entries)):
                    target = entries[int(index)]
                    if jsonfmt.truthy(target) and not (
                        type(target) is dict and target.get("type") == "session"
                    ):
                        if type(target) is dict and "id" in target:
                            entry["firstKeptEntryId"] = target["id"]
                        else:
                            # The target has no id yet: the value is undefined (omitted).
                            entry.pop("firstKeptEntryId", None)
                del entry["firstKeptEntryIndex"]


def _migrate_v2_to_v3(entries: list[Any]) -> None:
    for entry in entries:
        if type(entry) is not dict:
            continue
        if entry.get("type") == "session":
            entry["version"] = 3
            continue
        if entry.get("type") == "message":
            message = entry.get("message")
            if type(message) is dict and message.get("role") == "hookMessage":
                message["role"] = "custom"


def migrate_session_entries(entries: list[Any], rng: RandomSource | None = None) -> bool:
    """Bring legacy entries to version 3 in place; True when anything was migrated.

    `rng` supplies the ids assigned to version-1 entries (inject a deterministic source for
    reproducible read-only migration).
    """
    version = version_number(session_version(entries))
    if version >= CURRENT_SESSION_VERSION:
        return False
    if version < 2:
        _migrate_v1_to_v2(entries, rng)
    if version < 3:
        _migrate_v2_to_v3(entries)
    return True
