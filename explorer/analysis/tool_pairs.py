"""Which tool call a tool result answers: the one rule every page that pairs them follows.

A result names its call by id (``toolCallId``), and the call sits in an assistant message
somewhere above it, not necessarily its parent: Claude Code writes each content block of a
response as its own record (two parallel calls are two assistant entries, then two result
entries, so the first result's parent is the second call), Codex writes each call and each
output as its own item, and a Pi reply with two calls is followed by both results in a
chain. Ids are not unique across a session either (some providers number calls ``call_0``,
``call_1`` anew in each reply), so the pairing is the *nearest* assistant message above the
result holding a call with that id, within the result's turn.

Pure (no Django): callers give the ancestors and a way to read an assistant's call ids, so
the entry panel walks stored rows upward one by one, the Transcript reads its loaded window
first, and the Integrity check its preloaded lines, all by the same function.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable
from typing import Any

# How far above a result its call is looked for. A turn's calls and results sit close
# together (parallel calls: one entry per call, then one per result), so a call further up
# than this is treated as not found rather than paid for with a walk of the whole route.
MAX_STEPS = 64


def find_call(
    call_id: str,
    ancestors: Iterable[tuple[str, str]],
    calls_of: Callable[[str], Container[str]],
) -> str | None:
    """The id of the entry whose assistant message holds the call ``call_id`` answers, or
    None.

    ``ancestors``: (entry id, message role) from the result's parent upward, nearest first
    (read lazily: the walk usually stops after one or two). ``calls_of(entry_id)``: the
    call ids of that assistant entry, asked only for assistants. The walk stops, finding
    nothing, at the first user message (a result answers a call of its own turn, and an
    older turn may reuse the id), and after :data:`MAX_STEPS` entries, so a result whose
    id names no call costs a bounded walk, never the whole route.
    """
    if not call_id:
        return None
    for steps, (entry_id, role) in enumerate(ancestors):
        if steps >= MAX_STEPS or role == "user":
            return None
        if role == "assistant" and call_id in calls_of(entry_id):
            return entry_id
    return None


def call_blocks(message: Any) -> dict[str, dict[str, Any]]:
    """An assistant message's tool-call blocks by id (the first of a repeated id)."""
    out: dict[str, dict[str, Any]] = {}
    content = message.get("content") if isinstance(message, dict) else None
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "toolCall":
            call_id = block.get("id")
            if isinstance(call_id, str) and call_id:
                out.setdefault(call_id, block)
    return out
