"""Conversation text for summary requests (SPEC section 6.7, docs/spec-pi-1.6.md).

The history is flattened into labelled plain text instead of being sent as chat turns, so the
summarizing model reads it as material to summarize rather than a conversation to continue.
Malformed content that would make Pi raise is read as empty here (a design choice of this
project, SPEC section 6.7 [D]); the diagnostics layer reports it.

Since Pi 1.6.0 thinking is left out (replayed reasoning is a provider's summary of it, often not
part of what the model saw, and can make the request larger than the context it summarizes) and
truncated tool results never end in half a surrogate pair. `pi_version="1.0.3"` restores the
older text for reproducing summaries written by that release.
"""

from __future__ import annotations

from typing import Any

from .jsonfmt import dumps, js_order, js_string, utf16_len, utf16_slice
from .pi_version import PI_DEFAULT, is_pi_1_0_3

__all__ = [
    "TOOL_RESULT_MAX_CHARS",
    "js_string",
    "serialize_conversation",
    "slice_head",
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


def slice_head(text: str, max_units: int) -> str:
    """At most the first `max_units` UTF-16 units, never ending in half a surrogate pair.

    A cut through a pair would leave a lone high surrogate, which is not valid text for the
    provider; the whole character is dropped instead (so the result may be one unit shorter).
    """
    end = max(0, max_units)
    if text.isascii():
        return text[:end]
    units = text.encode("utf-16-le", errors="surrogatepass")
    n = len(units) // 2
    if 0 < end < n:
        high = int.from_bytes(units[2 * end - 2 : 2 * end], "little")
        low = int.from_bytes(units[2 * end : 2 * end + 2], "little")
        if 0xD800 <= high <= 0xDBFF and 0xDC00 <= low <= 0xDFFF:
            end -= 1
    return units[: 2 * min(end, n)].decode("utf-16-le", errors="surrogatepass")


def truncate_for_summary(
    text: str, max_chars: int = TOOL_RESULT_MAX_CHARS, *, pi_version: str = PI_DEFAULT
) -> str:
    """Keep the head of a long tool result; the marker counts the units past `max_chars`.

    The count is `length - max_chars` even when a surrogate pair at the cut drops one more unit
    (as in Pi 1.6.0). With `pi_version="1.0.3"` the cut may split a pair, as that release did.
    """
    length = utf16_len(text)
    if length <= max_chars:
        return text
    head = (
        utf16_slice(text, 0, max_chars) if is_pi_1_0_3(pi_version) else slice_head(text, max_chars)
    )
    return f"{head}\n\n[... {length - max_chars} more characters truncated]"


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


def _assistant_parts(content: Any, with_thinking: bool) -> list[str]:
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    thinking = [b.get("thinking") for b in blocks if b.get("type") == "thinking"]
    calls = [_format_tool_call(b) for b in blocks if b.get("type") == "toolCall"]
    parts: list[str] = []
    if with_thinking and thinking:
        parts.append("[Assistant thinking]: " + "\n".join(_join_member(t) for t in thinking))
    if any(b.get("type") == "text" for b in blocks):
        parts.append("[Assistant]: " + tolerant_content_text(blocks))
    if calls:
        parts.append("[Assistant tool calls]: " + "; ".join(calls))
    return parts


def serialize_conversation(messages: list[dict[str, Any]], *, pi_version: str = PI_DEFAULT) -> str:
    """Serialize model messages (after `convert_to_llm`) into the summary request text.

    Thinking blocks are left out unless `pi_version="1.0.3"` asks for that release's
    `[Assistant thinking]` parts.
    """
    legacy = is_pi_1_0_3(pi_version)
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
            parts.extend(_assistant_parts(message.get("content"), legacy))
        elif role == "toolResult":
            text = tolerant_content_text(message.get("content"), "")
            if text:
                parts.append(f"[Tool result]: {truncate_for_summary(text, pi_version=pi_version)}")
    return "\n\n".join(parts)
