"""Conversation text for summary requests (SPEC section 6.7).

The history is flattened into labelled plain text instead of being sent as chat turns, so the
summarizing model reads it as material to summarize rather than a conversation to continue.
Malformed content that would make Pi raise is read as empty here (a design choice of this
project, SPEC section 6.7 [D]); the diagnostics layer reports it.
"""

from __future__ import annotations

from typing import Any

from .jsonfmt import dumps, js_order, js_string, utf16_len, utf16_slice

__all__ = [
    "TOOL_RESULT_MAX_CHARS",
    "js_string",
    "serialize_conversation",
    "tolerant_content_text",
    "truncate_for_summary",
]

TOOL_RESULT_MAX_CHARS = 2000


def _join_member(value: Any) -> str:
    """`Array.prototype.join` writes null and undefined members as empty strings."""
    return "" if value is None else js_string(value)


def tolerant_content_text(content: Any, separator: str = "\n") -> str:
    """`contentText` that reads content Pi would choke on as empty."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return separator.join(
        _join_member(block.get("text"))
        for block in content
        if isinstance(block, dict) and block.get("type") == "text"
    )


def truncate_for_summary(text: str, max_chars: int = TOOL_RESULT_MAX_CHARS) -> str:
    """Keep the first `max_chars` UTF-16 units (a surrogate pair may be cut, as in Pi)."""
    length = utf16_len(text)
    if length <= max_chars:
        return text
    return (
        f"{utf16_slice(text, 0, max_chars)}\n\n[... {length - max_chars} more characters truncated]"
    )


def _argument_pairs(arguments: Any) -> list[tuple[str, Any]]:
    """`Object.entries(arguments)` in JavaScript key order; null counts as `{}`."""
    if isinstance(arguments, dict):
        return [(str(k), arguments[k]) for k in js_order([str(k) for k in arguments])]
    if isinstance(arguments, list):
        return [(str(i), v) for i, v in enumerate(arguments)]
    if isinstance(arguments, str):
        return [(str(i), ch) for i, ch in enumerate(arguments)]
    return []


def _format_tool_call(block: dict[str, Any]) -> str:
    args = ", ".join(f"{k}={dumps(v)}" for k, v in _argument_pairs(block.get("arguments")))
    name = block.get("name") if "name" in block else "undefined"
    return f"{js_string(name)}({args})"


def _assistant_parts(content: Any) -> list[str]:
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    thinking = [b.get("thinking") for b in blocks if b.get("type") == "thinking"]
    calls = [_format_tool_call(b) for b in blocks if b.get("type") == "toolCall"]
    parts: list[str] = []
    if thinking:
        parts.append("[Assistant thinking]: " + "\n".join(_join_member(t) for t in thinking))
    if any(b.get("type") == "text" for b in blocks):
        parts.append("[Assistant]: " + tolerant_content_text(blocks))
    if calls:
        parts.append("[Assistant tool calls]: " + "; ".join(calls))
    return parts


def serialize_conversation(messages: list[dict[str, Any]]) -> str:
    """Serialize model messages (after `convert_to_llm`) into the summary request text."""
    parts: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "user":
            text = tolerant_content_text(message.get("content"), "")
            if text:
                parts.append(f"[User]: {text}")
        elif role == "assistant":
            parts.extend(_assistant_parts(message.get("content")))
        elif role == "toolResult":
            text = tolerant_content_text(message.get("content"), "")
            if text:
                parts.append(f"[Tool result]: {truncate_for_summary(text)}")
    return "\n\n".join(parts)
