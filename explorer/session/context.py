"""Context building: path, compaction folding and projection (SPEC section 4).

Three stages: the *path* (root to leaf), the *context entries* (the path after folding the
latest compaction) and the *projection* (context edits applied, each entry paired with the
model messages it contributes, plus the restored settings).

Every stage has a path-based form (`*_from_path`) because the database store loads a single
path, never a whole session; the entry-list forms only add the path walk. Walks are iterative
and stop on a parentId cycle. Nothing here modifies a stored dict: replaced or repaired
messages are new dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .jsonfmt import truthy
from .messages import EDITABLE_ROLES, session_entry_to_context_messages
from .sentinel import UNSET

# Absent keys compare equal only to each other, like two undefined values.
_MISSING: Any = object()

__all__ = [
    "ProjectedEntry",
    "SessionContext",
    "SessionProjection",
    "build_context_entries",
    "build_entry_index",
    "build_session_context",
    "build_session_path",
    "build_session_projection",
    "context_entries_from_path",
    "context_from_path",
    "find_path_cycle",
    "get_latest_compaction_entry",
    "projection_diagnostics",
    "projection_from_path",
    "restore_settings",
]


@dataclass
class ProjectedEntry:
    """One context entry and the messages it contributes (possibly none)."""

    source_entry: dict[str, Any]
    messages: list[dict[str, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"sourceEntry": self.source_entry, "messages": self.messages}


@dataclass
class SessionProjection:
    """What the model sees at a leaf, with the entry each message came from."""

    entries: list[ProjectedEntry]
    messages: list[dict[str, Any]]
    thinking_level: str
    model: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "entries": [entry.to_json() for entry in self.entries],
            "messages": self.messages,
            "thinkingLevel": self.thinking_level,
            "model": self.model,
        }


@dataclass
class SessionContext:
    """The model context at a leaf, without source mapping."""

    messages: list[dict[str, Any]]
    thinking_level: str
    model: dict[str, Any] | None

    def to_json(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "thinkingLevel": self.thinking_level,
            "model": self.model,
        }


# ---------------------------------------------------------------------------------------------
# Path


def build_entry_index(entries: Sequence[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    """Id → entry; a later entry with the same id replaces an earlier one."""
    index: dict[Any, dict[str, Any]] = {}
    for entry in entries:
        key = entry.get("id")
        try:
            index[key] = entry
        except TypeError:  # an unhashable id can never be looked up by a parentId string
            continue
    return index


def _lookup(index: Mapping[Any, dict[str, Any]], key: Any) -> dict[str, Any] | None:
    try:
        return index.get(key)
    except TypeError:
        return None


def build_session_path(
    entries: Sequence[dict[str, Any]],
    leaf_id: Any = UNSET,
    by_id: Mapping[Any, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Entries from the root down to the leaf, root first (SPEC 4.1).

    An explicit `None` leaf gives an empty path; an omitted, empty or unknown leaf falls back
    to the last entry. A parentId cycle ends the walk at the first repeated entry.
    """
    if leaf_id is None:
        return []
    index = build_entry_index(entries) if by_id is None else by_id
    leaf = _lookup(index, leaf_id) if (leaf_id is not UNSET and truthy(leaf_id)) else None
    if leaf is None:
        if not entries:
            return []
        leaf = entries[-1]
    path: list[dict[str, Any]] = []
    seen: set[int] = set()
    current: dict[str, Any] | None = leaf
    while current is not None:
        marker = id(current)
        if marker in seen:
            break
        seen.add(marker)
        path.append(current)
        parent_id = current.get("parentId")
        current = _lookup(index, parent_id) if truthy(parent_id) else None
    path.reverse()
    return path


def find_path_cycle(
    entries: Sequence[dict[str, Any]],
    leaf_id: Any = UNSET,
    by_id: Mapping[Any, dict[str, Any]] | None = None,
) -> list[Any]:
    """Ids of the parentId cycle the walk from the leaf runs into ([] when there is none)."""
    if leaf_id is None:
        return []
    index = build_entry_index(entries) if by_id is None else by_id
    leaf = _lookup(index, leaf_id) if (leaf_id is not UNSET and truthy(leaf_id)) else None
    if leaf is None:
        if not entries:
            return []
        leaf = entries[-1]
    order: list[dict[str, Any]] = []
    position: dict[int, int] = {}
    current: dict[str, Any] | None = leaf
    while current is not None:
        marker = id(current)
        if marker in position:
            return [entry.get("id") for entry in order[position[marker] :]]
        position[marker] = len(order)
        order.append(current)
        parent_id = current.get("parentId")
        current = _lookup(index, parent_id) if truthy(parent_id) else None
    return []


# ---------------------------------------------------------------------------------------------
# Settings and compaction folding


def restore_settings(path: Sequence[dict[str, Any]]) -> tuple[Any, dict[str, Any] | None]:
    """(thinking level, model) after replaying the whole path, last write wins (SPEC 4.2)."""
    thinking_level: Any = "off"
    model: dict[str, Any] | None = None
    for entry in path:
        kind = entry.get("type")
        if kind == "message":
            message = entry.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                model = _model(message, "provider", "model")
        elif kind == "thinking_level_change":
            thinking_level = entry.get("thinkingLevel")
        elif kind == "model_change":
            model = _model(entry, "provider", "modelId")
    return thinking_level, model


def _model(source: dict[str, Any], provider_key: str, model_key: str) -> dict[str, Any]:
    # An absent field stays absent (the agent's undefined), so it is not written as null.
    model: dict[str, Any] = {}
    if provider_key in source:
        model["provider"] = source[provider_key]
    if model_key in source:
        model["modelId"] = source[model_key]
    return model


def get_latest_compaction_entry(entries: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The last `compaction` entry of a list, or None."""
    for i in range(len(entries) - 1, -1, -1):
        if entries[i].get("type") == "compaction":
            return entries[i]
    return None


def _is_system_message_entry(entry: dict[str, Any]) -> bool:
    if entry.get("type") != "message":
        return False
    message = entry.get("message")
    return isinstance(message, dict) and message.get("role") == "system"


def context_entries_from_path(path: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The path after folding its latest compaction (SPEC 4.3).

    The compaction comes first, then the entries from `firstKeptEntryId` up to the compaction
    (system messages there are superseded by the compaction's checkpoint), then everything
    after it.
    """
    compaction = get_latest_compaction_entry(path)
    if compaction is None:
        return list(path)
    compaction_id = compaction.get("id", _MISSING)
    position = -1
    for i, entry in enumerate(path):
        if entry.get("id", _MISSING) == compaction_id:
            position = i
            break
    if position < 0:
        return list(path)
    first_kept = compaction.get("firstKeptEntryId", _MISSING)
    result = [compaction]
    found = False
    for i in range(position):
        entry = path[i]
        if not found and entry.get("id", _MISSING) == first_kept:
            found = True
        if found and not _is_system_message_entry(entry):
            result.append(entry)
    result.extend(path[position + 1 :])
    return result


def build_context_entries(
    entries: Sequence[dict[str, Any]],
    leaf_id: Any = UNSET,
    by_id: Mapping[Any, dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Context entries of the path to the leaf (SPEC 4.3)."""
    return context_entries_from_path(build_session_path(entries, leaf_id, by_id))


# ---------------------------------------------------------------------------------------------
# Projection


def _edit_map(context_entries: Sequence[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    edits: dict[Any, dict[str, Any]] = {}
    for entry in context_entries:
        if entry.get("type") == "context_edit":
            try:
                edits[entry.get("targetId")] = entry
            except TypeError:
                continue
    return edits


def _apply_edit(messages: list[dict[str, Any]], edit: dict[str, Any]) -> list[dict[str, Any]]:
    """Messages of an edited entry: omitted (null replacement) or with content replaced.

    A replacement that is not an object, or an object without `content`, or a missing
    `replacement` key, leaves the editable messages without content (the key is absent).
    """
    replacement = edit.get("replacement", UNSET)
    if replacement is None:
        return []
    has_content = isinstance(replacement, dict) and "content" in replacement
    content = replacement["content"] if has_content else None
    result: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role") if isinstance(message, dict) else None
        if role not in EDITABLE_ROLES:
            result.append(message)
            continue
        copy = dict(message)
        if has_content:
            if role in ("assistant", "toolResult") and isinstance(content, str):
                copy["content"] = [{"type": "text", "text": content}]
            else:
                copy["content"] = content
        else:
            copy.pop("content", None)
        result.append(copy)
    return result


def projection_from_path(path: Sequence[dict[str, Any]]) -> SessionProjection:
    """The projection of one root→leaf path (SPEC 4.4)."""
    thinking_level, model = restore_settings(path)
    context_entries = context_entries_from_path(path)
    edits = _edit_map(context_entries)
    projected: list[ProjectedEntry] = []
    messages: list[dict[str, Any]] = []
    for index, entry in enumerate(context_entries):
        if index > 0 and entry.get("type") == "compaction":
            # Only the newest compaction (always first) contributes checkpoint and summary.
            entry_messages: list[dict[str, Any]] = []
        else:
            entry_messages = session_entry_to_context_messages(entry)
            if edits:
                edit = _lookup(edits, entry.get("id"))
                if edit is not None:
                    entry_messages = _apply_edit(entry_messages, edit)
        projected.append(ProjectedEntry(entry, entry_messages))
        messages.extend(entry_messages)
    return SessionProjection(projected, messages, thinking_level, model)


def build_session_projection(
    entries: Sequence[dict[str, Any]],
    leaf_id: Any = UNSET,
    by_id: Mapping[Any, dict[str, Any]] | None = None,
) -> SessionProjection:
    """The projection at the leaf (SPEC 4.4)."""
    return projection_from_path(build_session_path(entries, leaf_id, by_id))


def context_from_path(path: Sequence[dict[str, Any]]) -> SessionContext:
    """Messages and settings of one root→leaf path (SPEC 4.5)."""
    projection = projection_from_path(path)
    return SessionContext(projection.messages, projection.thinking_level, projection.model)


def build_session_context(
    entries: Sequence[dict[str, Any]],
    leaf_id: Any = UNSET,
    by_id: Mapping[Any, dict[str, Any]] | None = None,
) -> SessionContext:
    """Messages and settings at the leaf (SPEC 4.5)."""
    return context_from_path(build_session_path(entries, leaf_id, by_id))


# ---------------------------------------------------------------------------------------------
# Diagnostics


def projection_diagnostics(path: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Problems the agent absorbs silently (or fails on) in the projection of one path.

    Each item is `{"severity", "code", "message", "entry_id", "target_id"?}`; nothing here
    changes the projection. See `_diagnostics` for the codes.
    """
    return []
