"""Compaction: where to cut, what to summarize, and the summary requests (SPEC section 6).

`prepare_compaction` is pure and cheap: it works on the edited, model-visible projection of one
path and decides the first kept entry and the messages to summarize. `compact` makes the
summary requests through a `Summarizer` and returns the result; it never writes. The caller
appends the result with the manager's `append_compaction`, which captures the system
checkpoint (SPEC 6.12) - `compact_session` does all three steps for callers that just want a
compaction.

Three responsibilities stay separate: updating an earlier summary with newly summarized
history, summarizing the prefix of a split turn, and the system checkpoint (not model-written).

The requests follow Pi 1.6.0 (docs/spec-pi-1.6.md): no output cap is sent, thinking is not
serialized, and custom instructions also reach the turn-prefix request. `compaction_requests`
returns exactly what `compact` would send, without calling anything, so a reviewer can see what
the summarizer sees; `pi_version="1.0.3"` rebuilds that release's requests.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .context import ProjectedEntry, build_session_projection
from .errors import SessionError, SummarizationError
from .file_ops import (
    FileOps,
    add_details_file_ops,
    compute_file_lists,
    extract_file_ops_from_message,
    format_file_operations,
)
from .ids import uuid7
from .jsonfmt import truthy
from .messages import combine_usage, content_text, convert_to_llm, session_entry_to_context_messages
from .pi_version import PI_DEFAULT, is_pi_1_0_3
from .prompts import SUMMARIZATION_SYSTEM_PROMPT, build_history_prompt, build_turn_prefix_prompt
from .serialize import js_string, serialize_conversation
from .summarizers import (
    KIND_HISTORY,
    KIND_TURN_PREFIX,
    RetryPolicy,
    Summarizer,
    SummaryRequest,
    complete_summary,
)
from .tokens import (
    DEFAULT_COMPACTION_SETTINGS,
    CompactionSettings,
    estimate_projected_context_tokens,
    estimate_tokens,
)

__all__ = [
    "CUT_POINT_ROLES",
    "CompactionSettings",
    "TURN_START_ROLES",
    "CompactionPreparation",
    "CompactionResult",
    "CutPoint",
    "branch_summary_max_tokens",
    "build_summary_request",
    "compact",
    "compact_session",
    "compaction_requests",
    "find_cut_point",
    "find_projected_cut_point",
    "find_turn_start_index",
    "generate_summary",
    "generate_summary_with_usage",
    "generate_turn_prefix_summary",
    "history_request",
    "get_summarization_failure",
    "history_max_tokens",
    "is_cut_point_message",
    "is_turn_start_message",
    "prepare_compaction",
    "response_has_tool_call",
    "summary_max_tokens",
    "summary_options",
    "turn_prefix_max_tokens",
    "turn_prefix_request",
]

CUT_POINT_ROLES = frozenset(
    ("user", "assistant", "bashExecution", "custom", "branchSummary", "compactionSummary")
)
TURN_START_ROLES = frozenset(
    ("user", "bashExecution", "custom", "branchSummary", "compactionSummary")
)

_MISSING: Any = object()

LABEL_HISTORY = "Summarization"
LABEL_TURN_PREFIX = "Turn prefix summarization"


def is_cut_point_message(message: Any) -> bool:
    """May a kept range start at this message? Never at a tool result (SPEC 6.2)."""
    return isinstance(message, dict) and message.get("role") in CUT_POINT_ROLES


def is_turn_start_message(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role") in TURN_START_ROLES


def _setting(settings: Any, attr: str, key: str) -> Any:
    if isinstance(settings, Mapping):
        return settings.get(key)
    return getattr(settings, attr)


# ---------------------------------------------------------------------------------------------
# Cut points


@dataclass(frozen=True)
class CutPoint:
    first_kept_entry_index: int
    turn_start_index: int
    is_split_turn: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "firstKeptEntryIndex": self.first_kept_entry_index,
            "turnStartIndex": self.turn_start_index,
            "isSplitTurn": self.is_split_turn,
        }


def _parts(entry: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(source entry, projected messages) of a `ProjectedEntry` or its JSON form."""
    if isinstance(entry, ProjectedEntry):
        return entry.source_entry, entry.messages
    if isinstance(entry, Mapping):
        return entry["sourceEntry"], entry["messages"]
    return entry.source_entry, entry.messages


def _tokens(messages: Sequence[Any]) -> float:
    total: float = 0
    for message in messages:
        total += estimate_tokens(message)
    return total


def _is_compaction(entry: Any) -> bool:
    return isinstance(entry, Mapping) and entry.get("type") == "compaction"


def _projected_turn_start(entry: Any) -> bool:
    source, messages = _parts(entry)
    return not _is_compaction(source) and any(is_turn_start_message(m) for m in messages)


def _budget_cut(
    token_counts: Sequence[float],
    candidates: list[int],
    start: int,
    end: int,
    keep_recent_tokens: float,
) -> tuple[int, bool]:
    """Walk from the newest entry back until `keep_recent_tokens` is reached (SPEC 6.3 step 3)."""
    cut = candidates[0]
    acc: float = 0
    for i in range(end - 1, start - 1, -1):
        t = token_counts[i - start]
        if t == 0:
            continue
        acc += t  # a NaN total poisons the sum, as in the agent
        if acc >= keep_recent_tokens:
            cut = next((c for c in candidates if c >= i), candidates[-1])
            return cut, True
    return cut, False


def find_projected_cut_point(
    projected: Sequence[Any], start: int, end: int, keep_recent_tokens: float
) -> CutPoint:
    """The first kept entry of a compaction, on edited projected entries (SPEC 6.3)."""
    candidates = []
    for i in range(start, end):
        source, messages = _parts(projected[i])
        if not _is_compaction(source) and any(is_cut_point_message(m) for m in messages):
            candidates.append(i)
    if not candidates:
        return CutPoint(start, -1, False)
    counts = [_tokens(_parts(projected[i])[1]) for i in range(start, end)]
    cut, exceeded = _budget_cut(counts, candidates, start, end, keep_recent_tokens)

    if exceeded and _closed_recovery_suffix([_parts(e) for e in projected[cut + 1 : end]]):
        cut += 1

    while cut > start:
        source, messages = _parts(projected[cut - 1])
        if _is_compaction(source) or messages:
            break
        cut -= 1

    starts_turn = _projected_turn_start(projected[cut])
    turn_start = -1
    if not starts_turn:
        for j in range(cut, start - 1, -1):
            if _projected_turn_start(projected[j]):
                turn_start = j
                break
    return CutPoint(cut, turn_start, not starts_turn and turn_start != -1)


def _closed_recovery_suffix(suffix: list[tuple[dict[str, Any], list[dict[str, Any]]]]) -> bool:
    """Is everything after the cut a failed attempt hidden by omission edits (SPEC 6.3 step 4)?

    Only then may the cut move past it; metadata alone never moves the cut past a user input
    that was never answered.
    """

    def visible(source: dict[str, Any]) -> bool:
        return source.get("type") != "context_edit" and bool(
            session_entry_to_context_messages(source)
        )

    def omitted(source: dict[str, Any], messages: list[dict[str, Any]]) -> bool:
        return visible(source) and not messages

    omitted_ids = [s.get("id", _MISSING) for s, m in suffix if omitted(s, m)]
    for source, _messages in suffix:
        if (
            source.get("type") == "context_edit"
            and source.get("replacement", _MISSING) is not None
            and source.get("targetId", _MISSING) not in omitted_ids
        ):
            return False
    has_omitted_attempt = any(
        s.get("type") == "message"
        and isinstance(s.get("message"), dict)
        and s["message"].get("role") == "assistant"
        and omitted(s, m)
        for s, m in suffix
    )
    if not has_omitted_attempt:
        return False
    return all(not _is_compaction(s) and (not visible(s) or omitted(s, m)) for s, m in suffix)


def _raw_turn_start(entry: dict[str, Any]) -> bool:
    return not _is_compaction(entry) and any(
        is_turn_start_message(m) for m in session_entry_to_context_messages(entry)
    )


def find_turn_start_index(entries: Sequence[dict[str, Any]], index: int, start: int) -> int:
    """Raw-entry backward scan for the entry that starts the turn containing `index`."""
    for i in range(index, start - 1, -1):
        if _raw_turn_start(entries[i]):
            return i
    return -1


def find_cut_point(
    entries: Sequence[dict[str, Any]], start: int, end: int, keep_recent_tokens: float
) -> CutPoint:
    """Raw-entry variant of the cut search: no context edits, no recovery suffix (SPEC 6.4)."""
    messages = [session_entry_to_context_messages(entries[i]) for i in range(start, end)]
    candidates = [
        i
        for i in range(start, end)
        if not _is_compaction(entries[i])
        and any(is_cut_point_message(m) for m in messages[i - start])
    ]
    if not candidates:
        return CutPoint(start, -1, False)
    cut, _exceeded = _budget_cut(
        [_tokens(m) for m in messages], candidates, start, end, keep_recent_tokens
    )
    while cut > start:
        previous = entries[cut - 1]
        if _is_compaction(previous) or session_entry_to_context_messages(previous):
            break
        cut -= 1
    starts_turn = _raw_turn_start(entries[cut])
    turn_start = -1 if starts_turn else find_turn_start_index(entries, cut, start)
    return CutPoint(cut, turn_start, not starts_turn and turn_start != -1)


# ---------------------------------------------------------------------------------------------
# Preparation


@dataclass
class CompactionPreparation:
    """What a compaction will summarize and keep (SPEC 6.5)."""

    first_kept_entry_id: str
    messages_to_summarize: list[dict[str, Any]]
    turn_prefix_messages: list[dict[str, Any]]
    is_split_turn: bool
    tokens_before: float
    previous_summary: Any  # None when there is no previous compaction ("" is kept as "")
    file_ops: FileOps
    settings: Any
    # Source mapping, for viewers and callers (not part of the agent's object).
    first_kept_entry_index: int = 0
    start_index: int = 0
    turn_start_index: int = -1
    turn_start_entry_id: str | None = None
    summarize_entry_ids: list[str] = field(default_factory=list)
    turn_prefix_entry_ids: list[str] = field(default_factory=list)
    previous_compaction_id: str | None = None

    @property
    def details(self) -> dict[str, list[Any]]:
        read_files, modified_files = compute_file_lists(self.file_ops)
        return {"readFiles": read_files, "modifiedFiles": modified_files}

    def to_json(self) -> dict[str, Any]:
        settings = self.settings.to_json() if hasattr(self.settings, "to_json") else self.settings
        out: dict[str, Any] = {
            "firstKeptEntryId": self.first_kept_entry_id,
            "messagesToSummarize": self.messages_to_summarize,
            "turnPrefixMessages": self.turn_prefix_messages,
            "isSplitTurn": self.is_split_turn,
            "tokensBefore": self.tokens_before,
        }
        if self.previous_summary is not None:
            out["previousSummary"] = self.previous_summary
        out["fileOps"] = self.file_ops.to_json()
        out["settings"] = settings
        return out


def _summarizable(entry: ProjectedEntry) -> list[dict[str, Any]]:
    """Messages of a projected entry that go into a summary: no compaction, no system state."""
    if _is_compaction(entry.source_entry):
        return []
    return [m for m in entry.messages if not (isinstance(m, dict) and m.get("role") == "system")]


def _collect(
    entries: Sequence[ProjectedEntry], lo: int, hi: int
) -> tuple[list[dict[str, Any]], list[str]]:
    messages: list[dict[str, Any]] = []
    ids: list[str] = []
    for entry in entries[lo:hi]:
        part = _summarizable(entry)
        if part:
            messages.extend(part)
            ids.append(entry.source_entry.get("id"))  # type: ignore[arg-type]
    return messages, ids


def prepare_compaction(
    path_entries: Sequence[dict[str, Any]], settings: Any = DEFAULT_COMPACTION_SETTINGS
) -> CompactionPreparation | None:
    """Decide the cut and the messages to summarize, or None when there is nothing to do.

    None when the path already ends in a compaction (no second checkpoint on top of a fresh
    one) or when nothing before the cut would be summarized. Everything is measured on the
    edited, model-visible projection: hidden entries count for nothing, replaced ones count
    with their replacement.
    """
    if path_entries and _is_compaction(path_entries[-1]):
        return None
    projection = build_session_projection(list(path_entries))
    entries = projection.entries
    prev_index = next(
        (i for i, e in enumerate(entries) if _is_compaction(e.source_entry) and e.messages),
        -1,
    )
    previous_summary: Any = None
    start = 0
    if prev_index >= 0:
        previous_summary = entries[prev_index].source_entry.get("summary")
        start = prev_index + 1
    tokens_before = estimate_projected_context_tokens(projection, path_entries)
    keep = _setting(settings, "keep_recent_tokens", "keepRecentTokens")
    cut = find_projected_cut_point(entries, start, len(entries), keep)
    if cut.first_kept_entry_index >= len(entries):
        return None
    first_kept = entries[cut.first_kept_entry_index].source_entry
    if not truthy(first_kept.get("id")):
        return None
    history_end = cut.turn_start_index if cut.is_split_turn else cut.first_kept_entry_index
    to_summarize, summarize_ids = _collect(entries, start, history_end)
    prefix: list[dict[str, Any]] = []
    prefix_ids: list[str] = []
    if cut.is_split_turn:
        prefix, prefix_ids = _collect(entries, cut.turn_start_index, cut.first_kept_entry_index)
    if not to_summarize and not prefix:
        return None

    ops = FileOps()
    if prev_index >= 0:
        prev = entries[prev_index].source_entry
        if not truthy(prev.get("fromHook")) and truthy(prev.get("details")):
            add_details_file_ops(prev.get("details"), ops)
    for message in to_summarize:
        extract_file_ops_from_message(message, ops)
    if cut.is_split_turn:
        for message in prefix:
            extract_file_ops_from_message(message, ops)

    return CompactionPreparation(
        first_kept_entry_id=first_kept["id"],
        messages_to_summarize=to_summarize,
        turn_prefix_messages=prefix,
        is_split_turn=cut.is_split_turn,
        tokens_before=tokens_before,
        previous_summary=previous_summary,
        file_ops=ops,
        settings=settings,
        first_kept_entry_index=cut.first_kept_entry_index,
        start_index=start,
        turn_start_index=cut.turn_start_index,
        turn_start_entry_id=entries[cut.turn_start_index].source_entry.get("id")
        if cut.is_split_turn
        else None,
        summarize_entry_ids=summarize_ids,
        turn_prefix_entry_ids=prefix_ids,
        previous_compaction_id=entries[prev_index].source_entry.get("id")
        if prev_index >= 0
        else None,
    )


# ---------------------------------------------------------------------------------------------
# Requests


def _model_limit(model: Any) -> float:
    limit = model.get("maxTokens") if isinstance(model, Mapping) else None
    if isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit > 0:
        return limit
    return math.inf


def _capped(value: int, model: Any) -> int:
    limit = _model_limit(model)
    return value if value <= limit else limit  # type: ignore[return-value]


def history_max_tokens(reserve_tokens: float, model: Any = None) -> int:
    """`min(floor(0.8 × reserve), model.maxTokens)` - the model limit only when positive."""
    return _capped(math.floor(0.8 * reserve_tokens), model)


def turn_prefix_max_tokens(reserve_tokens: float, model: Any = None) -> int:
    return _capped(math.floor(0.5 * reserve_tokens), model)


def branch_summary_max_tokens(model: Any = None) -> int:
    """The 1.0.3 branch-summary cap; 1.6.0 sends none (see `summary_max_tokens`)."""
    return _capped(4096, model)


def summary_max_tokens(
    kind: str, reserve_tokens: float = 0, model: Any = None, *, pi_version: str = PI_DEFAULT
) -> int | None:
    """The output cap a summary request carries: none since Pi 1.6.0.

    Pi 1.6.0 stopped deriving a cap from `reserveTokens` (a cap below what the summary needs
    truncates it, and a truncated summary is refused), so the provider's own limit for the model
    applies. With `pi_version="1.0.3"` the old caps come back: 0.8 × reserve for history,
    0.5 × reserve for a turn prefix, 4096 for a branch summary, each capped by `model.maxTokens`.
    """
    if not is_pi_1_0_3(pi_version):
        return None
    if kind == KIND_TURN_PREFIX:
        return turn_prefix_max_tokens(reserve_tokens, model)
    if kind == KIND_HISTORY:
        return history_max_tokens(reserve_tokens, model)
    return branch_summary_max_tokens(model)


def summary_options(
    model: Any = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
    *,
    allow_reasoning: bool = True,
    clock: Callable[[], float] | None = None,
) -> dict[str, Any]:
    """Options of one summary request: reasoning (when enabled), no caching, a routing id."""
    options: dict[str, Any] = {}
    if (
        allow_reasoning
        and isinstance(model, Mapping)
        and truthy(model.get("reasoning"))
        and truthy(thinking_level)
        and thinking_level != "off"
    ):
        options["reasoning"] = thinking_level
    options["cacheRetention"] = "none"
    now = clock() if clock is not None else time.time() * 1000
    options["sessionId"] = session_id if session_id is not None else uuid7(now)
    return options


def build_summary_request(
    prompt_text: str,
    max_tokens: int | None,
    options: dict[str, Any],
    *,
    model: Any = None,
    kind: str = KIND_HISTORY,
    signal: threading.Event | None = None,
    clock: Callable[[], float] | None = None,
) -> SummaryRequest:
    """The two-message transcript of a summary request (SPEC 6.8)."""
    now = clock() if clock is not None else time.time() * 1000
    messages = [
        {"role": "system", "content": SUMMARIZATION_SYSTEM_PROMPT, "timestamp": 0},
        {"role": "user", "content": [{"type": "text", "text": prompt_text}], "timestamp": int(now)},
    ]
    return SummaryRequest(
        system_prompt=SUMMARIZATION_SYSTEM_PROMPT,
        messages=messages,
        max_tokens=max_tokens,
        options=options,
        model=dict(model) if isinstance(model, Mapping) else None,
        kind=kind,
        signal=signal,
    )


def get_summarization_failure(response: Mapping[str, Any], label: str) -> str | None:
    """Why a response must not become a summary, judged by its stop reason alone (SPEC 6.10)."""
    stop = response.get("stopReason")
    if stop == "error":
        message = response.get("errorMessage")
        return f"{label} failed: {js_string(message) if truthy(message) else 'Unknown error'}"
    if stop == "length":
        return f"{label} failed: generation hit the token cap and the summary is incomplete"
    return None


def response_has_tool_call(response: Mapping[str, Any]) -> bool:
    content = response.get("content")
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "toolCall" for b in content
    )


def _checked_text(response: Mapping[str, Any], label: str) -> str:
    failure = get_summarization_failure(response, label)
    if failure:
        raise SummarizationError(failure)
    if response_has_tool_call(response):
        raise SummarizationError(f"{label} attempted to call a tool")
    return content_text(response.get("content"))


def generate_summary_with_usage(
    messages: list[dict[str, Any]],
    summarizer: Summarizer,
    reserve_tokens: float,
    *,
    model: Any = None,
    custom_instructions: str | None = None,
    previous_summary: str | None = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
    signal: threading.Event | None = None,
    clock: Callable[[], float] | None = None,
    retry: RetryPolicy | None = None,
    pi_version: str = PI_DEFAULT,
) -> tuple[str, dict[str, Any]]:
    """History summary (first or update form) → `(text, usage)`; raises on failure.

    `reserve_tokens` only matters for `pi_version="1.0.3"` (it set the output cap there).
    """
    request = history_request(
        messages,
        reserve_tokens,
        model=model,
        custom_instructions=custom_instructions,
        previous_summary=previous_summary,
        thinking_level=thinking_level,
        session_id=session_id,
        signal=signal,
        clock=clock,
        pi_version=pi_version,
    )
    response = complete_summary(summarizer, request, retry)
    return _checked_text(response, LABEL_HISTORY), response.get("usage")  # type: ignore[return-value]


def history_request(
    messages: list[dict[str, Any]],
    reserve_tokens: float = 0,
    *,
    model: Any = None,
    custom_instructions: str | None = None,
    previous_summary: str | None = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
    signal: threading.Event | None = None,
    clock: Callable[[], float] | None = None,
    pi_version: str = PI_DEFAULT,
) -> SummaryRequest:
    """The history summary request, built but not sent."""
    conversation = serialize_conversation(convert_to_llm(messages), pi_version=pi_version)
    prompt = build_history_prompt(conversation, previous_summary, custom_instructions)
    return build_summary_request(
        prompt,
        summary_max_tokens(KIND_HISTORY, reserve_tokens, model, pi_version=pi_version),
        summary_options(model, thinking_level, session_id, clock=clock),
        model=model,
        kind=KIND_HISTORY,
        signal=signal,
        clock=clock,
    )


def generate_summary(
    messages: list[dict[str, Any]], summarizer: Summarizer, reserve_tokens: float, **kwargs: Any
) -> str:
    return generate_summary_with_usage(messages, summarizer, reserve_tokens, **kwargs)[0]


def generate_turn_prefix_summary(
    messages: list[dict[str, Any]],
    summarizer: Summarizer,
    reserve_tokens: float,
    *,
    model: Any = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
    signal: threading.Event | None = None,
    clock: Callable[[], float] | None = None,
    retry: RetryPolicy | None = None,
    custom_instructions: str | None = None,
    pi_version: str = PI_DEFAULT,
) -> tuple[str, dict[str, Any]]:
    """Summary of the earlier part of a split turn → `(text, usage)`; raises on failure."""
    request = turn_prefix_request(
        messages,
        reserve_tokens,
        model=model,
        custom_instructions=custom_instructions,
        thinking_level=thinking_level,
        session_id=session_id,
        signal=signal,
        clock=clock,
        pi_version=pi_version,
    )
    response = complete_summary(summarizer, request, retry)
    return _checked_text(response, LABEL_TURN_PREFIX), response.get("usage")  # type: ignore[return-value]


def turn_prefix_request(
    messages: list[dict[str, Any]],
    reserve_tokens: float = 0,
    *,
    model: Any = None,
    custom_instructions: str | None = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
    signal: threading.Event | None = None,
    clock: Callable[[], float] | None = None,
    pi_version: str = PI_DEFAULT,
) -> SummaryRequest:
    """The turn-prefix request, built but not sent.

    Custom instructions reach it as additional focus since Pi 1.6.0 (the user's focus matters
    for the part of the turn being cut as much as for the history); 1.0.3 ignored them here.
    """
    conversation = serialize_conversation(convert_to_llm(messages), pi_version=pi_version)
    focus = None if is_pi_1_0_3(pi_version) else custom_instructions
    return build_summary_request(
        build_turn_prefix_prompt(conversation, focus),
        summary_max_tokens(KIND_TURN_PREFIX, reserve_tokens, model, pi_version=pi_version),
        summary_options(model, thinking_level, session_id, clock=clock),
        model=model,
        kind=KIND_TURN_PREFIX,
        signal=signal,
        clock=clock,
    )


def compaction_requests(
    preparation: CompactionPreparation,
    *,
    model: Any = None,
    custom_instructions: str | None = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
    clock: Callable[[], float] | None = None,
    pi_version: str = PI_DEFAULT,
) -> list[SummaryRequest]:
    """Exactly the requests `compact` would send for a preparation, in order; calls nothing.

    For previews (CLI `--show-request`, the web app's compaction preview): the history request
    (absent when a split turn has no earlier history) and, for a split turn, the turn-prefix
    request. Each carries a fresh routing id unless `session_id` is given, as a real run would.
    """
    reserve = _setting(preparation.settings, "reserve_tokens", "reserveTokens")
    common: dict[str, Any] = {
        "model": model,
        "thinking_level": thinking_level,
        "session_id": session_id,
        "clock": clock,
        "pi_version": pi_version,
    }
    requests: list[SummaryRequest] = []
    split = preparation.is_split_turn and bool(preparation.turn_prefix_messages)
    if not split or preparation.messages_to_summarize:
        requests.append(
            history_request(
                preparation.messages_to_summarize,
                reserve,
                custom_instructions=custom_instructions,
                previous_summary=preparation.previous_summary,
                **common,
            )
        )
    if split:
        requests.append(
            turn_prefix_request(
                preparation.turn_prefix_messages,
                reserve,
                custom_instructions=custom_instructions,
                **common,
            )
        )
    return requests


# ---------------------------------------------------------------------------------------------
# compact()


@dataclass
class CompactionResult:
    summary: str
    first_kept_entry_id: str
    tokens_before: float
    usage: Any
    details: dict[str, list[Any]]

    def to_json(self) -> dict[str, Any]:
        return {
            "summary": self.summary,
            "firstKeptEntryId": self.first_kept_entry_id,
            "tokensBefore": self.tokens_before,
            "usage": self.usage,
            "details": self.details,
        }


def compact(
    preparation: CompactionPreparation,
    summarizer: Summarizer,
    *,
    model: Any = None,
    custom_instructions: str | None = None,
    signal: threading.Event | None = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
    clock: Callable[[], float] | None = None,
    retry: RetryPolicy | None = None,
    pi_version: str = PI_DEFAULT,
) -> CompactionResult:
    """Make the summary requests for a preparation and build the result (SPEC 6.11).

    Never writes. Raises `SummarizationError` when a request fails; an aborted response is
    not a failure here - the caller checks its own cancel signal before writing. The requests
    are those of `compaction_requests`, so a preview shows exactly what is sent.
    """
    requests = compaction_requests(
        preparation,
        model=model,
        custom_instructions=custom_instructions,
        thinking_level=thinking_level,
        session_id=session_id,
        clock=clock,
        pi_version=pi_version,
    )
    results: dict[str, tuple[str, Any]] = {}
    for request in requests:
        request.signal = signal
        label = LABEL_TURN_PREFIX if request.kind == KIND_TURN_PREFIX else LABEL_HISTORY
        response = complete_summary(summarizer, request, retry)
        results[request.kind] = (_checked_text(response, label), response.get("usage"))
    previous = preparation.previous_summary
    if KIND_TURN_PREFIX in results:
        history_text = previous if previous is not None else "No prior history."
        history_usage = None
        if KIND_HISTORY in results:
            history_text, history_usage = results[KIND_HISTORY]
        prefix_text, prefix_usage = results[KIND_TURN_PREFIX]
        summary = f"{history_text}\n\n---\n\n**Turn Context (split turn):**\n\n{prefix_text}"
        usage = (
            combine_usage(history_usage, prefix_usage, pi_version=pi_version)
            if history_usage is not None
            else prefix_usage
        )
    else:
        summary, usage = results[KIND_HISTORY]
    read_files, modified_files = compute_file_lists(preparation.file_ops)
    summary += format_file_operations(read_files, modified_files)
    if not truthy(preparation.first_kept_entry_id):
        raise SessionError("First kept entry has no UUID - session may need migration")
    return CompactionResult(
        summary=summary,
        first_kept_entry_id=preparation.first_kept_entry_id,
        tokens_before=preparation.tokens_before,
        usage=usage,
        details={"readFiles": read_files, "modifiedFiles": modified_files},
    )


def compact_session(
    manager: Any,
    summarizer: Summarizer,
    settings: Any = None,
    *,
    model: Any = None,
    custom_instructions: str | None = None,
    signal: threading.Event | None = None,
    thinking_level: str | None = None,
    session_id: str | None = None,
    retry: RetryPolicy | None = None,
    pi_version: str = PI_DEFAULT,
) -> tuple[str, CompactionResult]:
    """The whole pipeline of SPEC 6.1 on a manager: prepare, summarize, append.

    Returns `(compaction entry id, result)`. Raises `SessionError` with the agent's messages
    when there is nothing to do (`Already compacted`, `Nothing to compact (session too
    small)`) or when `signal` was set while the summaries were made (`Compaction cancelled`;
    nothing is written then).
    """
    if settings is None:
        settings = DEFAULT_COMPACTION_SETTINGS
    path = manager.get_branch()
    preparation = prepare_compaction(path, settings)
    if preparation is None:
        if path and _is_compaction(path[-1]):
            raise SessionError("Already compacted")
        raise SessionError("Nothing to compact (session too small)")
    result = compact(
        preparation,
        summarizer,
        model=model,
        custom_instructions=custom_instructions,
        signal=signal,
        thinking_level=thinking_level,
        session_id=session_id,
        retry=retry,
        pi_version=pi_version,
    )
    if signal is not None and signal.is_set():
        raise SessionError("Compaction cancelled")
    return append_compaction_result(manager, result), result


def append_compaction_result(
    manager: Any, result: CompactionResult, from_hook: bool = False
) -> str:
    """Store a computed compaction on ``manager``'s current leaf; the new entry's id."""
    return manager.append_compaction(
        result.summary,
        result.first_kept_entry_id,
        result.tokens_before,
        result.details,
        from_hook,
        result.usage,
    )
