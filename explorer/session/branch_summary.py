"""Branch summaries: what to carry back when navigating away from a branch (SPEC 6.15).

When the user moves the leaf to another point of the tree, the entries of the branch being
left are summarized into a `branch_summary` entry placed at the new position, so the model
still knows what was explored. Unlike compaction this reads the abandoned entries themselves
(not the projection of a path) and keeps the newest messages when the branch is larger than the
budget.

Since Pi 1.6.0 the context edits among the abandoned entries apply (the latest edit per target
hides or replaces its message: what the model no longer saw is not summarized either), no
output cap is sent, and the thinking level becomes the reasoning option when the model supports
it. `pi_version="1.0.3"` restores that release's raw reading, 4096 cap and no reasoning.
`branch_summary_request` returns exactly what would be sent, without calling anything.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .compaction import (
    build_summary_request,
    get_summarization_failure,
    response_has_tool_call,
    summary_max_tokens,
    summary_options,
)
from .context import _apply_edit, _edit_map, _lookup
from .errors import SessionError
from .file_ops import (
    FileOps,
    add_details_file_ops,
    compute_file_lists,
    extract_file_ops_from_message,
    format_file_operations,
)
from .jsonfmt import truthy
from .messages import content_text, convert_to_llm, entry_time, session_entry_to_context_messages
from .pi_version import PI_DEFAULT, is_pi_1_0_3
from .prompts import BRANCH_SUMMARY_PREAMBLE, build_branch_prompt
from .serialize import serialize_conversation
from .summarizers import KIND_BRANCH, RetryPolicy, Summarizer, SummaryRequest, complete_summary
from .tokens import estimate_tokens

__all__ = [
    "DEFAULT_BRANCH_RESERVE_TOKENS",
    "DEFAULT_CONTEXT_WINDOW",
    "BranchCollection",
    "BranchPreparation",
    "BranchSummaryResult",
    "NavigationResult",
    "branch_summary_request",
    "collect_entries_for_branch_summary",
    "generate_branch_summary",
    "navigate_tree",
    "prepare_branch_entries",
]

LABEL_BRANCH = "Branch summarization"
DEFAULT_BRANCH_RESERVE_TOKENS = 16384
DEFAULT_CONTEXT_WINDOW = 128000


@dataclass
class BranchCollection:
    entries: list[dict[str, Any]]
    common_ancestor_id: str | None

    def to_json(self) -> dict[str, Any]:
        return {"entries": self.entries, "commonAncestorId": self.common_ancestor_id}


def collect_entries_for_branch_summary(
    manager: Any, old_leaf_id: Any, target_id: Any
) -> BranchCollection:
    """Entries from the old leaf up to (not including) the common ancestor with the target.

    Compactions on the way are not a stopping point: their summaries are part of what the
    abandoned branch knew.
    """
    if not truthy(old_leaf_id):
        return BranchCollection([], None)
    old_ids = {e.get("id") for e in manager.get_branch(old_leaf_id)}
    common: Any = None
    for entry in reversed(manager.get_branch(target_id)):
        if entry.get("id") in old_ids:
            common = entry.get("id")
            break
    collected: list[dict[str, Any]] = []
    seen: set[Any] = set()
    current = old_leaf_id
    while truthy(current) and current != common and current not in seen:
        seen.add(current)
        entry = manager.get_entry(current)
        if entry is None:
            break
        collected.append(entry)
        current = entry.get("parentId")
    collected.reverse()
    return BranchCollection(collected, common)


def _timestamp(entry: Mapping[str, Any]) -> Any:
    return entry_time(entry["timestamp"]) if "timestamp" in entry else entry_time()


def _with(
    message: dict[str, Any], entry: Mapping[str, Any], pairs: Sequence[tuple[str, str]]
) -> dict[str, Any]:
    for key, source in pairs:
        if source in entry:
            message[key] = entry[source]
    message["timestamp"] = _timestamp(entry)
    return message


def _edited(entry: dict[str, Any], edit: dict[str, Any]) -> dict[str, Any] | None:
    """The entry's first model message after its edit (None when the edit hides it)."""
    messages = _apply_edit(session_entry_to_context_messages(entry), edit)
    return messages[0] if messages else None


def _branch_message(
    entry: dict[str, Any], edit: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The message an abandoned entry contributes to a branch summary, if any.

    `edit` is the latest context edit targeting the entry; it only applies to messages and
    custom messages (summaries are not editable content).
    """
    kind = entry.get("type")
    if kind == "message":
        message = entry.get("message")
        if not isinstance(message, dict) or message.get("role") == "toolResult":
            # The call is in the assistant message; the result adds bulk, not intent.
            return None
        return _edited(entry, edit) if edit is not None else message
    if kind == "custom_message":
        if edit is not None:
            return _edited(entry, edit)
        return _with(
            {"role": "custom"},
            entry,
            [
                ("customType", "customType"),
                ("content", "content"),
                ("display", "display"),
                ("details", "details"),
            ],
        )
    if kind == "branch_summary":
        return _with(
            {"role": "branchSummary"}, entry, [("summary", "summary"), ("fromId", "fromId")]
        )
    if kind == "compaction":
        return _with(
            {"role": "compactionSummary"},
            entry,
            [("summary", "summary"), ("tokensBefore", "tokensBefore")],
        )
    return None


@dataclass
class BranchPreparation:
    messages: list[dict[str, Any]]
    file_ops: FileOps
    total_tokens: float


def prepare_branch_entries(
    entries: Sequence[dict[str, Any]], token_budget: float = 0, *, pi_version: str = PI_DEFAULT
) -> BranchPreparation:
    """Messages of the abandoned entries, newest first until the budget is used (SPEC 6.15.2).

    File operations are collected from every entry, even those that no longer fit, and from
    earlier pi-generated branch summaries, so the lists stay cumulative. The latest context
    edit per target among `entries` hides or replaces its message (not with `pi_version="1.0.3"`),
    so hidden messages add neither tokens nor file operations.
    """
    edits = {} if is_pi_1_0_3(pi_version) else _edit_map(entries)
    ops = FileOps()
    for entry in entries:
        if (
            entry.get("type") == "branch_summary"
            and not truthy(entry.get("fromHook"))
            and truthy(entry.get("details"))
        ):
            add_details_file_ops(entry.get("details"), ops)
    messages: list[dict[str, Any]] = []
    total: float = 0
    for entry in reversed(entries):
        edit = _lookup(edits, entry.get("id")) if edits else None
        message = _branch_message(entry, edit)
        if message is None:
            continue
        extract_file_ops_from_message(message, ops)
        tokens = estimate_tokens(message)
        if token_budget > 0 and total + tokens > token_budget:
            # A summary is dense context: squeeze it in if the budget is not nearly used.
            if entry.get("type") in ("compaction", "branch_summary") and total < token_budget * 0.9:
                messages.append(message)
                total += tokens
            break
        messages.append(message)
        total += tokens
    messages.reverse()
    return BranchPreparation(messages, ops, total)


@dataclass
class BranchSummaryResult:
    """Outcome of `generate_branch_summary`: a summary, `aborted`, or an `error` message."""

    summary: str | None = None
    usage: Any = None
    read_files: list[Any] | None = None
    modified_files: list[Any] | None = None
    aborted: bool = False
    error: str | None = None

    @property
    def details(self) -> dict[str, list[Any]]:
        return {
            "readFiles": list(self.read_files or []),
            "modifiedFiles": list(self.modified_files or []),
        }

    def to_json(self) -> dict[str, Any]:
        if self.aborted:
            return {"aborted": True}
        if self.error is not None:
            return {"error": self.error}
        out: dict[str, Any] = {"summary": self.summary}
        if self.read_files is not None:
            out["usage"] = self.usage
            out["readFiles"] = self.read_files
            out["modifiedFiles"] = self.modified_files
        return out


def branch_summary_request(
    entries: Sequence[dict[str, Any]],
    *,
    model: Any = None,
    reserve_tokens: float = DEFAULT_BRANCH_RESERVE_TOKENS,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    thinking_level: str | None = None,
    clock: Callable[[], float] | None = None,
    pi_version: str = PI_DEFAULT,
) -> tuple[SummaryRequest | None, BranchPreparation]:
    """The branch-summary request for abandoned entries, built but not sent, and its preparation.

    The request is None when nothing would be summarized (the result is then the fixed
    `No content to summarize`). For previews and for `generate_branch_summary`, so both agree.
    """
    window = model.get("contextWindow") if isinstance(model, Mapping) else None
    budget = (window if truthy(window) else DEFAULT_CONTEXT_WINDOW) - reserve_tokens  # type: ignore[operator]
    prepared = prepare_branch_entries(entries, budget, pi_version=pi_version)
    if not prepared.messages:
        return None, prepared
    conversation = serialize_conversation(convert_to_llm(prepared.messages), pi_version=pi_version)
    prompt = build_branch_prompt(conversation, custom_instructions, replace_instructions)
    options = summary_options(
        model, thinking_level, None, allow_reasoning=not is_pi_1_0_3(pi_version), clock=clock
    )
    request = build_summary_request(
        prompt,
        summary_max_tokens(KIND_BRANCH, model=model, pi_version=pi_version),
        options,
        model=model,
        kind=KIND_BRANCH,
        clock=clock,
    )
    return request, prepared


def generate_branch_summary(
    entries: Sequence[dict[str, Any]],
    summarizer: Summarizer,
    *,
    model: Any = None,
    reserve_tokens: float = DEFAULT_BRANCH_RESERVE_TOKENS,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    thinking_level: str | None = None,
    signal: threading.Event | None = None,
    clock: Callable[[], float] | None = None,
    retry: RetryPolicy | None = None,
    pi_version: str = PI_DEFAULT,
) -> BranchSummaryResult:
    """Summarize abandoned entries (SPEC 6.15.3). Failures are returned, not raised."""
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
    if request is None:
        return BranchSummaryResult(summary="No content to summarize")
    request.signal = signal
    response = complete_summary(summarizer, request, retry)
    if response.get("stopReason") == "aborted":
        return BranchSummaryResult(aborted=True)
    failure = get_summarization_failure(response, LABEL_BRANCH)
    if failure:
        return BranchSummaryResult(error=failure)
    if response_has_tool_call(response):
        return BranchSummaryResult(error=f"{LABEL_BRANCH} attempted to call a tool")
    read_files, modified_files = compute_file_lists(prepared.file_ops)
    summary = BRANCH_SUMMARY_PREAMBLE + content_text(response.get("content"))
    summary += format_file_operations(read_files, modified_files)
    return BranchSummaryResult(
        summary=summary or "No summary generated",
        usage=response.get("usage"),
        read_files=read_files,
        modified_files=modified_files,
    )


# ---------------------------------------------------------------------------------------------
# Navigation (the agent's orchestration, SPEC 6.15.4)


@dataclass
class NavigationResult:
    """What `navigate_tree` did: the new leaf, editor text, and the summary entry if any."""

    cancelled: bool = False
    new_leaf_id: str | None = None
    editor_text: str | None = None
    summary_entry_id: str | None = None
    summary: BranchSummaryResult | None = None


def unusable_target(target: Any) -> str:
    """Why ``target`` cannot be navigated to ("" when it can), decided before anything is
    summarized. Pi reads a message target's role to place the new leaf: a message entry
    without a message object fails there, and an id that names no entry (a line that is not
    a JSON object is no entry) is "not found" before collecting; either way no summary is
    stored, so none is asked for here (Pi 1.6.0 parity: such a navigation once sent a
    summarization request first)."""
    if not isinstance(target, dict):
        return "is not an entry"
    if target.get("type") == "message" and not isinstance(target.get("message"), dict):
        return "is a message entry without a message body: nothing to navigate to"
    return ""


def navigate_tree(
    manager: Any,
    target_id: str,
    *,
    summarize: bool = False,
    summarizer: Summarizer | None = None,
    model: Any = None,
    custom_instructions: str | None = None,
    replace_instructions: bool = False,
    label: str | None = None,
    reserve_tokens: float = DEFAULT_BRANCH_RESERVE_TOKENS,
    thinking_level: str | None = None,
    signal: threading.Event | None = None,
    clock: Callable[[], float] | None = None,
    retry: RetryPolicy | None = None,
    pi_version: str = PI_DEFAULT,
) -> NavigationResult:
    """Move the leaf to `target_id`, optionally leaving a summary of the abandoned branch.

    Navigating to a user message (or custom message) moves to its parent and returns its text,
    so it can be edited and sent again. An aborted summary cancels the navigation; a failed one
    raises `SessionError`. Pi's own navigation passes no thinking level (so no reasoning);
    `thinking_level` is for callers that want one.
    """
    old_leaf = manager.get_leaf_id()
    if target_id == old_leaf:
        return NavigationResult(new_leaf_id=old_leaf)
    if summarize and summarizer is None:
        raise SessionError("No model available for summarization")
    target = manager.get_entry(target_id)
    if target is None:
        raise SessionError(f"Entry {target_id} not found")
    refused = unusable_target(target)
    if refused:
        raise SessionError(f"Entry {target_id} {refused}")
    collected = collect_entries_for_branch_summary(manager, old_leaf, target_id)
    summary: BranchSummaryResult | None = None
    if summarize and collected.entries:
        assert summarizer is not None
        summary = generate_branch_summary(
            collected.entries,
            summarizer,
            model=model,
            reserve_tokens=reserve_tokens,
            custom_instructions=custom_instructions,
            replace_instructions=replace_instructions,
            thinking_level=thinking_level,
            signal=signal,
            clock=clock,
            retry=retry,
            pi_version=pi_version,
        )
        if summary.aborted:
            return NavigationResult(cancelled=True, new_leaf_id=old_leaf)
        if summary.error is not None:
            raise SessionError(summary.error)

    editor_text = None
    new_leaf: Any = target_id
    message = target.get("message") if target.get("type") == "message" else None
    if isinstance(message, dict) and message.get("role") == "user":
        new_leaf = target.get("parentId")
        editor_text = content_text(message.get("content"), "")
    elif target.get("type") == "custom_message":
        new_leaf = target.get("parentId")
        editor_text = content_text(target.get("content"), "")
    if not truthy(new_leaf):
        new_leaf = None

    summary_id = None
    if summary is not None and summary.summary is not None:
        summary_id = manager.branch_with_summary(
            new_leaf,
            summary.summary,
            summary.details,
            False,
            summary.usage,
        )
        if label:
            manager.append_label_change(summary_id, label)
    else:
        if new_leaf is None:
            manager.reset_leaf()
        else:
            manager.branch(new_leaf)
        if label:
            manager.append_label_change(target_id, label)
    return NavigationResult(
        new_leaf_id=manager.get_leaf_id(),
        editor_text=editor_text,
        summary_entry_id=summary_id,
        summary=summary,
    )
