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

import bisect
import contextlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .gcpause import gc_paused
from .jsonfmt import truthy
from .messages import (
    EDITABLE_ROLES,
    get_current_system_message,
    session_entry_to_context_messages,
)
from .sentinel import UNSET
from .tokens import (
    estimate_context_tokens,
    estimate_every_message,
    estimate_projected_context,
    estimate_tokens,
    get_assistant_usage,
    message_problems,
)

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
    "ProjectedEstimates",
    "context_entries_from_path",
    "context_from_path",
    "find_path_cycle",
    "get_latest_compaction_entry",
    "projection_diagnostics",
    "projection_from_path",
    "restore_settings",
]

_V = TypeVar("_V")


@dataclass(slots=True)
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
    try:
        return {entry.get("id"): entry for entry in entries}
    except TypeError:  # an unhashable id somewhere: skip those, it can never be looked up
        index: dict[Any, dict[str, Any]] = {}
        for entry in entries:
            with contextlib.suppress(TypeError):
                index[entry.get("id")] = entry
        return index


def _lookup(index: Mapping[Any, _V], key: Any) -> _V | None:
    try:
        return index.get(key)
    except TypeError:
        return None


def _walk_up(leaf: dict[str, Any], index: Mapping[Any, dict[str, Any]]) -> list[dict[str, Any]]:
    """Leaf-first walk along parentId links; stops at a falsy or unknown parent or a cycle.

    Without a cycle a walk visits at most every indexed entry once (plus the leaf, which may be
    unindexed), so the cheap loop runs under that bound and only a longer walk pays for
    cycle detection.
    """
    path: list[dict[str, Any]] = []
    append = path.append
    budget = len(index) + 1
    current: dict[str, Any] | None = leaf
    while current is not None and budget:
        budget -= 1
        append(current)
        parent_id = current.get("parentId")
        if type(parent_id) is str:  # the common case, without the general truthiness test
            current = index.get(parent_id) if parent_id else None
        else:
            current = _lookup(index, parent_id) if truthy(parent_id) else None
    if current is None:
        return path
    # A cycle: walk again, stopping at the first entry seen twice.
    path = []
    seen: set[int] = set()
    current = leaf
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        path.append(current)
        parent_id = current.get("parentId")
        current = _lookup(index, parent_id) if truthy(parent_id) else None
    return path


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
    path = _walk_up(leaf, index)
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
    """(thinking level, model) after replaying the whole path, last write wins (SPEC 4.2).

    Scanned from the leaf backwards: the last write of each setting is the first one met, so
    the scan stops as soon as both are known.
    """
    thinking_level: Any = _MISSING
    model: dict[str, Any] | None = None
    for i in range(len(path) - 1, -1, -1):
        entry = path[i]
        kind = entry.get("type")
        if kind == "message":
            if model is None:
                message = entry.get("message")
                if type(message) is dict and message.get("role") == "assistant":
                    model = _model(message, "provider", "model")
        elif kind == "thinking_level_change":
            if thinking_level is _MISSING:
                thinking_level = entry.get("thinkingLevel")
        elif kind == "model_change" and model is None:
            model = _model(entry, "provider", "modelId")
        if model is not None and thinking_level is not _MISSING:
            break
    return ("off" if thinking_level is _MISSING else thinking_level), model


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
    with gc_paused():
        return _project(path)


def _project(path: Sequence[dict[str, Any]]) -> SessionProjection:
    thinking_level, model = restore_settings(path)
    context_entries = context_entries_from_path(path)
    edits = _edit_map(context_entries)
    projected: list[ProjectedEntry] = []
    messages: list[dict[str, Any]] = []
    add_entry = projected.append
    add_message = messages.append
    for index, entry in enumerate(context_entries):
        if not edits and entry.get("type") == "message":
            message = entry.get("message")
            # Fast path for the common case; repairs and odd values take the general route.
            if type(message) is dict and message.get("content") is not None:
                add_entry(ProjectedEntry(entry, [message]))
                add_message(message)
                continue
        entry_messages = _entry_messages(entry, index, edits)
        add_entry(ProjectedEntry(entry, entry_messages))
        messages.extend(entry_messages)
    return SessionProjection(projected, messages, thinking_level, model)


def _context(path: Sequence[dict[str, Any]]) -> SessionContext:
    # The projection without its per-entry records: what opening a session needs.
    thinking_level, model = restore_settings(path)
    context_entries = context_entries_from_path(path)
    edits = _edit_map(context_entries)
    messages: list[dict[str, Any]] = []
    add_message = messages.append
    for index, entry in enumerate(context_entries):
        kind = entry.get("type")
        if kind == "message" and not edits:
            message = entry.get("message")
            if type(message) is dict and message.get("content") is not None:
                add_message(message)
                continue
        elif type(kind) is str and kind in _SILENT_TYPES:
            continue
        messages.extend(_entry_messages(entry, index, edits))
    return SessionContext(messages, thinking_level, model)


def _entry_messages(
    entry: dict[str, Any], index: int, edits: dict[Any, dict[str, Any]]
) -> list[dict[str, Any]]:
    """Messages of one context entry at `index`, after its latest edit."""
    kind = entry.get("type")
    if kind == "compaction" and index > 0:
        # Only the newest compaction (always first) contributes checkpoint and summary.
        return []
    silent = type(kind) is str and kind in _SILENT_TYPES
    messages = [] if silent else session_entry_to_context_messages(entry)
    if edits:
        edit = _lookup(edits, entry.get("id"))
        if edit is not None:
            messages = _apply_edit(messages, edit)
    return messages


# Entry types that never contribute a message (anything unknown contributes none either).
_SILENT_TYPES = frozenset(
    (
        "context_edit",
        "model_change",
        "thinking_level_change",
        "label",
        "custom",
        "session_info",
        "usage",
    )
)


def build_session_projection(
    entries: Sequence[dict[str, Any]],
    leaf_id: Any = UNSET,
    by_id: Mapping[Any, dict[str, Any]] | None = None,
) -> SessionProjection:
    """The projection at the leaf (SPEC 4.4)."""
    return projection_from_path(build_session_path(entries, leaf_id, by_id))


def context_from_path(path: Sequence[dict[str, Any]]) -> SessionContext:
    """Messages and settings of one root→leaf path (SPEC 4.5)."""
    with gc_paused():
        return _context(path)


def build_session_context(
    entries: Sequence[dict[str, Any]],
    leaf_id: Any = UNSET,
    by_id: Mapping[Any, dict[str, Any]] | None = None,
) -> SessionContext:
    """Messages and settings at the leaf (SPEC 4.5)."""
    return context_from_path(build_session_path(entries, leaf_id, by_id))


# ---------------------------------------------------------------------------------------------
# Running estimate along a path


@dataclass(slots=True)
class _Record:
    """One context entry's share of the running estimate."""

    messages: list[Any]
    tokens: float  # estimated tokens of its non-system messages (NaN ones left out)
    nans: int  # how many of those estimates are NaN
    usage: int  # index in `messages` of the last one with valid usage, or -1
    system: bool  # whether it contributes a system message


_NO_SHARE = _Record([], 0, 0, -1, False)  # the share of an entry not counted yet (never changed)


class ProjectedEstimates:
    """The projected-context estimate at every entry of a path, in one walk along it.

    `tokens()` after feeding `path[:i + 1]` equals
    ``estimate_projected_context(projection_from_path(path[:i + 1]), path[:i + 1]).tokens``
    (NaN included); the point is to get that for every turn of a long route without
    projecting each prefix again, and to go on from where a shorter route stopped when the
    route has grown (sessions only grow, so the figures of the earlier entries stay right).

    Within a compaction segment the context only grows, except that a context edit changes
    the messages of its target: each context entry keeps its own share (token sum, NaN
    count, last valid usage, system flag), so an edit re-counts one entry and a compaction
    starts a new segment from its kept range. This relies on ids being unique strings
    (what the agent writes); a path breaking that is estimated per prefix by the engine
    itself from then on, so the answer is the engine's either way.
    """

    def __init__(self) -> None:
        self._path: list[dict[str, Any]] = []
        self._first: dict[str, int] = {}  # id -> index on the path
        self._exact = False  # ids not unique strings: answer per prefix
        self._invalidating = -1  # index of the newest context edit or compaction
        self._entries: list[dict[str, Any]] = []  # the context entries (SPEC 4.3)
        self._records: list[_Record] = []
        self._where: dict[str, int] = {}  # id -> index in `_entries`
        self._edits: dict[Any, dict[str, Any]] = {}
        self._usage: list[int] = []  # sorted indices of records with valid usage
        self._systems: set[int] = set()
        self._tokens: float = 0
        self._nans = 0

    def __len__(self) -> int:
        return len(self._path)

    @property
    def exact(self) -> bool:
        """True once the path broke the unique-id rule: `tokens()` then projects the whole
        prefix each time, so a caller wanting many figures should ask `tokens_at` for the
        few it shows."""
        return self._exact

    def tokens_at(self, index: int) -> float:
        """The engine's estimate of the prefix ending at ``index`` of the path fed so far,
        projected afresh (the cost of the prefix, whatever came before)."""
        prefix = self._path[: index + 1]
        return estimate_projected_context(projection_from_path(prefix), prefix).tokens

    def feed(self, entry: dict[str, Any]) -> None:
        """Extend the path by one entry (the child of the previous one)."""
        i = len(self._path)
        self._path.append(entry)
        if self._exact:
            return
        entry_id = entry.get("id")
        if type(entry_id) is not str or entry_id in self._first:
            self._exact = True
            return
        self._first[entry_id] = i
        kind = entry.get("type")
        if kind in ("context_edit", "compaction"):
            self._invalidating = i
        if kind == "compaction":
            self._start_segment(entry, i)
            return
        self._add(entry)
        if kind == "context_edit":
            target = entry.get("targetId")
            try:
                self._edits[target] = entry
                at = self._where.get(target) if type(target) is str else None
            except TypeError:
                return
            if at is not None:
                self._recount(at)

    def tokens(self) -> float:
        """The projected-context estimate of the path fed so far (NaN possible)."""
        if self._exact:
            return self.tokens_at(len(self._path) - 1)
        if self._usage:
            k = self._usage[-1]
            entry_id = self._entries[k].get("id")
            usage_index = self._first[entry_id] if type(entry_id) is str and entry_id else -1
            if usage_index > self._invalidating:
                record = self._records[k]
                tail = record.messages[record.usage :]
                for later in self._records[k + 1 :]:
                    tail.extend(later.messages)
                return estimate_context_tokens(tail).tokens
        return self.estimate()

    def estimate(self) -> float:
        """Every message of the path's context estimated, no provider usage trusted
        (``estimate_every_message`` of the projection's messages): the estimate a chart
        can set beside what the provider reported, on one basis before and after edits."""
        if self._exact:
            return self.estimate_at(len(self._path) - 1)
        system = get_current_system_message(
            [m for k in sorted(self._systems) for m in self._records[k].messages]
        )
        tokens: float = estimate_tokens(system) if system is not None else 0
        return tokens + (math.nan if self._nans else self._tokens)

    def estimate_at(self, index: int) -> float:
        """:meth:`estimate` of the prefix ending at ``index``, projected afresh."""
        prefix = self._path[: index + 1]
        return estimate_every_message(projection_from_path(prefix).messages).tokens

    def _start_segment(self, compaction: dict[str, Any], i: int) -> None:
        # The fold of context_entries_from_path, with unique ids: the compaction is the
        # newest and at `i`; its kept range starts at the first kept entry when it is before.
        first_kept = compaction.get("firstKeptEntryId", _MISSING)
        start = self._first.get(first_kept) if type(first_kept) is str else None
        kept = []
        if start is not None and start < i:
            kept = [e for e in self._path[start:i] if not _is_system_message_entry(e)]
        self._entries, self._records, self._where = [], [], {}
        self._edits, self._usage, self._systems = {}, [], set()
        self._tokens = self._nans = 0
        context = [compaction, *kept]
        self._edits = _edit_map(context)
        for entry in context:
            self._add(entry)

    def _add(self, entry: dict[str, Any]) -> None:
        k = len(self._entries)
        self._entries.append(entry)
        self._where[entry["id"]] = k
        self._records.append(_NO_SHARE)
        self._recount(k)

    def _recount(self, k: int) -> None:
        old = self._records[k]
        if old is not _NO_SHARE:  # a new entry has no share to take back
            self._tokens -= old.tokens
            self._nans -= old.nans
            if old.usage >= 0:
                self._usage.remove(k)
            self._systems.discard(k)
        messages = _entry_messages(self._entries[k], k, self._edits)
        tokens: float = 0
        nans = 0
        usage = -1
        system = False
        for n, message in enumerate(messages):
            if isinstance(message, dict):
                role = message.get("role")
                if role == "system":
                    system = True
                    continue
            else:
                role = None
            t = estimate_tokens(message)
            if t != t:  # NaN
                nans += 1
            else:
                tokens += t
            # Only an assistant reply carries usage: the check is skipped for the others.
            if role == "assistant" and get_assistant_usage(message) is not None:
                usage = n
        self._records[k] = _Record(messages, tokens, nans, usage, system)
        self._tokens += tokens
        self._nans += nans
        if usage >= 0:
            bisect.insort(self._usage, k)
        if system:
            self._systems.add(k)


# ---------------------------------------------------------------------------------------------
# Diagnostics


def _problem(
    code: str, message: str, entry_id: Any, severity: str = "warning", **extra: Any
) -> dict[str, Any]:
    problem = {"severity": severity, "code": code, "message": message, "entry_id": entry_id}
    problem.update(extra)
    return problem


def _edit_problem(edit: dict[str, Any]) -> tuple[str, str] | None:
    if "replacement" not in edit:
        return "edit_without_replacement", "context edit has no replacement key"
    replacement = edit["replacement"]
    if replacement is None:
        return None
    if not isinstance(replacement, dict):
        return (
            "edit_replacement_not_object",
            "context edit replacement is neither null nor an object",
        )
    if "content" not in replacement:
        return "edit_replacement_without_content", "context edit replacement has no content"
    if not isinstance(replacement["content"], (str, list)):
        return "edit_content_not_text", "context edit content is neither a string nor a block list"
    return None


def projection_diagnostics(path: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Problems the agent absorbs silently (or fails on) in the projection of one path.

    Nothing reported here changes the projection; the point is to show what the agent would
    have done without a word. Each item is a dict with `severity` ("error" or "warning"),
    `code`, `message` and `entry_id`, plus `target_id` / `edit_id` / `section` / `cycle` /
    `entry_ids` where useful. Codes:

    - `parent_cycle` (error): the walk to this leaf ran into a parentId cycle;
    - `first_kept_not_found`: the latest compaction keeps nothing although it names an entry;
    - `edit_without_replacement`, `edit_replacement_not_object`,
      `edit_replacement_without_content`, `edit_content_not_text`: malformed context edits;
    - `edit_folded`, `edit_superseded`, `edit_target_off_path`, `edit_target_folded`,
      `edit_target_not_editable`: context edits that have no effect here;
    - `malformed_message`: a projected message the agent's estimator or summary serializer
      would fail on (with `edit_id` when an edit produced it); `message_missing`;
    - `checkpoint_without_content`: a compaction's systemMessage without usable content;
    - `section_not_text`: a system section value that turns token estimates into NaN;
    - `system_without_timestamp`: system messages replay to nothing (no timestamp, no tool);
    - `orphan_tool_result`: a tool result whose call is not in the projected context.
    """
    problems: list[dict[str, Any]] = []
    if not path:
        return problems
    ids_on_path: dict[Any, int] = {}
    for position, entry in enumerate(path):
        try:
            ids_on_path.setdefault(entry.get("id"), position)
        except TypeError:
            continue
    root_parent = path[0].get("parentId")
    if truthy(root_parent) and _lookup(ids_on_path, root_parent) is not None:
        cycle = [entry.get("id") for entry in path[_lookup(ids_on_path, root_parent) :]]
        problems.append(
            _problem(
                "parent_cycle",
                "parentId links form a cycle; the path stops where it repeats",
                path[0].get("id"),
                severity="error",
                cycle=cycle,
            )
        )

    context_entries = context_entries_from_path(path)
    context_positions: dict[int, int] = {id(entry): i for i, entry in enumerate(context_entries)}
    edits = _edit_map(context_entries)
    latest = get_latest_compaction_entry(path)
    if latest is not None:
        latest_id = latest.get("id", _MISSING)
        first_kept = latest.get("firstKeptEntryId", _MISSING)
        found = False
        for entry in path:
            if entry.get("id", _MISSING) == latest_id:
                break
            if entry.get("id", _MISSING) == first_kept:
                found = True
                break
        if not found and first_kept != latest_id:
            problems.append(
                _problem(
                    "first_kept_not_found",
                    "the compaction's firstKeptEntryId is not before it on this path; "
                    "nothing before it is kept",
                    latest.get("id"),
                    target_id=None if first_kept is _MISSING else first_kept,
                )
            )

    # Context edits: malformed ones, and ones that have no effect.
    for entry in path:
        if entry.get("type") != "context_edit":
            continue
        edit_id = entry.get("id")
        target_id = entry.get("targetId")
        malformed = _edit_problem(entry)
        if malformed is not None:
            problems.append(_problem(malformed[0], malformed[1], edit_id, target_id=target_id))
        if id(entry) not in context_positions:
            problems.append(
                _problem(
                    "edit_folded",
                    "context edit was folded away by a compaction; it no longer applies",
                    edit_id,
                    target_id=target_id,
                )
            )
            continue
        if _lookup(edits, target_id) is not entry:
            problems.append(
                _problem(
                    "edit_superseded",
                    "a later context edit of the same target wins",
                    edit_id,
                    target_id=target_id,
                )
            )
            continue
        target_position = _lookup(ids_on_path, target_id)
        if target_position is None:
            problems.append(
                _problem(
                    "edit_target_off_path",
                    "context edit targets an entry that is not on this path",
                    edit_id,
                    target_id=target_id,
                )
            )
            continue
        target = path[target_position]
        if id(target) not in context_positions:
            problems.append(
                _problem(
                    "edit_target_folded",
                    "context edit targets an entry folded away by compaction",
                    edit_id,
                    target_id=target_id,
                )
            )
            continue
        if entry.get("replacement", UNSET) is not None:
            originals = session_entry_to_context_messages(target)
            if not any(isinstance(m, dict) and m.get("role") in EDITABLE_ROLES for m in originals):
                problems.append(
                    _problem(
                        "edit_target_not_editable",
                        "context edit replaces an entry whose messages have no editable role; it has no effect",
                        edit_id,
                        target_id=target_id,
                    )
                )

    projection = projection_from_path(path)
    call_ids: set[Any] = set()
    system_entries: list[Any] = []
    for item in projection.entries:
        source = item.source_entry
        source_id = source.get("id")
        if source.get("type") == "message" and not isinstance(source.get("message"), dict):
            problems.append(
                _problem("message_missing", "message entry without a message object", source_id)
            )
        edit = _lookup(edits, source_id) if edits else None
        for message in item.messages:
            if not isinstance(message, dict):
                problems.append(
                    _problem("malformed_message", "projected message is not an object", source_id)
                )
                continue
            role = message.get("role")
            if role == "system":
                system_entries.append(source_id)
                if source.get("type") == "compaction" and not isinstance(
                    message.get("content"), (str, list)
                ):
                    problems.append(
                        _problem(
                            "checkpoint_without_content",
                            "compaction systemMessage has no usable content",
                            source_id,
                        )
                    )
                sections = message.get("sections")
                if isinstance(sections, dict):
                    for name, value in sections.items():
                        if truthy(value) and not isinstance(value, (str, list)):
                            problems.append(
                                _problem(
                                    "section_not_text",
                                    "section value without a length makes token estimates NaN",
                                    source_id,
                                    section=name,
                                )
                            )
            for detail in message_problems(message):
                extra: dict[str, Any] = {"edit_id": edit.get("id")} if edit is not None else {}
                problems.append(
                    _problem("malformed_message", f"{role} message: {detail}", source_id, **extra)
                )
            if role == "assistant" and isinstance(message.get("content"), list):
                for block in message["content"]:
                    if isinstance(block, dict) and block.get("type") == "toolCall":
                        with contextlib.suppress(TypeError):
                            call_ids.add(block.get("id"))
            elif role == "toolResult":
                try:
                    known = message.get("toolCallId") in call_ids
                except TypeError:
                    known = False
                if not known:
                    problems.append(
                        _problem(
                            "orphan_tool_result",
                            "tool result whose call is not in the projected context",
                            source_id,
                            target_id=message.get("toolCallId"),
                        )
                    )
    if system_entries and get_current_system_message(projection.messages) is None:
        problems.append(
            _problem(
                "system_without_timestamp",
                "system messages without a timestamp and no tool declared: "
                "the replayed system state is empty",
                system_entries[0],
                entry_ids=system_entries,
            )
        )
    return problems
