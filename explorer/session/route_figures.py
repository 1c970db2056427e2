"""Route figures: what "the route ending at entry X" adds up to, computed once when X arrives.

A session only grows and an entry's parent never changes, so the route from the root to an
entry never changes either: every figure of that route can be computed from the parent's
figures plus the entry itself, once, and kept with the entry for good. Prefix sums (depth,
turns, provider usage, cost, tool calls) need nothing else. The projected-token estimate
(the number ``pisession context --leaf X`` prints) is incremental too, except where the
projection changes shape: a compaction, a context edit, a system message, or an edit that
names an entry before it exists. Those few entries are estimated afresh from the route's
*context span* (from the latest compaction's first kept entry to the entry), which a
caller-supplied reader returns; the store reads it from the database, the one-pass form
from the loaded entries.

The figures are checked against the engine computed from scratch for every entry of
generated and real sessions (``tests/session/test_route_figures.py``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from . import exactsum
from .context import projection_from_path
from .describe import (
    cost_of,
    entry_role,
    entry_text,
    file_uses,
    tool_calls_of,
    total_tokens_of,
    usage_of,
)
from .edit_delta import EditDelta
from .messages import session_entry_to_context_messages
from .tokens import (
    calculate_context_tokens,
    estimate_every_message,
    estimate_projected_context,
    estimate_tokens,
    get_assistant_usage,
)

__all__ = [
    "RouteFigures",
    "SpanReader",
    "figures_of_entries",
    "next_figures",
    "span_start",
]

# The route's entries from the context span's start (see :func:`span_start`) down to and
# including the parent of the entry being figured, root side first.
SpanReader = Callable[[], Sequence[dict[str, Any]]]

_SILENT = frozenset(
    ("model_change", "thinking_level_change", "label", "custom", "session_info", "usage")
)


def _count(value: Any) -> int:
    """A usage field as ``pisession stats`` counts it: a number, else nothing."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return 0
    if math.isinf(value):
        return 0
    return int(value)


@dataclass(frozen=True, slots=True)
class RouteFigures:
    """Figures of the route from the root to one entry (that entry included).

    Sums count each entry on the route once, in route order, so a sum equals the one a
    reader adds up along the route (the same float operations in the same order).
    """

    depth: int  # entries above this one on the route
    turns: int  # user messages on the route
    responses: int  # entries recording a spend (``describe.usage_of``), as ``pisession stats``
    input: int
    output: int
    cache_read: int
    cache_write: int
    unpriced: int  # responses without a recorded cost total (``pisession stats`` prices them)
    tokens: float  # sum of ``describe.total_tokens_of`` (the session list's "tokens")
    cost: float  # sum of ``describe.cost_of`` (recorded cost, finite)
    tool_calls: int  # tool call blocks of assistant replies on the route
    compaction_id: str | None  # the latest compaction on the route (this entry if it is one)
    edit_id: str | None  # the latest context edit on the route (this entry if it is one)
    prev_edit_id: str | None  # the context edit on the route before ``edit_id``
    role: str  # this entry's message role ("" when it is not a message)
    text_size: int  # characters of this entry's readable text (``describe.entry_text``)
    context_tokens: float  # the engine's projected-context estimate here (NaN possible)
    # How ``context_tokens`` goes on: trusted provider usage plus the estimates after it, or
    # (``usage_tokens`` None) every message estimated; and the ids context edits on the
    # route named before they existed (an entry with such an id is estimated afresh, with
    # the edit applied). Almost always empty.
    usage_tokens: float | None
    trailing: float
    pending_targets: frozenset[str]
    # Every message of the projected context estimated, no provider usage trusted
    # (``estimate_every_message`` of the projection's messages; NaN possible): the Timeline's
    # "estimate" line, one basis before and after compactions and edits.
    every_estimate: float = 0.0
    # Messages of the projected context (``len(projection_from_path(route).messages)``): the
    # live meter's count, read instead of projecting the route.
    messages: int = 0
    # What a part of the route (between two of its entries) adds up to, as differences of
    # two rows (``totals_after``): the exact sum of the costs (``exactsum`` partials, None
    # once past the floats), the entries of type "message", the entries naming a file
    # (``describe.file_uses``). Compare reads a route's part after the common ancestor so.
    cost_partials: tuple[float, ...] | None = ()
    message_entries: int = 0
    file_use_entries: int = 0

    @property
    def usage(self) -> dict[str, int]:
        """Provider usage in Pi's field names (``pisession stats --leaf``)."""
        return {
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
        }


def totals_after(
    parent: tuple[tuple[float, ...] | None, int, int] | None,
    cost: float,
    kind: Any,
    names_files: bool,
) -> tuple[tuple[float, ...] | None, int, int]:
    """(cost partials, message entries, entries naming a file) of a route from its parent's
    (None: a root) and the entry's cost, type and whether it names a file: the one step
    the figures and migration 0033's fill both take."""
    partials, messages, uses = parent if parent is not None else ((), 0, 0)
    return (
        exactsum.added_finite(partials, cost),
        messages + (1 if kind == "message" else 0),
        uses + (1 if names_files else 0),
    )


def span_start(parent: RouteFigures | None, entry: dict[str, Any]) -> tuple[str | None, str | None]:
    """(compaction id, its first kept entry id) that bound the context span an estimate of
    ``entry`` afresh needs: the span runs from the first kept entry when it is on the route
    before the compaction, else from the compaction, else from the root. The reader learns
    the ids from here; it needs the compaction's line for its first kept id, so this returns
    the compaction id and lets the reader look the rest up (``firstKeptEntryId``)."""
    if entry.get("type") == "compaction":
        first = entry.get("firstKeptEntryId")
        return entry.get("id"), first if isinstance(first, str) else None
    return (parent.compaction_id if parent is not None else None), None


def _spend(entry: dict[str, Any]) -> tuple[int, int, int, int, int, int]:
    spend = usage_of(entry)
    if spend is None:
        return 0, 0, 0, 0, 0, 0
    cost = spend.get("cost")
    total = cost.get("total") if isinstance(cost, dict) else None
    recorded = isinstance(total, int | float) and not isinstance(total, bool) and total == total
    return (
        1,
        _count(spend.get("input")),
        _count(spend.get("output")),
        _count(spend.get("cacheRead")),
        _count(spend.get("cacheWrite")),
        0 if recorded else 1,
    )


def _estimate_afresh(
    route: Sequence[dict[str, Any]], entry: dict[str, Any]
) -> tuple[float, float | None, float, float, int]:
    """(tokens, trusted usage tokens or None, trailing, every message estimated, messages)
    of the span plus the entry, by the engine itself (``estimate_projected_context``, what
    ``pisession context`` prints, and ``estimate_every_message`` of the same projection)."""
    path = [*route, entry]
    projection = projection_from_path(path)
    estimate = estimate_projected_context(projection, path)
    every = estimate_every_message(projection.messages).tokens
    count = len(projection.messages)
    if estimate.last_usage_index is not None:
        return estimate.tokens, estimate.usage_tokens, estimate.trailing_tokens, every, count
    return estimate.tokens, None, estimate.tokens, every, count


def next_figures(
    parent: RouteFigures | None,
    entry: dict[str, Any],
    span: SpanReader,
    exists: Callable[[str], bool] | None = None,
    *,
    force: bool = False,
    edit_delta: Callable[[], EditDelta | None] | None = None,
) -> RouteFigures:
    """The figures of the route ending at ``entry``, from its parent's (None for a root).

    ``span`` is called only for the entries whose estimate is made afresh (compactions,
    context edits, system messages, an entry an earlier edit on the route already named):
    it returns the route from the span start (:func:`span_start`) down to the parent.
    ``exists`` says whether an id is already in the session when a context edit names it;
    without it every target counts as not yet there (always right, only slower).
    ``force`` estimates afresh whatever the entry (a route whose ids repeat).
    ``edit_delta``, for a context edit, gives what it changes from its target alone
    (:func:`~explorer.session.edit_delta.edit_difference`), or None to estimate afresh.
    """
    kind = entry.get("type")
    entry_id = entry.get("id")
    role = entry_role(entry)
    responses, inp, out, cread, cwrite, unpriced = _spend(entry)
    base = parent
    compaction_id = base.compaction_id if base else None
    edit_id = base.edit_id if base else None
    prev_edit_id = base.prev_edit_id if base else None
    pending = base.pending_targets if base else frozenset()
    named = isinstance(entry_id, str) and entry_id in pending
    if named:
        pending = pending - {entry_id}
    if kind == "compaction":
        compaction_id = entry_id if isinstance(entry_id, str) else None
    elif kind == "context_edit":
        prev_edit_id = edit_id
        edit_id = entry_id if isinstance(entry_id, str) else None
        target = entry.get("targetId")
        if isinstance(target, str) and (exists is None or not exists(target)):
            pending = pending | {target}

    afresh = named or kind in ("compaction", "context_edit")
    messages: list[Any] = []
    if not afresh and not (type(kind) is str and kind in _SILENT):
        messages = session_entry_to_context_messages(entry)
        for m in messages:
            if isinstance(m, dict) and m.get("role") == "system":
                afresh = True
            elif not (isinstance(entry_id, str) and entry_id) and get_assistant_usage(m):
                afresh = True  # the engine trusts no usage of an entry without an id
    afresh = afresh or force
    delta = None
    if (
        kind == "context_edit"
        and not (named or force)
        and edit_delta is not None
        and base is not None
        and not math.isnan(base.every_estimate)
    ):
        delta = edit_delta()
    if delta is not None and base is not None:
        # The edit is now the route's latest: no usage before it is trusted, so the
        # estimate is every message's (``estimate_projected_context``), changed by one entry.
        every = base.every_estimate + delta[0]
        tokens, usage_tokens, trailing = every, None, every
        count = base.messages + delta[1]
    elif afresh:
        tokens, usage_tokens, trailing, every, count = _estimate_afresh(span(), entry)
    else:
        usage_tokens = base.usage_tokens if base else None
        trailing = base.trailing if base else 0
        tokens = base.context_tokens if base else 0
        every = base.every_estimate if base else 0
        # The projection grows by exactly this entry's messages: nothing here reshapes it.
        count = (base.messages if base else 0) + len(messages)
        for m in messages:
            # No system message here (that is estimated afresh): each message adds its own.
            every = every + estimate_tokens(m)
            usage = get_assistant_usage(m)
            if usage is not None:
                usage_tokens, trailing = calculate_context_tokens(usage), 0
                tokens = usage_tokens + trailing
                continue
            t = estimate_tokens(m)
            if usage_tokens is None:
                tokens = tokens + t
                trailing = tokens
            else:
                trailing = trailing + t
                tokens = usage_tokens + trailing
    cost = cost_of(entry)
    partials, message_entries, file_use_entries = totals_after(
        (base.cost_partials, base.message_entries, base.file_use_entries) if base else None,
        cost,
        kind,
        bool(file_uses(entry)),
    )
    return RouteFigures(
        depth=base.depth + 1 if base else 0,
        turns=(base.turns if base else 0) + (1 if role == "user" else 0),
        responses=(base.responses if base else 0) + responses,
        input=(base.input if base else 0) + inp,
        output=(base.output if base else 0) + out,
        cache_read=(base.cache_read if base else 0) + cread,
        cache_write=(base.cache_write if base else 0) + cwrite,
        unpriced=(base.unpriced if base else 0) + unpriced,
        tokens=(base.tokens if base else 0.0) + total_tokens_of(entry),
        cost=(base.cost if base else 0.0) + cost,
        tool_calls=(base.tool_calls if base else 0) + len(tool_calls_of(entry)),
        compaction_id=compaction_id,
        edit_id=edit_id,
        prev_edit_id=prev_edit_id,
        role=role,
        text_size=len(entry_text(entry)),
        context_tokens=tokens,
        usage_tokens=usage_tokens,
        trailing=trailing,
        pending_targets=pending,
        every_estimate=every,
        messages=count,
        cost_partials=partials,
        message_entries=message_entries,
        file_use_entries=file_use_entries,
    )


def figures_of_entries(entries: Sequence[Any]) -> list[RouteFigures | None]:
    """Figures of every entry of a loaded session (entries without the header), in one pass.

    Parents usually come first in the file; an entry whose parent comes later waits for it.
    A parent the session does not have ends the route (the engine's walk stops there), and
    so does a parentId cycle. A session whose ids are not unique strings (the store refuses
    those) is figured route by route from scratch. Non-entries (not objects) get None.
    """
    dicts = [(i, e) for i, e in enumerate(entries) if isinstance(e, dict)]
    ids = [e.get("id") for _, e in dicts]
    unique = all(isinstance(x, str) and x for x in ids) and len(set(ids)) == len(ids)
    out: list[RouteFigures | None] = [None] * len(entries)
    if not unique:
        from .context import _walk_up, build_entry_index

        index = build_entry_index([e for _, e in dicts])
        for i, e in dicts:
            path = _walk_up(e, index)
            path.reverse()
            out[i] = figures_of_route(path)
        return out
    by_id = {e["id"]: (i, e) for i, e in dicts}
    waiting: dict[str, list[int]] = {}
    figures: dict[str, RouteFigures] = {}

    def parent_of(entry: dict[str, Any]) -> str | None:
        parent_id = entry.get("parentId")
        return parent_id if isinstance(parent_id, str) and parent_id in by_id else None

    def span_reader(entry: dict[str, Any], parent: RouteFigures | None) -> SpanReader:
        def read() -> list[dict[str, Any]]:
            return route_span(entry, parent, lambda i: by_id[i][1] if i in by_id else None)

        return read

    def settle(i: int, entry: dict[str, Any], parent: RouteFigures | None) -> None:
        stack = [(i, entry, parent)]
        while stack:
            i, entry, parent = stack.pop()
            mine = next_figures(parent, entry, span_reader(entry, parent), lambda t: t in figures)
            out[i] = mine
            figures[entry["id"]] = mine
            for child in waiting.pop(entry["id"], ()):
                stack.append((child, entries[child], mine))

    for i, entry in dicts:
        parent_id = parent_of(entry)
        if parent_id is None:
            settle(i, entry, None)
        elif parent_id in figures:
            settle(i, entry, figures[parent_id])
        else:
            waiting.setdefault(parent_id, []).append(i)
    if waiting:  # parentId cycles: every member's route stops where the walk repeats
        from .context import _walk_up, build_entry_index

        index = build_entry_index([e for _, e in dicts])
        pending = [i for kids in waiting.values() for i in kids]
        while pending:
            i = pending.pop()
            if out[i] is not None:
                continue
            path = _walk_up(entries[i], index)
            path.reverse()
            out[i] = figures_of_route(path)
            figures[entries[i]["id"]] = out[i]  # type: ignore[assignment]
            for child in waiting.pop(entries[i]["id"], ()):
                pending.append(child)
    return out


def route_span(
    entry: dict[str, Any],
    parent: RouteFigures | None,
    lookup: Callable[[str], dict[str, Any] | None],
) -> list[dict[str, Any]]:
    """The context span of ``entry``'s estimate afresh (root side first, the entry left out),
    walking up from its parent with ``lookup`` (id → entry, None when absent): up to the
    latest compaction's first kept entry when that is above the compaction, else up to
    the compaction, else to the root. Ids are unique strings here."""
    compaction, first_kept = span_start(parent, entry)
    if compaction is not None and first_kept is None and entry.get("type") != "compaction":
        line = lookup(compaction)
        first = line.get("firstKeptEntryId") if line is not None else None
        first_kept = first if isinstance(first, str) else None
    passed = compaction is None or entry.get("type") == "compaction"
    route: list[dict[str, Any]] = []
    cut = 0 if entry.get("type") == "compaction" else None
    parent_id = entry.get("parentId")
    current = lookup(parent_id) if isinstance(parent_id, str) and parent_id else None
    found = False
    seen: set[Any] = set()
    while current is not None:
        current_id = current.get("id")
        if current_id in seen:  # a parentId cycle (the store refuses them): the walk stops
            break
        seen.add(current_id)
        route.append(current)
        if not passed and current_id == compaction:
            passed = True
            cut = len(route)
        if passed and first_kept is not None and current_id == first_kept:
            found = True
            break
        parent_id = current.get("parentId")
        current = lookup(parent_id) if isinstance(parent_id, str) and parent_id else None
    if compaction is not None and not found and cut is not None:
        route = route[:cut]  # the first kept entry is not above the compaction
    route.reverse()
    return route


def figures_of_route(path: Sequence[dict[str, Any]]) -> RouteFigures | None:
    """Figures of the last entry of a root-first route, folded along it (no reader needed:
    the route is at hand)."""
    figures: RouteFigures | None = None
    last = len(path) - 1
    for k, entry in enumerate(path):
        # The last entry's estimate is made afresh: with repeated ids (the only routes this
        # is used for besides tests) the engine's index lookups differ from a running sum.
        span = functools.partial(_prefix, path, k)
        figures = next_figures(figures, entry, span, force=k == last)
    return figures


def _prefix(path: Sequence[dict[str, Any]], k: int) -> Sequence[dict[str, Any]]:
    return path[:k]
