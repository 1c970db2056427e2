"""What one context edit changes in the projected context, from the entry it names alone.

An edit that arrives at the end of a route changes the messages of one entry (its target)
and makes every provider usage before it untrusted, so the projected estimate after it is
every message estimated (``tokens.estimate_every_message``). That total is the previous
one less the target's messages as they stood (raw, or under the edit in force before) plus
its messages under the new edit: a difference of one entry, where estimating afresh reads
and parses the whole context span (megabytes on a route with big tool results).

Only the plain case is answered; anything else returns None and the caller estimates
afresh with the engine: a target whose messages hold a system message (it would change the
current system state, counted once), a compaction (its summary and checkpoint follow other
rules), or an estimate that is NaN.
"""

from __future__ import annotations

import math
from typing import Any

from .context import _SILENT_TYPES, _apply_edit
from .messages import session_entry_to_context_messages
from .tokens import estimate_tokens

__all__ = ["EditDelta", "edit_difference"]

# (change of the every-message estimate, change of the projected message count)
EditDelta = tuple[float, int]


def _messages(target: dict[str, Any], edit: dict[str, Any] | None) -> list[Any] | None:
    kind = target.get("type")
    if kind == "compaction":
        return None
    messages = (
        []
        if type(kind) is str and kind in _SILENT_TYPES
        else (session_entry_to_context_messages(target))
    )
    if edit is not None:
        messages = _apply_edit(messages, edit)
    if any(isinstance(m, dict) and m.get("role") == "system" for m in messages):
        return None
    return messages


def _estimate(messages: list[Any]) -> float | None:
    total: float = 0
    for message in messages:
        total += estimate_tokens(message)
    return None if isinstance(total, float) and math.isnan(total) else total


def edit_difference(
    target: dict[str, Any], before: dict[str, Any] | None, edit: dict[str, Any]
) -> EditDelta | None:
    """The change ``edit`` makes to the every-message estimate and the message count of a
    projected context holding ``target`` (in the context's live range), where ``before`` is
    the edit of ``target`` in force until now (None: its own messages). None when the
    difference does not settle it (see the module's doc)."""
    old = _messages(target, before)
    new = _messages(target, edit)
    if old is None or new is None:
        return None
    old_tokens, new_tokens = _estimate(old), _estimate(new)
    if old_tokens is None or new_tokens is None:
        return None
    return new_tokens - old_tokens, len(new) - len(old)
