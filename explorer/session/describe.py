"""An entry in words: the one place that says what an entry is, for people.

The CLI, the explorer pages, the live view and search all describe entries; they call these
functions so an entry reads the same everywhere (role, text, title, usage, cost, tool calls,
files touched). Plain functions over entry dicts; no I/O.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from explorer.session import jsonfmt
from explorer.session.messages import content_text
from explorer.session.tokens import calculate_context_tokens, estimate_tokens, get_assistant_usage
from explorer.session.tool_files import call_uses


def finite(x: Any) -> float:
    """Numbers from JSON may be NaN or absent; pages show 0 rather than failing."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return 0.0
    return 0.0 if math.isnan(x) or math.isinf(x) else float(x)


def tokens_of(messages: Iterable[Any]) -> int:
    return int(sum(finite(estimate_tokens(m)) for m in messages))


def entry_message(entry: dict) -> dict | None:
    m = entry.get("message") if entry.get("type") == "message" else None
    return m if isinstance(m, dict) else None


def entry_role(entry: dict) -> str:
    m = entry_message(entry)
    if m is not None:
        r = m.get("role")
        return r if isinstance(r, str) else ""
    return ""


def blocks_text(
    content: Any, *, sep: str = "\n", tool_calls: bool = False, images: bool = False
) -> str:
    """The readable text of message content (a string, or a list of blocks): text blocks,
    and on request tool calls as ``name {arguments}`` and images as ``[image]``."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind == "toolCall" and tool_calls:
            parts.append(f"{block.get('name', '')} {compact_json(block.get('arguments'))}")
        elif kind == "image" and images:
            parts.append("[image]")
    return sep.join(parts)


_TOOL_CALL_LINE = re.compile(r"^([A-Za-z0-9_.:-]{1,100}) (\{.*\})$")


def readable_tool_calls(text: str) -> str:
    """``text`` (an :func:`entry_text`) with each tool call line (``name {json}``, one line
    since its JSON escapes its newlines) written as ``name(key: value, …)``: string values
    as their own text, so a snippet reads ``content: line one line two``, not
    ``"content":"line one\\nline two"``. A line that is not such JSON stays as it is."""
    if "{" not in text:
        return text
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = _TOOL_CALL_LINE.match(line)
        if m is None:
            continue
        try:
            args = jsonfmt.loads(m.group(2))
        except (ValueError, RecursionError):
            continue
        if not isinstance(args, dict):
            continue
        shown = ", ".join(
            f"{k}: {v if isinstance(v, str) else compact_json(v)}" for k, v in args.items()
        )
        lines[i] = f"{m.group(1)}({shown})"
    return "\n".join(lines)


def entry_text(entry: dict, limit: int | None = None) -> str:
    """The human-readable text of an entry (for snippets, titles and reference scans)."""
    kind = entry.get("type")
    text = ""
    m = entry_message(entry)
    if m is not None:
        role = m.get("role")
        if role == "bashExecution":
            text = f"$ {m.get('command', '')}\n{m.get('output', '')}"
        else:
            text = blocks_text(m.get("content"), sep="\n", tool_calls=True)
    elif kind in ("compaction", "branch_summary"):
        summary = entry.get("summary")
        text = summary if isinstance(summary, str) else ""
    elif kind == "custom_message":
        c = entry.get("content")
        text = c if isinstance(c, str) else content_text(c) if isinstance(c, list) else ""
    elif kind == "label":
        text = str(entry.get("label") or "")
    elif kind == "session_info":
        text = str(entry.get("name") or "")
    elif kind == "model_change":
        text = f"{entry.get('provider', '')}/{entry.get('modelId', '')}"
    elif kind == "thinking_level_change":
        text = str(entry.get("thinkingLevel", ""))
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    return text


def compact_json(value: Any) -> str:
    try:
        return jsonfmt.dumps(value)
    except (TypeError, ValueError):
        return ""


def entry_title(entry: dict, limit: int = 80) -> str:
    """One line describing an entry, for tree rows and graph nodes."""
    kind = entry.get("type")
    m = entry_message(entry)
    if m is not None and m.get("role") == "assistant":
        content: list[Any] = m["content"] if isinstance(m.get("content"), list) else []
        calls = [
            b.get("name") for b in content if isinstance(b, dict) and b.get("type") == "toolCall"
        ]
        texts = [
            b.get("text")
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        head = " ".join(str(t).strip() for t in texts if str(t).strip())
        if calls:
            names = ", ".join(str(c) for c in calls[:3]) + ("…" if len(calls) > 3 else "")
            head = (head + " " if head else "") + f"[{names}]"
        if not head and not m.get("errorMessage"):
            # A reply of thinking alone (a Claude Code thinking record, a Codex reasoning
            # item) says so, with the start of its thinking, rather than its stop reason
            # (no "[": the tree's "No tools" filter reads "[name]" as a tool call).
            thoughts = [
                b.get("thinking")
                for b in content
                if isinstance(b, dict)
                and b.get("type") == "thinking"
                and isinstance(b.get("thinking"), str)
            ]
            if any(isinstance(b, dict) and b.get("type") == "thinking" for b in content):
                # Cut before joining: a thought of megabytes is not copied for a title.
                cut = [str(t)[: limit * 4].strip() for t in thoughts]
                head = " ".join(["(thinking)", *(t for t in cut if t)])
        text = head or (m.get("errorMessage") or m.get("stopReason") or "")
    elif kind == "context_edit":
        rep = entry.get("replacement")
        text = f"{'hide' if rep is None else 'replace'} {entry.get('targetId', '')}"
    elif kind == "label":
        lab = entry.get("label")
        text = (
            f"{entry.get('targetId', '')} ← {lab!r}"
            if lab
            else f"clear {entry.get('targetId', '')}"
        )
    elif kind == "usage":
        text = f"{entry.get('kind', '')} {entry.get('model', '')}"
    elif kind == "custom":
        text = str(entry.get("customType", ""))
    else:
        text = entry_text(entry)
    return one_line(str(text), limit)


def one_line(text: str, limit: int) -> str:
    """``text`` with every run of whitespace made one space, ends trimmed, cut to ``limit``
    characters with "…" as the last one when longer.

    Normalizes only as much of the text as the line can show: a tool result of several
    megabytes split into words whole cost tens of milliseconds per title. Normalizing a
    prefix gives a prefix of the whole text's normalized form, so once that is longer than
    ``limit`` the line is settled; a prefix that shrinks to less (runs of whitespace) is
    doubled until it does not, or is the whole text."""
    reach = 2 * limit + 64
    while True:
        head = " ".join(text[:reach].split())
        if reach >= len(text):
            return head if len(head) <= limit else head[: limit - 1] + "…"
        if len(head) > limit:
            return head[: limit - 1] + "…"
        reach *= 2


# Entry types whose own ``usage`` is a spend, besides assistant messages (user and tool
# messages carry none, whatever their lines say). The site stores each entry's cost and
# finds a route's spending rows by this list, so it is the one place that says so.
COSTED_TYPES = ("usage", "compaction", "branch_summary")


def usage_of(entry: dict) -> dict | None:
    """The spend recorded by an entry: assistant usage, usage entries, summary requests."""
    m = entry_message(entry)
    u = m.get("usage") if m is not None and m.get("role") == "assistant" else None
    if u is None and entry.get("type") in COSTED_TYPES:
        u = entry.get("usage")
    return u if isinstance(u, dict) else None


def cost_of(entry: dict) -> float:
    u = usage_of(entry)
    if not u:
        return 0.0
    c = u.get("cost")
    return finite(c.get("total")) if isinstance(c, dict) else 0.0


def total_tokens_of(entry: dict) -> float:
    u = usage_of(entry)
    if not u:
        return 0.0
    t = finite(u.get("totalTokens"))
    if t:
        return t
    return sum(finite(u.get(k)) for k in ("input", "output", "cacheRead", "cacheWrite"))


def provider_context_tokens(entry: dict) -> int | None:
    """The provider-reported context of an answered assistant reply, by the engine's one
    definition (:func:`tokens.calculate_context_tokens` of a usage it trusts: its
    ``totalTokens``, else input + output + cache). Every page that says "provider-reported
    context" (Raw vs projected, Timeline, Transcript, the entry panel) shows this figure:
    the Timeline once plotted input + cache, 1,800 where the other pages said 1,920."""
    usage = get_assistant_usage(entry_message(entry))
    if usage is None:
        return None
    return int(finite(calculate_context_tokens(usage)))


def tool_calls_of(entry: dict) -> list[dict]:
    m = entry_message(entry)
    if m is None or m.get("role") != "assistant" or not isinstance(m.get("content"), list):
        return []
    return [b for b in m["content"] if isinstance(b, dict) and b.get("type") == "toolCall"]


def file_uses(entry: dict) -> list[tuple[str, str]]:
    """("read" | "modified", path) of each file tool call of one entry, in call order: Pi's
    read/edit/write, Claude Code's Read/Edit/MultiEdit/Write/Notebook* and the files a Codex
    ``apply_patch`` names (``tool_files``, which says what counts; shell command lines are
    not parsed)."""
    out = []
    for call in tool_calls_of(entry):
        out.extend(call_uses(call.get("name"), call.get("arguments")))
    return out


def files_of_uses(uses: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Files read and modified, in first-seen order, from :func:`file_uses` in route order
    (a file both read and modified counts as modified)."""
    read: dict[str, None] = {}
    modified: dict[str, None] = {}
    for kind, path in uses:
        (read if kind == "read" else modified)[path] = None
    return {"read": [p for p in read if p not in modified], "modified": list(modified)}


def files_touched(entries: Iterable[dict]) -> dict[str, list[str]]:
    """Files read and modified by tool calls, in first-seen order."""
    return files_of_uses(u for e in entries for u in file_uses(e))


def transcript_text(data: dict[str, Any]) -> str:
    """An entry as the live transcript and tree snippets show it: the text, then the tools
    an assistant called (``→ read, bash``), and a sentence for metadata entries."""
    kind = data.get("type")
    if kind == "message":
        message: dict[str, Any] = data["message"] if isinstance(data.get("message"), dict) else {}
        text = content_text(message.get("content"))
        if message.get("role") == "assistant" and isinstance(message.get("content"), list):
            calls = [
                b.get("name")
                for b in message["content"]
                if isinstance(b, dict) and b.get("type") == "toolCall"
            ]
            if calls:
                text += ("\n" if text else "") + "→ " + ", ".join(str(c) for c in calls)
        if not text and message.get("role") == "bashExecution":
            text = f"$ {message.get('command', '')}\n{message.get('output', '')}"
        return text
    if kind in ("compaction", "branch_summary"):
        return str(data.get("summary", ""))
    if kind == "custom_message":
        return content_text(data.get("content"))
    if kind == "label":
        return f"label {data.get('label')!r} on {data.get('targetId')}"
    if kind == "context_edit":
        action = "hidden from the model" if data.get("replacement") is None else "replaced"
        return f"context edit: {data.get('targetId')} {action}"
    if kind == "session_info":
        return f"name: {data.get('name', '')}"
    if kind == "model_change":
        return f"model: {data.get('provider', '')}/{data.get('modelId', '')}"
    if kind == "thinking_level_change":
        return f"thinking: {data.get('thinkingLevel', '')}"
    if isinstance(data.get("customType"), str):
        return str(data["customType"])
    return ""


def message_preview(m: Any, limit: int = 160) -> str:
    """One line for a projected message (summaries show their summary)."""
    if not isinstance(m, dict):
        return ""
    role = m.get("role")
    if role in ("compactionSummary", "branchSummary"):
        text = str(m.get("summary", ""))
    elif role == "bashExecution":
        text = f"$ {m.get('command', '')}"
    else:
        text = entry_text({"type": "message", "message": m})
    return one_line(text, limit)


_ERROR_WORDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("ConnectionRefusedError", "Errno 111", "Connection refused"),
     "The model server refused the connection: is it running at the configured address?"),
    (("TimeoutError", "timed out", "socket.timeout"),
     "The model server did not answer in time."),
    (("gaierror", "Name or service not known", "nodename nor servname", "Errno -2", "Errno -3"),
     "The model server's host name could not be found: check the configured address."),
    (("ConnectionResetError", "RemoteDisconnected", "BrokenPipeError", "IncompleteRead"),
     "The connection to the model server broke off during the answer."),
    (("SSLError", "CERTIFICATE_VERIFY_FAILED"),
     "The model server's TLS certificate was not accepted."),
    (("401 ", "403 "), "The model server refused the API key (not authorised)."),
    (("404 ",), "The model server has no such endpoint or model: check the URL and the model name."),
    (("429 ",), "The model server is rate-limiting requests; try again shortly."),
    (("500 ", "502 ", "503 ", "504 "), "The model server had an internal error."),
    (("Provider finish_reason: content_filter",), "The provider's content filter stopped the answer."),
    (("Request was aborted",), "The answer was cancelled."),
)  # fmt: skip


def error_in_words(error: Any) -> str:
    """A model error as a sentence for people, from the ``errorMessage`` an assistant entry
    stores (which keeps the technical text, as Pi writes it). Readers met
    ``ConnectionRefusedError: [Errno 111]`` and had to guess; the raw text stays beside
    the sentence for whoever debugs it. Unknown errors are returned as they are."""
    text = str(error or "").strip()
    if not text:
        return ""
    for needles, words in _ERROR_WORDS:
        for needle in needles:
            if needle in text and (not needle[0].isdigit() or text.startswith(needle)):
                return words
    return text


_KIND_NAMES = {
    "user": "user",
    "assistant": "assistant",
    "toolResult": "tool result",
    "bashExecution": "shell",
    "system": "system",
    "compaction": "compaction",
    "branch_summary": "branch summary",
    "context_edit": "context edit",
    "label": "label",
    "session_info": "session name",
    "model_change": "model",
    "thinking_level_change": "thinking level",
    "custom_message": "extension message",
    "custom": "extension data",
    "usage": "usage",
    "message": "message",
    "chain": "folded",
    "subtree": "subtree",
}


def kind_name(kind: str | None) -> str:
    """A message role or entry type as people say it (``toolResult`` → "tool result",
    ``thinking_level_change`` → "thinking level"): tree rows showed the raw names, cut."""
    if not kind:
        return "entry"
    return _KIND_NAMES.get(kind, kind.replace("_", " "))
