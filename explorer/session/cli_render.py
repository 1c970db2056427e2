"""Human-readable text for the command line: one-line entry descriptions, the indented tree.

Kept apart from the commands so the wording can change without touching what is computed.
Everything here is iterative: real sessions are tens of thousands of entries deep.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

from explorer.session.describe import blocks_text

from .jsonfmt import hashable
from .message_meta import message_facts

__all__ = [
    "Style",
    "describe_entry",
    "node_children",
    "node_entry",
    "node_label",
    "render_tree",
    "snippet",
]

_SPACES = re.compile(r"\s+")


class Style:
    """ANSI styling, active only when writing to a terminal (and NO_COLOR is not set)."""

    def __init__(self, stream: TextIO, force: bool | None = None):
        if force is None:
            isatty = getattr(stream, "isatty", None)
            force = bool(isatty and isatty()) and not os.environ.get("NO_COLOR")
        self.enabled = force

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def green(self, text: str) -> str:
        return self._wrap("32", text)

    def yellow(self, text: str) -> str:
        return self._wrap("33", text)

    def red(self, text: str) -> str:
        return self._wrap("31", text)

    def cyan(self, text: str) -> str:
        return self._wrap("36", text)


def snippet(value: Any, width: int = 72) -> str:
    """A single-line excerpt: whitespace collapsed, cut with an ellipsis."""
    text = value if isinstance(value, str) else _content_text(value)
    # Only the start can be shown: do not collapse whitespace through a 100 KB tool output.
    text = _SPACES.sub(" ", text[: width * 8]).strip()
    if len(text) > width:
        text = text[: width - 1] + "…"
    return text


def _content_text(content: Any) -> str:
    return blocks_text(content, sep=" ", images=True)


def _quote(text: str) -> str:
    return f'"{text}"' if text else '""'


def _facts(message: dict[str, Any]) -> str:
    """The newer optional fields (duration, response model, ...) as a ` · `-separated tail."""
    facts = message_facts(message)
    return " · " + " · ".join(facts) if facts else ""


def _describe_message(message: Any) -> str:
    if not isinstance(message, dict):
        return "message (malformed)"
    role = message.get("role")
    content = message.get("content")
    if role == "assistant":
        bits: list[str] = []
        calls: list[str] = []
        thinking = False
        if isinstance(content, list):
            for block in content:
                if not isinstance(block, dict):
                    continue
                kind = block.get("type")
                if kind == "toolCall":
                    args = block.get("arguments")
                    target = ""
                    if isinstance(args, dict):
                        for key in ("path", "command", "pattern"):
                            if isinstance(args.get(key), str):
                                target = snippet(args[key], 40)
                                break
                    calls.append(f"{block.get('name')}({target})")
                elif kind == "thinking":
                    thinking = True
        text = snippet(_content_text(content), 60)
        if text:
            bits.append(_quote(text))
        if calls:
            shown = ", ".join(calls[:3])
            if len(calls) > 3:
                shown += f" +{len(calls) - 3} more"
            bits.append("→ " + shown)
        if thinking and not bits:
            bits.append("(thinking)")
        stop = message.get("stopReason")
        if stop in ("error", "aborted"):
            bits.append(f"[{stop}]")
        return "assistant: " + (" ".join(bits) if bits else "(empty)") + _facts(message)
    if role == "toolResult":
        text = _content_text(content)
        flag = " error" if message.get("isError") else ""
        return (
            f"toolResult {message.get('toolName')}{flag}: {len(text)} chars {_quote(snippet(text, 40))}"
            + _facts(message)
        )
    if role == "system":
        sections = message.get("sections")
        tools = message.get("toolsAdded")
        extra = []
        if isinstance(sections, dict) and sections:
            extra.append("sections: " + ", ".join(str(k) for k in sections))
        if isinstance(tools, list) and tools:
            extra.append(f"{len(tools)} tools")
        text = snippet(_content_text(content), 40)
        return "system: " + " · ".join(([_quote(text)] if text else []) + extra)
    if role == "bashExecution":
        return f"bash: $ {snippet(message.get('command', ''), 60)}"
    if role == "custom":
        return f"custom {message.get('customType')}: {_quote(snippet(_content_text(content), 50))}"
    return f"{role}: {_quote(snippet(_content_text(content), 60))}"


def describe_entry(entry: Any) -> str:
    """What an entry is, in one short line (no id)."""
    if not isinstance(entry, dict):
        return "(not an object)"
    kind = entry.get("type")
    if kind == "message":
        return _describe_message(entry.get("message"))
    if kind == "compaction":
        return (
            f"compaction: keeps from {entry.get('firstKeptEntryId')}, "
            f"tokensBefore {entry.get('tokensBefore')}"
        )
    if kind == "branch_summary":
        return f"branch summary (from {entry.get('fromId')}): {_quote(snippet(entry.get('summary') or '', 50))}"
    if kind == "label":
        if entry.get("label"):
            return f"label {entry.get('targetId')} = {_quote(str(entry.get('label')))}"
        return f"label {entry.get('targetId')} cleared"
    if kind == "session_info":
        return f"session name = {_quote(str(entry.get('name', '')))}"
    if kind == "model_change":
        return f"model → {entry.get('provider')}/{entry.get('modelId')}"
    if kind == "thinking_level_change":
        return f"thinking → {entry.get('thinkingLevel')}"
    if kind == "context_edit":
        replacement = entry.get("replacement", ...)
        what = "omit" if replacement is None else "replace"
        return f"context edit {entry.get('targetId')}: {what}"
    if kind == "custom":
        return f"custom {entry.get('customType')} (extension state)"
    if kind == "custom_message":
        return f"custom message {entry.get('customType')}: {_quote(snippet(_content_text(entry.get('content')), 50))}"
    if kind == "usage":
        return f"usage {entry.get('kind')} {entry.get('provider')}/{entry.get('model')}"
    return f"{kind} (unknown type)"


# Tree nodes may be dicts ({"entry", "children", "label"}) or objects with those attributes.


def node_entry(node: Any) -> dict[str, Any]:
    return node["entry"] if isinstance(node, dict) else node.entry


def node_children(node: Any) -> Sequence[Any]:
    return node["children"] if isinstance(node, dict) else node.children


def node_label(node: Any) -> Any:
    if isinstance(node, dict):
        return node.get("label")
    return getattr(node, "label", None)


def render_tree(
    roots: Sequence[Any],
    active: set[Any],
    leaf_id: Any,
    style: Style,
    *,
    describe: Callable[[dict[str, Any]], str] = describe_entry,
) -> Iterator[str]:
    """Lines of the tree. A chain of only children stays at one indentation; only real
    branch points indent, so a 10,000-entry linear session is 10,000 short lines."""
    seen: set[int] = set()
    stack: list[tuple[Any, str, str]] = [(root, "", "") for root in reversed(roots)]
    while stack:
        node, prefix, child_prefix = stack.pop()
        entry = node_entry(node)
        entry_id = entry.get("id") if isinstance(entry, dict) else None
        on_path = entry_id in active if hashable(entry_id) else False
        marker = "*" if on_path else " "
        text = f"{entry_id} {describe(entry)}"
        label = node_label(node)
        if label:
            text += f" [{label}]"
        if entry_id == leaf_id and on_path:
            text += " ← leaf"
        if on_path:
            line = style.green(marker) + " " + style.bold(text)
        else:
            line = marker + " " + style.dim(text)
        if id(node) in seen:  # a duplicated id attaches one node twice
            yield style.dim(prefix) + line + style.dim(" (repeated, see above)")
            continue
        seen.add(id(node))
        yield style.dim(prefix) + line
        children = node_children(node)
        if len(children) == 1:
            stack.append((children[0], child_prefix, child_prefix))
        elif children:
            last = len(children) - 1
            for i in range(last, -1, -1):
                connector, continuation = ("└─ ", "   ") if i == last else ("├─ ", "│  ")
                stack.append((children[i], child_prefix + connector, child_prefix + continuation))
