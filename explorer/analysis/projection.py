"""Raw versus projected: every raw entry of a route beside what it gives the model, and why."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from explorer.analysis.recorded import projection_of, recorded_of
from explorer.session.context import projection_from_path
from explorer.session.describe import (
    entry_role,
    entry_title,
    finite,
    message_preview,
    tokens_of,
)
from explorer.session.messages import session_entry_to_context_messages
from explorer.session.tokens import (
    CompactionSettings,
    calculate_context_tokens,
    estimate_every_message,
    estimate_projected_context,
    get_assistant_usage,
    should_compact,
)

# --- raw versus projected ----------------------------------------------------------------

NOT_MODEL_TYPES = {
    "label": "label (UI metadata)",
    "session_info": "session name (UI metadata)",
    "custom": "extension state",
    "usage": "cost accounting",
    "model_change": "settings change",
    "thinking_level_change": "settings change",
    "context_edit": "context edit (changes another entry)",
}


@dataclass
class AlignedRow:
    """One raw path entry beside what it contributes to the model context."""

    entry: dict
    index: int  # position on the raw path
    status: str  # same | replaced | hidden | compacted | summary | superseded | metadata | inert
    reason: str  # human explanation of the difference ("" when the same)
    projected: list[dict] = field(default_factory=list)
    order: list[int] = field(default_factory=list)  # message numbers in model order
    raw_tokens: int = 0
    projected_tokens: int = 0
    cause_id: str | None = None  # the edit or compaction responsible

    @property
    def id(self) -> str:
        return str(self.entry.get("id", ""))

    @property
    def differs(self) -> bool:
        return self.status != "same"


@dataclass
class AlignedView:
    """The aligned rows and every figure the page, its partial and its JSON show.

    Each side has two figures that must never be confused: the engine's estimate and the
    provider-reported context of the last answered assistant message. ``projected_tokens``
    is the engine's usage-aware estimate, the number ``pisession context`` prints and the
    one compaction decides on.
    """

    rows: list[AlignedRow]
    raw_tokens: int  # sum of the raw message estimates of the rows
    projected_tokens: int  # the engine's estimate (usage-aware), = ``pisession context``
    projected_sum: int  # plain sum of the projected message estimates (the row column)
    message_count: int
    thinking_level: str
    model: dict | None
    compaction_id: str | None
    differences: int
    would_compact: bool
    context_window: int
    threshold: int
    raw_reported: int | None = None  # provider usage of the last answered assistant (raw)
    raw_reported_id: str | None = None
    projected_reported: int | None = None  # the same among the projected messages
    projected_basis: str = "estimate"  # "usage" (reported + trailing) or "estimate"
    projected_trailing: int = 0  # estimated tokens after the usage the estimate starts from
    # Every projected message estimated, no provider usage (the basis after an edit): what
    # a preview compares before and after an edit, and beside the raw estimate
    projected_estimate: int = 0
    status_counts: dict[str, int] = field(default_factory=dict)


def _reported(messages: Sequence[Any]) -> int | None:
    """Provider-reported context of the last answered assistant among ``messages``."""
    for m in reversed(messages):
        usage = get_assistant_usage(m)
        if usage is not None:
            return int(finite(calculate_context_tokens(usage)))
    return None


# What a context edit does to its target → (row status, reason; {} is the edit's id).
EDIT_EFFECTS = {
    "hidden": ("hidden", "hidden by context edit {}"),
    "replaced": ("replaced", "content replaced by context edit {}"),
    # An undo appends the original content as the replacement: the model sees exactly the
    # raw message again, so this is no longer a difference.
    "restored": ("same", "original content restored by context edit {}"),
    "inert": ("same", "edit {} does not apply to this role"),
}


def edit_effect(raw: Sequence[Any], projected: Sequence[Any], edit: dict) -> str:
    """What ``edit`` does to its target, from the target's raw messages and the ones the
    model gets: "hidden", "replaced", "restored" (the model sees exactly the raw content
    again: an undo) or "inert" (the edit does not apply to the target's role).

    The one judgement behind Raw vs projected's rows and the Transcript's and entry panel's
    edit notes (:func:`entry_edit_effect`): those once called a restored entry "replaced in
    the model's context" beside a row saying "original content restored"."""
    if edit.get("replacement") is None:
        return "hidden"
    if projected and any(m is not r for m, r in zip(projected, raw, strict=False)):
        if len(projected) == len(raw) and all(
            m.get("content") == r.get("content") for m, r in zip(projected, raw, strict=False)
        ):
            return "restored"
        return "replaced"
    return "inert"


def entry_edit_effect(entry: dict, edit: dict) -> str:
    """:func:`edit_effect` of ``edit`` on ``entry``, the messages after it being the engine's
    (the projection of the entry followed by the edit)."""
    raw = session_entry_to_context_messages(entry)
    return edit_effect(raw, projection_from_path([entry, edit]).messages, edit)


# What an append may add at the end of a path while every earlier row stays as it was:
# conversation messages of these roles, and UI metadata the projection passes over. None
# of them moves the fold (a compaction), edits an entry (a context edit), restores a
# setting, or brings a system message or a branch summary into the model's context.
APPENDABLE_ROLES = frozenset(("user", "assistant", "toolResult"))
APPENDABLE_TYPES = frozenset(("label", "session_info"))


def _appendable(entry: dict) -> bool:
    kind = entry.get("type")
    if kind == "message":
        return entry_role(entry) in APPENDABLE_ROLES
    return type(kind) is str and kind in APPENDABLE_TYPES


def _reusable_rows(reuse: AlignedView | None, path: Sequence[dict]) -> int:
    """How many of ``reuse``'s rows are the rows of ``path``'s first entries: all of them
    when ``reuse`` was aligned on exactly those entries (the same objects) and the rest of
    ``path`` is appendable (:data:`APPENDABLE_ROLES`, :data:`APPENDABLE_TYPES`), else 0.

    A row says what its entry gives the model, which depends on the entries after it only
    through a later compaction (the fold) or context edit (a hidden or replaced target, an
    edit's own "superseded" or "no effect" note). An appended entry that is neither, whose
    id is new on the path and no context edit's target, leaves every earlier row exactly
    what a fresh alignment makes of it; anything else (a duplicate id, an edit waiting for
    its target) is aligned afresh, whatever it costs."""
    if reuse is None or not reuse.rows or len(reuse.rows) > len(path):
        return 0
    rows = reuse.rows
    n = len(rows)
    if any(r.entry is not path[i] or r.index != i for i, r in enumerate(rows)):
        return 0
    appended = path[n:]
    if not all(_appendable(e) for e in appended):
        return 0
    try:
        new_ids = [e.get("id") for e in appended]
        if len(set(new_ids)) != len(new_ids):
            return 0
        old_ids = {r.entry.get("id") for r in rows}
        targets = {e.get("targetId") for e in path if e.get("type") == "context_edit"}
    except TypeError:  # an unhashable id or target: no shortcut
        return 0
    if any(i in old_ids or i in targets for i in new_ids):
        return 0
    return n


def projected_estimate(path: Sequence[dict], projection: Any = None) -> int:
    """The engine's estimate of the context ``path`` projects to: :func:`align_projection`'s
    ``projected_tokens`` without aligning and explaining every row, which is what a page that
    shows only the figure (Compare, for two routes at once) needs. It depends on neither the
    window nor the reserve. ``projection``: the engine's projection of ``path``, when the
    caller made it already."""
    path = list(path)
    if projection is None:
        projection = projection_of(path)
    return _estimate_tokens(estimate_projected_context(projection, path))


def _estimate_tokens(est: Any) -> int:
    """The estimate as the pages show it (whole tokens, NaN as 0)."""
    return int(finite(est.tokens))


def align_projection(
    path: Sequence[dict],
    *,
    context_window: int = 200_000,
    settings: CompactionSettings | None = None,
    reuse: AlignedView | None = None,
) -> AlignedView:
    """Pair every raw path entry with its projected messages and explain each difference.

    ``reuse``: an alignment of a shorter path whose entries (the same objects) begin this
    one, the route before an append. Its rows are kept when the appended entries cannot
    change them (:func:`_reusable_rows`), and only the appended entries are aligned and
    estimated. The projection and every figure of the view are made afresh either way, so
    the answer is the one a fresh alignment gives: on a live range of five hundred entries
    the engine's projection costs about a millisecond, where estimating and explaining every
    row cost thirty. Rows do not depend on the window or the reserve, so ``reuse`` may have
    been aligned against others.
    """
    settings = settings or CompactionSettings()
    projection = projection_of(path)
    contributed: dict[int, list[dict]] = {}
    order_of: dict[int, list[int]] = {}
    n = 0
    context_ids: set[int] = set()
    for pe in projection.entries:
        key = id(pe.source_entry)
        context_ids.add(key)
        contributed[key] = pe.messages
        order_of[key] = list(range(n + 1, n + 1 + len(pe.messages)))
        n += len(pe.messages)

    latest_index = next(
        (i for i in range(len(path) - 1, -1, -1) if path[i].get("type") == "compaction"), -1
    )
    latest = path[latest_index] if latest_index >= 0 else None
    latest_id = latest.get("id") if latest else None
    edits: dict[Any, dict] = {}
    for pe in projection.entries:
        src = pe.source_entry
        if src.get("type") == "context_edit":
            edits[src.get("targetId")] = src

    context_target_ids = {pe.source_entry.get("id") for pe in projection.entries}
    kept = _reusable_rows(reuse, path)
    rows: list[AlignedRow] = list(reuse.rows) if reuse is not None and kept else []
    for i in range(kept, len(path)):
        entry = path[i]
        raw_msgs = session_entry_to_context_messages(entry)
        raw_tokens = tokens_of(raw_msgs) if entry.get("type") != "compaction" else 0
        key = id(entry)
        kind = entry.get("type")
        row = AlignedRow(entry, i, "same", "", raw_tokens=raw_tokens)
        if key not in context_ids:
            row.cause_id = latest_id
            if latest is None:
                row.status, row.reason = "compacted", "not in context"
            elif kind == "message" and entry_role(entry) == "system" and i < latest_index:
                row.status = "superseded"
                row.reason = (
                    f"system message superseded by the checkpoint of compaction {latest_id}"
                )
            else:
                row.status, row.reason = "compacted", f"folded into compaction {latest_id}"
                if not raw_msgs:
                    row.reason += " · not model content"
            rows.append(row)
            continue
        msgs = contributed.get(key, [])
        row.projected = msgs
        row.order = order_of.get(key, [])
        row.projected_tokens = tokens_of(msgs)
        edit = edits.get(entry.get("id"))
        if kind == "compaction":
            recorded = recorded_of(entry)
            if entry.get("id") == latest_id and msgs and recorded is not None:
                row.status = "summary"
                row.reason = (
                    f"context Codex recorded at this compaction: {recorded['items']} items"
                    + (", summary encrypted (not in the file)" if recorded["encrypted"] else "")
                    + "; sent first, replaces everything before"
                )
            elif entry.get("id") == latest_id and msgs:
                row.status = "summary"
                first = entry.get("firstKeptEntryId")
                row.reason = (
                    "compaction summary"
                    + (" and system checkpoint" if len(msgs) > 1 else "")
                    + f"; sent first, keeps history from {first}"
                )
            elif (
                edit is not None
                and edit.get("replacement") is None
                and entry.get("id") == latest_id
            ):
                row.status, row.reason, row.cause_id = (
                    "hidden",
                    f"hidden by context edit {edit.get('id')}",
                    edit.get("id"),
                )
            else:
                row.status, row.reason = (
                    "inert",
                    "older compaction inside the kept range: contributes nothing",
                )
        elif edit is not None:
            status, words = EDIT_EFFECTS[edit_effect(raw_msgs, msgs, edit)]
            row.status, row.reason = status, words.format(edit.get("id"))
            row.cause_id = edit.get("id")
        elif not msgs:
            if kind == "context_edit":
                target = entry.get("targetId")
                winner = edits.get(target)
                row.status = "metadata"
                if target not in context_target_ids:
                    row.reason = (
                        f"context edit of {target}: no effect, the target is not in context"
                    )
                elif winner is not entry:
                    row.reason = f"context edit of {target}: superseded by the later edit {winner.get('id') if winner else '?'}"
                else:
                    row.reason = f"context edit: {'hides' if entry.get('replacement') is None else 'replaces'} {target}"
            elif kind in NOT_MODEL_TYPES:
                row.status, row.reason = "metadata", f"not model content: {NOT_MODEL_TYPES[kind]}"
            elif kind == "branch_summary":
                row.status, row.reason = "metadata", "empty branch summary: contributes nothing"
            else:
                row.status, row.reason = "metadata", f"{kind}: not model content"
        rows.append(row)

    est = estimate_projected_context(projection, path)
    projected_tokens = _estimate_tokens(est)
    threshold = context_window - settings.reserve_tokens
    raw_reported_id = None
    for entry in reversed(path):
        if entry.get("type") == "message" and get_assistant_usage(entry.get("message")):
            raw_reported_id = str(entry.get("id"))
            break
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.status] = counts.get(r.status, 0) + 1
    return AlignedView(
        rows=rows,
        raw_tokens=sum(r.raw_tokens for r in rows),
        projected_tokens=projected_tokens,
        # The row column's sum, from the rows' own estimates: each estimate is a whole
        # number (NaN counted 0 per message), so this is the plain sum of the projected
        # messages' estimates without estimating every message a second time.
        projected_sum=sum(r.projected_tokens for r in rows),
        message_count=len(projection.messages),
        thinking_level=projection.thinking_level,
        model=projection.model,
        compaction_id=latest_id,
        differences=sum(1 for r in rows if r.differs),
        would_compact=should_compact(est.tokens, context_window, settings),
        context_window=context_window,
        threshold=threshold,
        raw_reported=_reported([e.get("message") for e in path if e.get("type") == "message"]),
        raw_reported_id=raw_reported_id,
        projected_reported=_reported(projection.messages),
        projected_basis="usage" if est.last_usage_index is not None else "estimate",
        projected_trailing=int(finite(est.trailing_tokens))
        if est.last_usage_index is not None
        else 0,
        projected_estimate=_estimate_tokens(estimate_every_message(projection.messages)),
        status_counts=counts,
    )


EDITABLE_ROLES = ("user", "assistant", "toolResult")
STATUS_WORDS = {
    "hidden": "hidden by an edit",
    "replaced": "replaced by an edit",
    "summary": "compaction summary",
    "compacted": "folded into the compaction",
    "superseded": "superseded system message",
    "inert": "older compaction, inert",
    "metadata": "not model content",
}


def summary_row(r: AlignedRow) -> dict[str, Any]:
    """One aligned row as the page lists it (plain data: the page, its partial and JSON).

    Made from the row and its entry alone, so the dict of a row kept by an extended
    alignment (:func:`align_projection` ``reuse``) is the one made for it before."""
    e = r.entry
    role = entry_role(e)
    return {
        "id": r.id,
        "kind": role or str(e.get("type", "")),
        "status": r.status,
        "reason": r.reason,
        "raw_tokens": r.raw_tokens,
        "projected_tokens": r.projected_tokens,
        "raw_text": entry_title(e, 220),
        "projected": _previews(r.order, r.projected),
        "editable": e.get("type") == "custom_message" or role in EDITABLE_ROLES,
    }


def _previews(order: Sequence[int], messages: Sequence[dict]) -> list[tuple[int, str, str]]:
    return [
        (o, str(m.get("role", "")), message_preview(m, 220))
        for o, m in zip(order, messages, strict=False)
    ]


def entry_texts(entry: dict) -> tuple[str, list[tuple[str, str]]]:
    """The title :func:`summary_row` gives ``entry`` and the (role, preview) of each of its
    own messages (``session_entry_to_context_messages``): what a row made from a stand-in
    (``session.tokens.OmittedMessage``) shows once its line is read
    (:func:`summary_row_texts`). Small, and the same for every route and version, so a
    caller may keep it."""
    previews = [
        (str(m.get("role", "")), message_preview(m, 220))
        for m in session_entry_to_context_messages(entry)
    ]
    return entry_title(entry, 220), previews


def summary_row_texts(
    texts: tuple[str, Sequence[tuple[str, str]]], order: Sequence[int]
) -> dict[str, Any]:
    """The texts :func:`summary_row` gives the row of an entry (its :func:`entry_texts`)
    when the model gets the entry's own messages, numbered ``order`` (none when empty)."""
    title, previews = texts
    return {
        "raw_text": title,
        "projected": [(o, role, text) for o, (role, text) in zip(order, previews, strict=False)],
    }


def summarize_view(
    view: AlignedView,
    shown: Sequence[AlignedRow],
    earlier: tuple[Sequence[AlignedRow], Sequence[dict[str, Any]]] | None = None,
) -> dict[str, Any]:
    """The rows a page lists and every figure about them, as plain data (page, partial, JSON).

    The difference counts are taken over exactly the rows listed, so their breakdown adds up
    to the total the page shows; the rows' projected column adds up to ``projected_sum``.

    ``earlier``: the rows an earlier summary listed and their dicts. Where ``shown`` begins
    with those same row objects (a view extended after an append keeps them), their dicts
    are taken as they are, since :func:`summary_row` makes one from the row alone: the
    previews and titles of a few hundred rows cost more than the rest of the page's figures.
    Every figure is still taken over all of ``shown``.
    """
    k = 0
    made: Sequence[dict[str, Any]] = ()
    if earlier is not None:
        before, made = earlier
        limit = min(len(before), len(made), len(shown))
        while k < limit and shown[k] is before[k]:
            k += 1
    rows = list(made[:k]) + [summary_row(r) for r in shown[k:]]
    counts: dict[str, int] = {}
    for r in shown:
        if r.differs:
            counts[r.status] = counts.get(r.status, 0) + 1
    return {
        "rows": rows,
        "raw_tokens": sum(r.raw_tokens for r in shown),
        "raw_reported": view.raw_reported,
        "raw_reported_id": view.raw_reported_id,
        "projected_tokens": view.projected_tokens,
        "projected_sum": sum(r.projected_tokens for r in shown),
        "projected_reported": view.projected_reported,
        "projected_basis": view.projected_basis,
        "projected_trailing": view.projected_trailing,
        "message_count": view.message_count,
        "thinking_level": view.thinking_level,
        "model": view.model,
        "compaction_id": view.compaction_id,
        "differences": sum(counts.values()),
        "difference_counts": [
            {"status": k, "words": STATUS_WORDS.get(k, k), "count": v}
            for k, v in sorted(counts.items())
        ],
        "edited_count": counts.get("hidden", 0) + counts.get("replaced", 0),
        "would_compact": view.would_compact,
        "window": view.context_window,
        "threshold": view.threshold,
    }


def projected_context_tokens(path: Sequence[dict], projection: Any = None) -> int:
    """The engine's estimate of the context the model sees at the end of ``path``, as a whole
    number (NaN, from malformed content, shows as 0).

    What ``pisession context`` prints and Raw vs projected shows: every page giving the
    context size at an entry (the live meter, a compaction's "tokens after") calls this,
    so none adds messages up its own way. ``projection``: the path's projection, when the
    caller has it already."""
    if projection is None:
        projection = projection_of(path)
    return int(finite(estimate_projected_context(projection, path).tokens))


def context_figures(path: Sequence[dict], *, window: int, reserve: int) -> dict[str, Any]:
    """Message count and the engine's estimate of the context tokens the model sees at the
    end of ``path``, against the window and the compaction threshold (the live meter, on a
    parsed route: :func:`meter_figures` of its projection).

    The estimate is the one :func:`align_projection` gives Raw vs projected (and
    ``pisession context`` prints): a provider's usage older than the latest context edit or
    compaction is not trusted, since the context it measured no longer exists. The meter
    once added the newer messages to that stale usage and could show 50,000 tokens where
    the page showed a handful."""
    projection = projection_of(path)
    tokens = projected_context_tokens(path, projection)
    leaf_id = path[-1].get("id") if path else None
    return meter_figures(leaf_id, len(projection.messages), tokens, window=window, reserve=reserve)


def meter_figures(
    leaf_id: Any, messages: int, tokens: int, *, window: int, reserve: int
) -> dict[str, Any]:
    """The live meter's figures from the context's message count and estimated tokens: the
    one place the window, threshold and percent are worked out, whether the count and the
    estimate come from a parsed route (:func:`context_figures`) or from the route figures
    stored with the leaf (``queries.live.projection_summary``)."""
    return {
        "leaf_id": leaf_id,
        "messages": messages,
        "tokens": tokens,
        "window": window,
        "threshold": max(window - reserve, 0),
        "percent": min(100, round(100 * tokens / window)) if window else 0,
    }
