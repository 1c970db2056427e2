"""What a summarizer would be sent, without sending it (compaction and branch-summary previews).

A summary replaces history the model will never see again, so a reviewer should be able to read
exactly what the summarizing model reads before anything is called: the system prompt, the
prompt text (the serialized conversation with its wrappers and instructions) and the request
options (reasoning, cache retention, routing id, an output cap when one is set). These
functions build the very requests `compact` and `generate_branch_summary` send - they share the
builders - and return them as JSON-ready dicts; `format_request_preview` renders one as text.
Nothing here calls a model or writes a file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .branch_summary import (
    DEFAULT_BRANCH_RESERVE_TOKENS,
    branch_summary_request,
    collect_entries_for_branch_summary,
)
from .compaction import compaction_requests, prepare_compaction
from .file_ops import compute_file_lists
from .pi_version import PI_DEFAULT, check_pi_version
from .serialize import tolerant_content_text
from .tokens import DEFAULT_COMPACTION_SETTINGS

__all__ = [
    "branch_entries_request_preview",
    "branch_summary_request_preview",
    "compaction_request_preview",
    "format_request_preview",
]


def compaction_request_preview(
    path_entries: Sequence[dict[str, Any]],
    settings: Any = DEFAULT_COMPACTION_SETTINGS,
    *,
    model: Any = None,
    custom_instructions: str | None = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
    clock: Callable[[], float] | None = None,
    pi_version: str = PI_DEFAULT,
) -> dict[str, Any] | None:
    """The requests compacting this root→leaf path would send, or None when nothing would be.

    Keys: `kind` (`compaction`), `piVersion`, `firstKeptEntryId`, `isSplitTurn`,
    `tokensBefore`, `previousSummary` (None without an earlier compaction),
    `summarizeEntryIds`, `turnPrefixEntryIds`, `readFiles`, `modifiedFiles` (what the stored
    summary will list) and `requests` (each `SummaryRequest.to_json()`: `kind`, `label`,
    `systemPrompt`, `messages`, `options`).
    """
    check_pi_version(pi_version)
    preparation = prepare_compaction(path_entries, settings)
    if preparation is None:
        return None
    requests = compaction_requests(
        preparation,
        model=model,
        custom_instructions=custom_instructions,
        thinking_level=thinking_level,
        session_id=session_id,
        clock=clock,
        pi_version=pi_version,
    )
    read_files, modified_files = compute_file_lists(preparation.file_ops)
    return {
        "kind": "compaction",
        "piVersion": pi_version,
        "firstKeptEntryId": preparation.first_kept_entry_id,
        "isSplitTurn": preparation.is_split_turn,
        "tokensBefore": preparation.tokens_before,
        "previousSummary": preparation.previous_summary,
        "summarizeEntryIds": list(preparation.summarize_entry_ids),
        "turnPrefixEntryIds": list(preparation.turn_prefix_entry_ids),
        "readFiles": read_files,
        "modifiedFiles": modified_files,
        "requests": [request.to_json() for request in requests],
    }


def branch_summary_request_preview(
    manager: Any,
    from_leaf_id: Any,
    target_id: Any,
    *,
    model: Any = None,
    reserve_tokens: float = DEFAULT_BRANCH_RESERVE_TOKENS,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    thinking_level: str | None = None,
    clock: Callable[[], float] | None = None,
    pi_version: str = PI_DEFAULT,
) -> dict[str, Any]:
    """What navigating from `from_leaf_id` to `target_id` with a summary would send.

    Keys: `kind` (`branch_summary`), `piVersion`, `fromId`, `targetId`, `commonAncestorId`,
    `entryIds` (the abandoned entries, oldest first), `summarizedMessages` (how many messages
    fit the budget after context edits), `readFiles`, `modifiedFiles`, and `requests` - empty
    when there is nothing to summarize, in which case `summary` is the fixed text that would
    be stored instead.
    """
    collected = collect_entries_for_branch_summary(manager, from_leaf_id, target_id)
    out: dict[str, Any] = {
        "kind": "branch_summary",
        "piVersion": pi_version,
        "fromId": from_leaf_id,
        "targetId": target_id,
        "commonAncestorId": collected.common_ancestor_id,
    }
    out.update(
        branch_entries_request_preview(
            collected.entries,
            model=model,
            reserve_tokens=reserve_tokens,
            custom_instructions=custom_instructions,
            replace_instructions=replace_instructions,
            thinking_level=thinking_level,
            clock=clock,
            pi_version=pi_version,
        )
    )
    return out


def branch_entries_request_preview(
    entries: Sequence[dict[str, Any]],
    *,
    model: Any = None,
    reserve_tokens: float = DEFAULT_BRANCH_RESERVE_TOKENS,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    thinking_level: str | None = None,
    clock: Callable[[], float] | None = None,
    pi_version: str = PI_DEFAULT,
) -> dict[str, Any]:
    """Like `branch_summary_request_preview`, for abandoned entries the caller collected itself.

    For callers that already hold the entries they would pass to `generate_branch_summary`
    (for example a store that is not a `SessionManager`). Keys: `entryIds`,
    `summarizedMessages`, `readFiles`, `modifiedFiles`, `requests` and, when nothing would be
    sent, `summary`.
    """
    check_pi_version(pi_version)
    request, prepared = branch_summary_request(
        entries,
        model=model,
        reserve_tokens=reserve_tokens,
        custom_instructions=custom_instructions,
        replace_instructions=replace_instructions,
        thinking_level=thinking_level,
        clock=clock,
        pi_version=pi_version,
    )
    read_files, modified_files = compute_file_lists(prepared.file_ops)
    out: dict[str, Any] = {
        "entryIds": [e.get("id") for e in entries],
        "summarizedMessages": len(prepared.messages),
        "readFiles": read_files,
        "modifiedFiles": modified_files,
        "requests": [request.to_json()] if request is not None else [],
    }
    if request is None:
        out["summary"] = "No content to summarize"
    return out


def _options_text(options: dict[str, Any]) -> str:
    from .jsonfmt import dumps

    lines = [f"  {key}: {dumps(value)}" for key, value in options.items()]
    if "maxTokens" not in options:
        lines.append("  (no maxTokens: the provider's output limit for the model applies)")
    return "\n".join(lines)


def format_request_preview(preview: dict[str, Any] | None) -> str:
    """Plain-text rendering of a preview: each request's options, system prompt and prompt."""
    if preview is None:
        return "nothing to compact: no request would be sent\n"
    parts: list[str] = []
    requests = preview.get("requests") or []
    if not requests:
        parts.append(
            f"no request would be sent; the stored summary would be: {preview.get('summary')}"
        )
    for number, request in enumerate(requests, 1):
        title = (
            f"=== request {number} of {len(requests)}: {request['label']} ({request['kind']}) ==="
        )
        prompt = "\n\n".join(
            tolerant_content_text(m.get("content"))
            for m in request["messages"]
            if isinstance(m, dict)
        )
        parts.append(
            f"{title}\n--- options ---\n{_options_text(request['options'])}\n"
            f"--- system prompt ---\n{request['systemPrompt']}\n--- user prompt ---\n{prompt}"
        )
    files = [
        ("read files", preview.get("readFiles")),
        ("modified files", preview.get("modifiedFiles")),
    ]
    listed = [f"{title}: {', '.join(str(f) for f in names)}" for title, names in files if names]
    if listed:
        parts.append("--- appended to the stored summary ---\n" + "\n".join(listed))
    return "\n".join(parts) + "\n"
