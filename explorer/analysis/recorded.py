"""The projection the app shows: the engine's, except after a compaction whose resulting
context the agent recorded (a Codex `replacement_history`).

The engine projects a stored session as Pi does: after a compaction, its summary and the
entries it kept. Codex writes the whole context it rebuilt at a compaction, so for a stored
Codex session the app attaches that recorded history, converted to messages by the engine's
Codex reader, to a loaded copy of the compaction entry (``explorer.codex_context``), and every
figure of what the model saw (Raw vs projected, a compaction's "tokens after", Compare, the
route figures) takes it from this one function. A stored line never carries it: a Pi session
continued from such a route is projected by Pi's rule, as Pi itself would.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from explorer.session.context import (
    ProjectedEntry,
    SessionProjection,
    projection_from_path,
)

__all__ = ["RECORDED", "projection_of", "recorded_of"]

# The key of a loaded (never stored) compaction entry holding the context its agent recorded:
# {"messages": [...], "items": n, "encrypted": bool}.
RECORDED = "recordedContext"


def recorded_of(entry: Any) -> dict[str, Any] | None:
    """The recorded context a loaded compaction entry carries, or None."""
    if not isinstance(entry, dict) or entry.get("type") != "compaction":
        return None
    value = entry.get(RECORDED)
    if isinstance(value, dict) and isinstance(value.get("messages"), list):
        return value
    return None


def projection_of(path: Sequence[dict[str, Any]]) -> SessionProjection:
    """The engine's projection of ``path``; when its newest compaction (always the first
    context entry) carries a recorded context, that context is what the compaction gives
    the model, instead of Pi's summary."""
    projection = projection_from_path(list(path))
    if not projection.entries:
        return projection
    first = projection.entries[0]
    recorded = recorded_of(first.source_entry)
    if recorded is None:
        return projection
    messages = list(recorded["messages"])
    return SessionProjection(
        [ProjectedEntry(first.source_entry, messages), *projection.entries[1:]],
        messages + projection.messages[len(first.messages) :],
        projection.thinking_level,
        projection.model,
    )
