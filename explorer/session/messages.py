"""Messages: what entries contribute to the model, and how they are shown to it (SPEC section 2).

Messages are plain dicts in the agent's camelCase shape. Functions here never modify the dicts
they are given: a repaired or converted message is always a new dict, because the same objects
are shared with the stored entries and with every projection built from them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .jsonfmt import UNDEFINED, date_parse, dumps, js_order, js_string, truthy

__all__ = [
    "BRANCH_SUMMARY_PREFIX",
    "BRANCH_SUMMARY_SUFFIX",
    "COMPACTION_SUMMARY_PREFIX",
    "COMPACTION_SUMMARY_SUFFIX",
    "EDITABLE_ROLES",
    "bash_execution_to_text",
    "combine_usage",
    "content_text",
    "convert_to_llm",
    "create_branch_summary_message",
    "create_compaction_summary_message",
    "create_custom_message",
    "entry_time",
    "get_current_system_message",
    "is_text_content",
    "js_string",
    "session_entry_to_context_messages",
]

COMPACTION_SUMMARY_PREFIX = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n"
COMPACTION_SUMMARY_SUFFIX = "\n</summary>"
BRANCH_SUMMARY_PREFIX = (
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n"
)
# No newline before the closing tag: the asymmetry with the compaction suffix is the real format.
BRANCH_SUMMARY_SUFFIX = "</summary>"

EDITABLE_ROLES = frozenset(("user", "assistant", "toolResult", "custom"))
"""Roles whose `content` a context edit may replace."""

_MISSING: Any = UNDEFINED

# ---------------------------------------------------------------------------------------------
# JavaScript value helpers


def entry_time(timestamp: Any = _MISSING) -> int | float:
    """`new Date(timestamp).getTime()` for an entry's ISO timestamp (NaN when unparseable).

    Summary and custom messages take their epoch-ms timestamp from the entry this way. A stored
    number is used as a time value, an explicit null is 0, anything else unparseable is NaN.
    """
    if isinstance(timestamp, str):
        ms = date_parse(timestamp)
    elif timestamp is None:
        ms = 0.0
    elif isinstance(timestamp, bool):
        ms = float(timestamp)
    elif isinstance(timestamp, (int, float)):
        ms = float(timestamp)
        if math.isfinite(ms):
            ms = float(math.trunc(ms)) if abs(ms) <= 8.64e15 else math.nan
    elif isinstance(timestamp, list):
        ms = date_parse(js_string(timestamp))
    else:
        ms = math.nan
    if math.isnan(ms) or math.isinf(ms):
        return math.nan
    return int(ms)


def is_text_content(content: Any) -> bool:
    """True when `content_text` can read the value (a string or an array)."""
    return isinstance(content, (str, list))


def content_text(content: Any, separator: str = "\n") -> str:
    """Text of a content value: the string itself, or the text blocks joined (SPEC 2.7).

    The agent raises a TypeError for anything else (absent, null, a number, an object); every
    caller here treats such content as empty text instead and reports it separately.
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            parts.append("" if text is None else js_string(text))
    return separator.join(parts)


# ---------------------------------------------------------------------------------------------
# Builders for messages produced from entries


def create_custom_message(
    custom_type: Any,
    content: Any,
    display: Any,
    details: Any = _MISSING,
    timestamp: Any = _MISSING,
) -> dict[str, Any]:
    """A `custom` role message (from a `custom_message` entry)."""
    message: dict[str, Any] = {"role": "custom"}
    if custom_type is not _MISSING:
        message["customType"] = custom_type
    if content is not _MISSING:
        message["content"] = content
    if display is not _MISSING:
        message["display"] = display
    if details is not _MISSING:
        message["details"] = details
    message["timestamp"] = entry_time(timestamp)
    return message


def create_branch_summary_message(
    summary: Any, from_id: Any = _MISSING, timestamp: Any = _MISSING
) -> dict[str, Any]:
    """A `branchSummary` role message."""
    message: dict[str, Any] = {"role": "branchSummary"}
    if summary is not _MISSING:
        message["summary"] = summary
    if from_id is not _MISSING:
        message["fromId"] = from_id
    message["timestamp"] = entry_time(timestamp)
    return message


def create_compaction_summary_message(
    summary: Any, tokens_before: Any = _MISSING, timestamp: Any = _MISSING
) -> dict[str, Any]:
    """A `compactionSummary` role message."""
    message: dict[str, Any] = {"role": "compactionSummary"}
    if summary is not _MISSING:
        message["summary"] = summary
    if tokens_before is not _MISSING:
        message["tokensBefore"] = tokens_before
    message["timestamp"] = entry_time(timestamp)
    return message


def session_entry_to_context_messages(entry: dict[str, Any]) -> list[dict[str, Any]]:
    """The model messages one entry contributes, before context edits (SPEC 2.4).

    Stored message dicts are returned as they are (shared, never modified); a message whose
    content is null or absent is replaced by a repaired shallow copy. Whether a compaction may
    contribute at all is the projection's decision.
    """
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if message is None:
            # The agent itself fails on such an entry; it has nothing usable to contribute.
            return []
        if not isinstance(message, dict):
            return [message]  # no role, so no repair: passed through like any unknown message
        role = message.get("role")
        if message.get("content") is None:
            if role == "system":
                repaired = dict(message)
                repaired["content"] = ""
                return [repaired]
            if role in ("user", "assistant", "toolResult"):
                repaired = dict(message)
                repaired["content"] = []
                return [repaired]
        return [message]
    if kind == "custom_message":
        content = entry.get("content")
        return [
            create_custom_message(
                entry.get("customType", _MISSING),
                [] if content is None else content,
                entry.get("display", _MISSING),
                entry.get("details", _MISSING),
                entry.get("timestamp", _MISSING),
            )
        ]
    if kind == "branch_summary":
        if truthy(entry.get("summary")):
            return [
                create_branch_summary_message(
                    entry["summary"],
                    entry.get("fromId", _MISSING),
                    entry.get("timestamp", _MISSING),
                )
            ]
        return []
    if kind == "compaction":
        summary = create_compaction_summary_message(
            entry.get("summary", _MISSING),
            entry.get("tokensBefore", _MISSING),
            entry.get("timestamp", _MISSING),
        )
        system = entry.get("systemMessage")
        return [system, summary] if truthy(system) else [summary]  # type: ignore[list-item]
    return []


# ---------------------------------------------------------------------------------------------
# Conversion for the model


def bash_execution_to_text(message: dict[str, Any]) -> str:
    """The user text a shell command run by the user becomes (SPEC 2.5)."""
    text = f"Ran `{js_string(message.get('command', _MISSING))}`\n"
    output = message.get("output", _MISSING)
    if truthy(output):
        text += f"```\n{js_string(output)}\n```"
    else:
        text += "(no output)"
    exit_code = message.get("exitCode", _MISSING)
    if truthy(message.get("cancelled")):
        text += "\n\n(command cancelled)"
    elif exit_code is not _MISSING and exit_code is not None and not _is_zero(exit_code):
        text += f"\n\nCommand exited with code {js_string(exit_code)}"
    if truthy(message.get("truncated")) and truthy(message.get("fullOutputPath")):
        text += f"\n\n[Output truncated. Full output: {js_string(message['fullOutputPath'])}]"
    return text


def _is_zero(value: Any) -> bool:
    # Strict equality with 0: numbers only (-0 included), never "0" or false.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


def _user_message(content: Any, source: dict[str, Any]) -> dict[str, Any]:
    converted: dict[str, Any] = {"role": "user"}
    if content is not _MISSING:
        converted["content"] = content
    if "timestamp" in source:
        converted["timestamp"] = source["timestamp"]
    return converted


def convert_to_llm(messages: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Map projected messages to the four roles a provider understands (SPEC 2.5)."""
    result: list[dict[str, Any]] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role in ("system", "user", "assistant", "toolResult"):
            result.append(message)
        elif role == "bashExecution":
            if truthy(message.get("excludeFromContext")):
                continue
            text = bash_execution_to_text(message)
            result.append(_user_message([{"type": "text", "text": text}], message))
        elif role == "custom":
            content = message.get("content", _MISSING)
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            result.append(_user_message(content, message))
        elif role == "branchSummary":
            text = (
                BRANCH_SUMMARY_PREFIX
                + js_string(message.get("summary", _MISSING))
                + BRANCH_SUMMARY_SUFFIX
            )
            result.append(_user_message([{"type": "text", "text": text}], message))
        elif role == "compactionSummary":
            text = (
                COMPACTION_SUMMARY_PREFIX
                + js_string(message.get("summary", _MISSING))
                + COMPACTION_SUMMARY_SUFFIX
            )
            result.append(_user_message([{"type": "text", "text": text}], message))
    return result


# ---------------------------------------------------------------------------------------------
# System message replay


def get_current_system_message(messages: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """Replay every system message in order into the current system state (SPEC 2.6).

    Later system messages are deltas. The result is None when no usable timestamp exists and
    no tool remains, whatever text or sections were declared: that is what the agent does,
    and the compaction checkpoint and the projected estimate depend on it.
    """
    timestamp: Any = _MISSING
    texts: list[str] = []
    sections: dict[str, Any] = {}
    tools: dict[Any, Any] = {}
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "system":
            continue
        if timestamp is _MISSING or timestamp is None:
            timestamp = message.get("timestamp", _MISSING)
        text = content_text(message.get("content"), "\n")
        if text:
            texts.append(text)
        declared = message.get("sections")
        if isinstance(declared, dict):
            for name in js_order(list(declared.keys())):
                value = declared[name]
                if value is None:
                    sections.pop(name, None)
                else:
                    sections[name] = value
        elif isinstance(declared, (list, str)):
            # Enumerating an array or a string yields its indices.
            for index, value in enumerate(declared):
                name = str(index)
                if value is None:
                    sections.pop(name, None)
                else:
                    sections[name] = value
        for removed in _as_list(message.get("toolsRemoved")):
            tools.pop(_tool_name(removed), None)
        for added in _as_list(message.get("toolsAdded")):
            tools[_tool_name(added)] = added
    if timestamp is _MISSING and not tools:
        return None
    result: dict[str, Any] = {"role": "system", "content": "\n\n".join(texts)}
    if sections:
        result["sections"] = {name: sections[name] for name in js_order(list(sections.keys()))}
    if tools:
        result["toolsAdded"] = list(tools.values())
    result["timestamp"] = 0 if timestamp is _MISSING or timestamp is None else timestamp
    return result


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _tool_name(tool: Any) -> Any:
    if isinstance(tool, dict):
        name = tool.get("name")
        try:
            hash(name)
        except TypeError:
            return dumps(name)
        return name
    return None


# ---------------------------------------------------------------------------------------------
# Usage


def _js_add(a: Any, b: Any) -> int | float:
    """`a + b` for numeric usage fields; a missing or non-numeric side gives NaN."""
    values = []
    for v in (a, b):
        if v is None:
            values.append(0)
        elif isinstance(v, bool):
            values.append(int(v))
        elif isinstance(v, (int, float)):
            values.append(v)  # type: ignore[arg-type]
        else:
            return math.nan
    return values[0] + values[1]


def combine_usage(
    first: dict[str, Any], second: dict[str, Any], *, pi_version: str = "1.6.0"
) -> dict[str, Any]:
    """Sum of two usages (used when one compaction makes two summary requests, SPEC 2.2).

    Since Pi 1.6.0 the summed cost also says whether its total came from the provider:
    `cost.totalFromProvider` is true only when it is true in both parts (a sum is provider
    reported only if every part is). `pi_version="1.0.3"` leaves the key out, as that release did.
    """
    a = first if isinstance(first, dict) else {}
    b = second if isinstance(second, dict) else {}
    result: dict[str, Any] = {}
    for key in ("input", "output", "cacheRead", "cacheWrite"):
        result[key] = _js_add(a.get(key, _MISSING_NUM), b.get(key, _MISSING_NUM))
    for key in ("cacheWrite1h", "reasoning"):
        if key in a or key in b:
            result[key] = _js_add(_or_zero(a.get(key)), _or_zero(b.get(key)))
    result["totalTokens"] = _js_add(
        a.get("totalTokens", _MISSING_NUM), b.get("totalTokens", _MISSING_NUM)
    )
    cost_a = a.get("cost") if isinstance(a.get("cost"), dict) else {}
    cost_b = b.get("cost") if isinstance(b.get("cost"), dict) else {}
    result["cost"] = {
        key: _js_add(cost_a.get(key, _MISSING_NUM), cost_b.get(key, _MISSING_NUM))  # type: ignore[union-attr]
        for key in ("input", "output", "cacheRead", "cacheWrite", "total")
    }
    if pi_version != "1.0.3":
        result["cost"]["totalFromProvider"] = (
            cost_a.get("totalFromProvider") is True and cost_b.get("totalFromProvider") is True  # type: ignore[union-attr]
        )
    return result


# An absent field is `undefined` in the agent, and undefined + n is NaN (null + n is n).
_MISSING_NUM: Any = object()


def _or_zero(value: Any) -> Any:
    return 0 if value is None else value
