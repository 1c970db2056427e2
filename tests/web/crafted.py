"""Crafted sessions for the web tests, and the engine's own figure for them.

A test that pins a page's figure to the engine's builds just the entries its case needs from
these pieces: the session header, a provider usage, the message, context-edit, compaction and
tool-result entries, the session's bytes, its import. The figure the page must show is
:func:`engine_tokens`: the session file read by the engine, as ``pisession context`` reads
it, and estimated by the product's one function for it
(:func:`explorer.analysis.projection.projected_context_tokens`), not worked out again here.
"""

from __future__ import annotations

import json
from pathlib import Path

from explorer import services
from explorer.analysis.projection import projected_context_tokens
from explorer.models import Session
from explorer.session import SessionManager

SESSION_TS = "2025-03-04T05:06:07.089Z"
EPOCH_MS = 1741064768000  # a message's own timestamp, in milliseconds, at n = 0


def header(session_id: str, *, timestamp: str = SESSION_TS, cwd: str = "/p") -> dict:
    """The session's first line."""
    return {"type": "session", "version": 3, "id": session_id, "timestamp": timestamp, "cwd": cwd}


def usage(input_tokens: int, *, cost: float = 0) -> dict:
    """A provider's usage: ``input_tokens`` in, 5 out; ``cost`` its total."""
    spent = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost}
    return {"input": input_tokens, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": input_tokens + 5, "cost": spent}  # fmt: skip


def at(n: int) -> str:
    """An entry's timestamp, ``n`` seconds into the minute after the header's."""
    return f"2025-03-04T05:07:{n:02d}.000Z"


def entry(eid: str, parent: str | None, message: dict, timestamp: str) -> dict:
    """A message entry holding ``message``."""
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": timestamp, "message": message}  # fmt: skip


def message(
    eid: str,
    parent: str | None,
    role: str,
    text: str,
    n: int,
    *,
    usage: dict | None = None,
    stop: str = "stop",
    ms: int | None = None,
) -> dict:
    """A user or assistant message entry at :func:`at` ``(n)``; the message's own timestamp
    is ``ms`` (by default :data:`EPOCH_MS` + ``n``). An assistant's reply is one text block
    with ``usage`` and ``stop`` as its stop reason; a user's message ignores both."""
    body: dict = {"role": role, "content": text, "timestamp": EPOCH_MS + n if ms is None else ms}
    if role == "assistant":
        body["content"] = [{"type": "text", "text": text}]
        body.update(api="anthropic-messages", provider="anthropic", model="m", stopReason=stop)
        body["usage"] = usage
    return entry(eid, parent, body, at(n))


def context_edit(eid: str, parent: str, target: str, n: int) -> dict:
    """An edit hiding ``target`` from the model (no replacement)."""
    return {"type": "context_edit", "id": eid, "parentId": parent, "timestamp": at(n), "targetId": target, "replacement": None}  # fmt: skip


def compaction(eid: str, parent: str, kept: str, n: int, *, summary: str, tokens_before: int) -> dict:  # fmt: skip
    """A compaction whose first kept entry is ``kept``."""
    return {"type": "compaction", "id": eid, "parentId": parent, "timestamp": at(n), "summary": summary, "firstKeptEntryId": kept, "tokensBefore": tokens_before}  # fmt: skip


def tool_result(
    eid: str, parent: str, call: str, text: str, timestamp: str, *, call_last: bool = False
) -> dict:
    """A tool result answering the call ``call``; ``call_last``: the call id as the message's
    last key, after its content (an unusual key order)."""
    body = {"role": "toolResult", "toolName": "read", "content": [{"type": "text", "text": text}], "isError": False, "timestamp": 3}  # fmt: skip
    if call_last:
        return entry(eid, parent, {**body, "toolCallId": call}, timestamp)
    return entry(eid, parent, {"role": "toolResult", "toolCallId": call, **body}, timestamp)


def session_bytes(head: dict, entries: list[dict], *, compact: bool = False) -> bytes:
    """The session file: one JSON line an entry, the header first; ``compact``: without the
    spaces ``json.dumps`` puts after separators."""
    separators = (",", ":") if compact else None
    return "".join(json.dumps(e, separators=separators) + "\n" for e in [head, *entries]).encode()


def imported(data: bytes, source_path: str) -> Session:
    """The session the store makes of ``data``, which must import without problems."""
    result = services.import_bytes(data, source_path=source_path, user=None)
    assert result.ok, [str(p) for p in result.problems]
    return result.session


def engine_tokens(data: bytes, tmp_path: Path, leaf: str | None = None) -> int:
    """The context figure ``pisession context [--leaf]`` gives for the session ``data``: the
    file opened by the engine (not read back from the store), its route to ``leaf`` (by
    default the file's last entry), estimated by ``projected_context_tokens``."""
    path = tmp_path / "engine.jsonl"
    path.write_bytes(data)
    manager = SessionManager.open(str(path))
    if leaf is not None:
        manager.branch(leaf)
    return projected_context_tokens(manager.get_branch())
