"""Token estimation: characters ÷ 4 per message, and trusting provider usage (SPEC section 5).

Lengths are JavaScript lengths (UTF-16 units for strings, element counts for arrays); a
value without a length (a number, an object) makes the count NaN exactly as in the agent,
and NaN then propagates through every sum. Where the agent would raise on malformed data
(absent content, a null block, a missing field) the malformed part counts 0 instead;
`message_problems` names those parts so the caller can report them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .jsonfmt import dumps, truthy, utf16_len
from .messages import get_current_system_message

__all__ = [
    "DEFAULT_COMPACTION_SETTINGS",
    "ESTIMATED_IMAGE_CHARS",
    "CompactionSettings",
    "ContextEstimate",
    "calculate_context_tokens",
    "context_usage",
    "estimate_context_tokens",
    "estimate_projected_context",
    "estimate_projected_context_tokens",
    "estimate_tokens",
    "get_assistant_usage",
    "get_last_assistant_usage",
    "message_problems",
    "should_compact",
]

ESTIMATED_IMAGE_CHARS = 4800
"""Characters one image counts for (1200 tokens)."""

_NAN = math.nan


@dataclass(frozen=True)
class CompactionSettings:
    """When to compact and how much recent context to keep (SPEC 5.5)."""

    enabled: bool = True
    reserve_tokens: int = 16384
    keep_recent_tokens: int = 20000

    def to_json(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "reserveTokens": self.reserve_tokens,
            "keepRecentTokens": self.keep_recent_tokens,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CompactionSettings:
        default = DEFAULT_COMPACTION_SETTINGS
        return cls(
            enabled=data.get("enabled", default.enabled),
            reserve_tokens=data.get("reserveTokens", default.reserve_tokens),
            keep_recent_tokens=data.get("keepRecentTokens", default.keep_recent_tokens),
        )


DEFAULT_COMPACTION_SETTINGS = CompactionSettings()


@dataclass(frozen=True)
class ContextEstimate:
    """Context size: trusted provider usage plus estimates of the messages after it."""

    tokens: float
    usage_tokens: float
    trailing_tokens: float
    last_usage_index: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "usageTokens": self.usage_tokens,
            "trailingTokens": self.trailing_tokens,
            "lastUsageIndex": self.last_usage_index,
        }


# ---------------------------------------------------------------------------------------------
# Per-message estimate


def _length(value: Any) -> float:
    """JavaScript `value.length` for a present, non-null value; NaN when it has none."""
    if isinstance(value, str):
        return utf16_len(value)
    if isinstance(value, list):
        return len(value)
    return _NAN


def _content_chars(content: Any) -> float:
    if isinstance(content, str):
        return utf16_len(content)
    if not isinstance(content, list):
        return 0  # the agent raises here; counted as empty content
    chars: float = 0
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if truthy(text):
                chars += _length(text)
        elif kind == "image":
            chars += ESTIMATED_IMAGE_CHARS
    return chars


def _assistant_chars(content: Any) -> float:
    if not isinstance(content, list):
        return 0  # a string counts nothing; anything else would raise in the agent
    chars: float = 0
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if text is not None:
                chars += _length(text)
        elif kind == "thinking":
            thinking = block.get("thinking")
            if thinking is not None:
                chars += _length(thinking)
        elif kind == "toolCall":
            name = block.get("name")
            if name is None or "arguments" not in block:
                continue
            chars += _length(name) + utf16_len(dumps(block["arguments"]))
    return chars


def _system_chars(message: Mapping[str, Any]) -> float:
    chars = _content_chars(message.get("content"))
    sections = message.get("sections")
    if truthy(sections):
        for value in _values(sections):
            if truthy(value):
                chars += _length(value)
    tools = message.get("toolsAdded")
    if truthy(tools):
        chars += utf16_len(dumps(tools))
    return chars


def _values(container: Any) -> list[Any]:
    if isinstance(container, dict):
        return list(container.values())
    if isinstance(container, (list, str)):
        return list(container)
    return []


def _part_length(message: Mapping[str, Any], key: str) -> float:
    value = message.get(key)
    return 0 if value is None else _length(value)


def _ceil_quarter(chars: float) -> float:
    if isinstance(chars, float) and (math.isnan(chars) or math.isinf(chars)):
        return _NAN
    return math.ceil(chars / 4)


class OmittedMessage(dict):
    """A user or tool-result message whose text was not read, standing in for it in a
    projection: its role, and its estimate known from elsewhere (the stored route figures:
    ``explorer.queries.omitted``), which :func:`estimate_tokens` gives. The projection
    passes such a message through untouched, so where the real one would be, this is, and
    every estimate is the real one's. Equal only to itself; its text is never shown: a
    caller that needs it where content decides (Compare's matching, a listed row) reads
    the real message instead."""

    def __init__(self, role: str, tokens: int) -> None:
        super().__init__(role=role, content="")
        self.tokens = tokens

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = None  # type: ignore[assignment]  # a dict: unhashable, as before


def estimate_tokens(message: Any) -> float:
    """Estimated tokens of one message: ceil(characters / 4); NaN in the agent's NaN cases."""
    if type(message) is OmittedMessage:
        return message.tokens
    if not isinstance(message, dict):
        return 0
    role = message.get("role")
    if role == "system":
        chars = _system_chars(message)
    elif role in ("user", "custom", "toolResult"):
        chars = _content_chars(message.get("content"))
    elif role == "assistant":
        chars = _assistant_chars(message.get("content"))
    elif role == "bashExecution":
        chars = _part_length(message, "command") + _part_length(message, "output")
    elif role in ("branchSummary", "compactionSummary"):
        chars = _part_length(message, "summary")
    else:
        return 0
    return _ceil_quarter(chars)


def message_problems(message: Any) -> list[str]:
    """Parts of a message the agent's estimator (or summary serializer) would fail on.

    Each problem is a short phrase; an empty list means the message is well formed for
    estimation. NaN cases are not problems here (they are the agent's real results).
    """
    if not isinstance(message, dict):
        return ["message is not an object"]
    role = message.get("role")
    problems: list[str] = []
    if role in ("system", "user", "custom", "toolResult"):
        content = message.get("content")
        if not isinstance(content, (str, list)):
            problems.append(
                "content is missing" if content is None else "content is not text or a block list"
            )
        elif isinstance(content, list) and any(block is None for block in content):
            problems.append("null content block")
    elif role == "assistant":
        content = message.get("content")
        if content is None or not isinstance(content, (str, list)):
            problems.append(
                "content is missing" if content is None else "content is not a block list"
            )
        elif isinstance(content, list):
            for block in content:
                if block is None:
                    problems.append("null content block")
                elif isinstance(block, dict):
                    kind = block.get("type")
                    if kind == "text" and block.get("text") is None:
                        problems.append("text block without text")
                    elif kind == "thinking" and block.get("thinking") is None:
                        problems.append("thinking block without thinking")
                    elif kind == "toolCall" and (
                        block.get("name") is None or "arguments" not in block
                    ):
                        problems.append("tool call without name or arguments")
    elif role == "bashExecution":
        for key in ("command", "output"):
            if message.get(key) is None:
                problems.append(f"{key} is missing")
    elif role in ("branchSummary", "compactionSummary") and message.get("summary") is None:
        problems.append("summary is missing")
    return problems


# ---------------------------------------------------------------------------------------------
# Usage


def _number(value: Any) -> float:
    if value is None:
        return 0  # null + n == n
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    return _NAN


def calculate_context_tokens(usage: Any) -> float:
    """Context size a provider reported: `totalTokens`, or the sum of the token fields."""
    if not isinstance(usage, dict):
        return _NAN
    total = usage.get("totalTokens")
    if truthy(total):
        return _number(total)
    result: float = 0
    for key in ("input", "output", "cacheRead", "cacheWrite"):
        result += _number(usage[key]) if key in usage else _NAN
    return result


def get_assistant_usage(message: Any) -> dict[str, Any] | None:
    """The message's usage if it is valid: an answered assistant with a positive size."""
    if (
        not isinstance(message, dict)
        or message.get("role") != "assistant"
        or "usage" not in message
    ):
        return None
    if message.get("stopReason") in ("aborted", "error"):
        return None
    usage = message["usage"]
    if not truthy(usage):
        return None
    tokens = calculate_context_tokens(usage)
    if not tokens > 0:  # NaN is not valid either
        return None
    return usage


def get_last_assistant_usage(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The last valid usage among `message` entries, scanning from the end."""
    for i in range(len(entries) - 1, -1, -1):
        entry = entries[i]
        if entry.get("type") == "message":
            usage = get_assistant_usage(entry.get("message"))
            if usage is not None:
                return usage
    return None


# ---------------------------------------------------------------------------------------------
# Context estimates


def estimate_context_tokens(messages: Sequence[Any]) -> ContextEstimate:
    """Last valid usage plus estimates of the messages after it (SPEC 5.3)."""
    for k in range(len(messages) - 1, -1, -1):
        usage = get_assistant_usage(messages[k])
        if usage is not None:
            usage_tokens = calculate_context_tokens(usage)
            trailing: float = 0
            for i in range(k + 1, len(messages)):
                trailing += estimate_tokens(messages[i])
            return ContextEstimate(usage_tokens + trailing, usage_tokens, trailing, k)
    total: float = 0
    for message in messages:
        total += estimate_tokens(message)
    return ContextEstimate(total, 0, total, None)


def _projection_parts(projection: Any) -> tuple[Sequence[Any], Sequence[Any]]:
    """(entries as (source entry, messages) pairs, messages) of a projection or its JSON form."""
    if isinstance(projection, Mapping):
        entries = [(e["sourceEntry"], e["messages"]) for e in projection.get("entries", [])]
        return entries, projection.get("messages", [])
    entries = [(e.source_entry, e.messages) for e in projection.entries]
    return entries, projection.messages


def estimate_projected_context(
    projection: Any, branch_entries: Sequence[Mapping[str, Any]]
) -> ContextEstimate:
    """Context size of a projection, distrusting usage older than the latest edit or compaction.

    A provider's usage describes the context it was given; once a context edit or a
    compaction comes later on the path, that context no longer exists, so the projection is
    re-estimated with the replayed system state counted once (SPEC 5.4).
    """
    entries, messages = _projection_parts(projection)
    estimate = estimate_context_tokens(messages)
    if estimate.last_usage_index is not None:
        usage_entry_id: Any = None
        offset = 0
        for source, entry_messages in entries:
            following = offset + len(entry_messages)
            if estimate.last_usage_index < following:
                usage_entry_id = source.get("id")
                break
            offset = following
        usage_index = -1
        if truthy(usage_entry_id):
            for i, entry in enumerate(branch_entries):
                if entry.get("id") == usage_entry_id:
                    usage_index = i
                    break
        invalidating = -1
        for i in range(len(branch_entries) - 1, -1, -1):
            if branch_entries[i].get("type") in ("context_edit", "compaction"):
                invalidating = i
                break
        if usage_index > invalidating:
            return estimate
    return estimate_every_message(messages)


def estimate_every_message(messages: Sequence[Any]) -> ContextEstimate:
    """Context size with no provider usage trusted: every message estimated, the current
    system message counted once (replayed system state is sent once). The basis
    :func:`estimate_projected_context` falls back to after an edit or compaction, so a
    figure from before an edit compares with one from after it on this basis alone."""
    system = get_current_system_message(messages)
    tokens: float = estimate_tokens(system) if system is not None else 0
    for message in messages:
        if not (isinstance(message, dict) and message.get("role") == "system"):
            tokens += estimate_tokens(message)
    return ContextEstimate(tokens, 0, tokens, None)


def estimate_projected_context_tokens(
    projection: Any, branch_entries: Sequence[Mapping[str, Any]]
) -> float:
    """Tokens of `estimate_projected_context` (NaN possible)."""
    return estimate_projected_context(projection, branch_entries).tokens


def should_compact(context_tokens: float, context_window: float, settings: Any = None) -> bool:
    """True when the context exceeds the window minus the reserve (strictly; NaN → False)."""
    if settings is None:
        settings = DEFAULT_COMPACTION_SETTINGS
    if isinstance(settings, Mapping):
        enabled = settings.get("enabled")
        reserve = settings.get("reserveTokens")
    else:
        enabled = settings.enabled
        reserve = settings.reserve_tokens
    if not truthy(enabled):
        return False
    try:
        return bool(context_tokens > context_window - reserve)  # type: ignore[operator]
    except TypeError:
        return False


def context_usage(
    projection: Any, branch_entries: Sequence[Mapping[str, Any]], context_window: Any
) -> dict[str, Any] | None:
    """The context meter: `{"tokens", "contextWindow", "percent"}`, or None without a window.

    After a compaction the size is unknown (None) until an assistant with valid usage
    answers after it: older usage measured a context that no longer exists.
    """
    if not isinstance(context_window, (int, float)) or not context_window > 0:
        return None
    entries, messages = _projection_parts(projection)
    latest = None
    for i in range(len(branch_entries) - 1, -1, -1):
        if branch_entries[i].get("type") == "compaction":
            latest = i
            break
    if latest is not None:
        answered: set[Any] = set()
        for source, entry_messages in entries:
            if any(_has_valid_usage(message) for message in entry_messages):
                answered.add(source.get("id"))
        if not any(entry.get("id") in answered for entry in branch_entries[latest + 1 :]):
            return {"tokens": None, "contextWindow": context_window, "percent": None}
    tokens = estimate_projected_context(projection, branch_entries).tokens
    return {
        "tokens": tokens,
        "contextWindow": context_window,
        "percent": tokens / context_window * 100,
    }


def _has_valid_usage(message: Any) -> bool:
    # The meter checks role, stop reason and size, not whether a usage key exists.
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return False
    if message.get("stopReason") in ("aborted", "error"):
        return False
    return calculate_context_tokens(message.get("usage")) > 0
