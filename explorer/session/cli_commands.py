"""What each command line command computes, as plain JSON-ready records.

The records use Pi's camelCase keys because other tools consume the `--json` output; the human
output is rendered from the same records, so both views always agree.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from .cli_load import CliError, Inspected
from .cli_render import node_children, node_entry, node_label
from .errors import SessionError
from .jsonfmt import dumps, hashable

__all__ = [
    "all_leaf_ids",
    "branch_summary_record",
    "compact_record",
    "context_record",
    "entries_records",
    "resolve_leaves",
    "tree_json",
]


def entries_records(inspected: Inspected) -> list[dict[str, Any]]:
    """`{"id", "parentId", "type"}` of every entry after migration, in file order."""
    return [
        {"id": e.get("id"), "parentId": e.get("parentId"), "type": e.get("type")}
        for e in inspected.manager.get_entries()
    ]


def tree_json(roots: Sequence[Any]) -> dict[str, Any]:
    """`{"roots": [...]}` with nodes `{"id", "type", "label"?, "children"}`, built iteratively.

    Child order is the manager's (SPEC 3.9). A node reachable from itself (possible only with
    duplicate ids) is written once more without its children instead of looping.
    """

    def shell(node: Any) -> dict[str, Any]:
        entry = node_entry(node)
        out: dict[str, Any] = {"id": entry.get("id"), "type": entry.get("type")}
        label = node_label(node)
        if label is not None:
            out["label"] = label
        out["children"] = []
        return out

    result: list[dict[str, Any]] = []
    # Frames: (node, its JSON dict, iterator over its children); `active` guards cycles.
    stack: list[tuple[Any, dict[str, Any], Iterator[Any]]] = []
    active: set[int] = set()
    for root in roots:
        out = shell(root)
        result.append(out)
        stack.append((root, out, iter(node_children(root))))
        active.add(id(root))
        while stack:
            node, out, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                active.discard(id(node))
                continue
            child_out = shell(child)
            out["children"].append(child_out)
            if id(child) in active:
                continue
            stack.append((child, child_out, iter(node_children(child))))
            active.add(id(child))
    return {"roots": result}


def all_leaf_ids(entries: Sequence[dict[str, Any]]) -> list[Any]:
    """Ids of the entries without children, in file order (each id once).

    An entry without an id cannot be a leaf (nothing can select it). An id that is not a
    string (hand-written files) is still listed, so the command reports on it, even when the
    manager cannot select it.
    """
    known: set[Any] = set()
    for entry in entries:
        entry_id = entry.get("id")
        if entry_id is not None and hashable(entry_id):
            known.add(entry_id)
    parents: set[Any] = set()
    for entry in entries:
        parent = entry.get("parentId")
        if (
            parent is not None
            and hashable(parent)
            and parent in known
            and parent != entry.get("id")
        ):
            parents.add(parent)
    leaves: list[Any] = []
    seen: set[Any] = set()
    unhashable_seen: list[Any] = []
    for entry in entries:
        entry_id = entry.get("id")
        if entry_id is None:
            continue
        if not hashable(entry_id):
            if entry_id not in unhashable_seen:
                unhashable_seen.append(entry_id)
                leaves.append(entry_id)
            continue
        if entry_id in parents or entry_id in seen:
            continue
        seen.add(entry_id)
        leaves.append(entry_id)
    return leaves


def resolve_leaves(inspected: Inspected, leaf: str | None, all_leaves: bool) -> list[Any]:
    """The leaves a per-leaf command reports on: one given id, every leaf, or the current one."""
    foreign = inspected.foreign
    if foreign is not None:
        if all_leaves:
            return list(foreign.leaves())
        if leaf is not None:
            if foreign.get(leaf) is None:
                raise CliError(f"Entry {leaf} not found in {inspected.path}")
            return [leaf]
        return [foreign.current_leaf]
    manager = inspected.manager
    if all_leaves:
        return all_leaf_ids(manager.get_entries())
    if leaf is not None:
        if manager.get_entry(leaf) is None:
            raise CliError(f"Entry {leaf} not found in {inspected.path}")
        return [leaf]
    return [manager.get_leaf_id()]


def _move_to(manager: Any, leaf_id: Any) -> None:
    if not hashable(leaf_id):
        raise SessionError(
            f"Entry id {dumps(leaf_id)} is not a string: it cannot be selected as a leaf"
        )
    if leaf_id is None:
        manager.reset_leaf()
    else:
        manager.branch(leaf_id)


def context_record(manager: Any, leaf_id: Any) -> dict[str, Any]:
    """The model context at one leaf: messages, their source entries, settings, tokens."""
    from .tokens import estimate_projected_context_tokens

    _move_to(manager, leaf_id)
    projection = manager.build_session_projection()
    branch = manager.get_branch()
    entry_ids: list[Any] = []
    for projected in projection.entries:
        source_id = projected.source_entry.get("id")
        entry_ids.extend([source_id] * len(projected.messages))
    tokens = estimate_projected_context_tokens(projection, branch)
    return {
        "leafId": leaf_id,
        "messages": projection.messages,
        "entryIds": entry_ids,
        "thinkingLevel": projection.thinking_level,
        "model": projection.model,
        "tokens": tokens,
    }


def _entry_id(entry: Any) -> Any:
    return entry.get("id") if isinstance(entry, dict) else None


def preparation_json(preparation: Any) -> dict[str, Any] | None:
    """The dry-run view of a compaction preparation (SPEC 6.5), Pi's key names."""
    if preparation is None:
        return None
    details = getattr(preparation, "details", None)
    if details is None:
        from .file_ops import compute_file_lists

        read_files, modified_files = compute_file_lists(preparation.file_ops)
        details = {"readFiles": read_files, "modifiedFiles": modified_files}
    return {
        "firstKeptEntryId": preparation.first_kept_entry_id,
        "isSplitTurn": preparation.is_split_turn,
        "turnStartEntryId": preparation.turn_start_entry_id,
        "summarizeEntryIds": list(preparation.summarize_entry_ids),
        "turnPrefixEntryIds": list(preparation.turn_prefix_entry_ids),
        "tokensBefore": preparation.tokens_before,
        "details": details,
    }


def compact_record(
    manager: Any,
    leaf_id: Any,
    keep_recent: int,
    reserve: int,
    request_options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """What compacting at one leaf would summarize and keep; writes nothing.

    With `request_options` (keyword arguments of `compaction_request_preview`: `model`,
    `custom_instructions`, `thinking_level`, `pi_version`) the record also holds `requests`,
    exactly what would be sent to the summarizer - nothing is called.
    """
    from .compaction import prepare_compaction
    from .tokens import CompactionSettings

    _move_to(manager, leaf_id)
    settings = CompactionSettings(
        enabled=True, reserve_tokens=reserve, keep_recent_tokens=keep_recent
    )
    path = manager.get_branch()
    preparation = prepare_compaction(path, settings)
    record = {"leafId": leaf_id, "preparation": preparation_json(preparation)}
    if request_options is not None:
        from .request_preview import compaction_request_preview

        preview = compaction_request_preview(path, settings, **request_options)
        record["requests"] = preview["requests"] if preview is not None else []
    return record


def branch_summary_record(
    manager: Any, from_id: Any, target_id: Any, request_options: dict[str, Any]
) -> dict[str, Any]:
    """What navigating from one entry to another with a summary would send; calls nothing."""
    from .branch_summary import unusable_target
    from .request_preview import branch_summary_request_preview

    for entry_id in (from_id, target_id):
        if not hashable(entry_id) or manager.get_entry(entry_id) is None:
            raise SessionError(f"Entry {entry_id} not found")
    refused = unusable_target(manager.get_entry(target_id))
    if refused:  # no request: navigating there fails before any summary is stored
        raise SessionError(f"Entry {target_id} {refused}")
    return branch_summary_request_preview(manager, from_id, target_id, **request_options)
