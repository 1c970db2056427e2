"""The Compactions tab: the compactions and branch summaries of a route and the detail of
each (what it replaced, the summary before it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from explorer import codex_context, route_store, survival_store
from explorer.analysis.line_texts import kept_row, listed_row
from explorer.line_text_store import LineTexts, stored_texts
from explorer.models import Session
from explorer.queries.compaction_reads import CompactionRoute, as_route
from explorer.queries.entries import load_entries
from explorer.queries.keep import kept_below
from explorer.queries.routes import LightEntry, entry_exists, light_path

if TYPE_CHECKING:
    from explorer.analysis.compactions import SurvivalReport

# ---------------------------------------------------------------------------------------------
# Compactions on a route

REPLACED_SHOWN = 150  # the newest replaced entries checked against the summary
DETAIL_WINDOW = 150  # replaced or kept entries listed at once; the rest a window at a time
DETAIL_WINDOW_MAX = 1000  # the largest window a reader may ask for
_BRANCH_SUMMARY_DETAIL = "branch-summary-detail-1"


def route_compactions(
    session: Session, route: CompactionRoute | Sequence[LightEntry]
) -> list[dict[str, Any]]:
    """Every compaction on ``route`` (as :func:`.compaction_reads.compaction_route` reads it,
    or a walked route's index rows), oldest first, as the Compactions tab lists it.

    Read from the route's marks (its compactions by depth), the compaction lines
    themselves, which are the only bodies parsed, and the depths of their first kept
    entries: what each replaced is counted from the compactions' depths, so a placed
    route's other entries are not read. Nothing is kept between requests, since a route's
    compactions are a handful of short lines whatever the session's size.
    """
    from explorer.analysis.compactions import extend_compaction_ranges, kept_count, replaced_count

    route = as_route(route)
    comps = [m for m in route.marks if m.type == "compaction"]
    if not comps:
        return []
    data = load_entries(session, [m.entry_id for m in comps])
    fks = [(m.depth, data.get(m.entry_id, {}).get("firstKeptEntryId")) for m in comps]
    index = route.depths_of(fk for _d, fk in fks)
    ranges, _start = extend_compaction_ranges(fks, index, 0)
    depths = [m.depth for m in comps]
    items: list[dict[str, Any]] = []
    for m, (ci, begin, fk) in zip(comps, ranges, strict=True):
        comp = data.get(m.entry_id, {})
        items.append(
            {
                "id": m.entry_id,
                "index": ci,
                "start": begin,
                "first_kept_index": fk,
                "replaced_count": replaced_count((ci, begin, fk), depths),
                "kept_count": kept_count((ci, begin, fk)),
                "tokens_before": comp.get("tokensBefore"),
                "first_kept": comp.get("firstKeptEntryId"),
                "off_path": fk is None and comp.get("firstKeptEntryId") != m.entry_id,
                "timestamp": comp.get("timestamp", ""),
            }
        )
    return items


def detail_windows(
    item: dict[str, Any],
    *,
    replaced_before: int | None = None,
    kept_after: int = 0,
    limit: int = DETAIL_WINDOW,
) -> dict[str, int]:
    """The windows of a compaction's two lists a request shows: the replaced entries
    ``[replaced_from, replaced_to)`` (the newest ``limit`` before ``replaced_before``, the
    newest of all unless asked) and the kept ones ``[kept_from, kept_to)`` (``limit`` from
    ``kept_after``). Positions count within each list, oldest first."""
    n_replaced, n_kept = item["replaced_count"], item["kept_count"]
    hi = n_replaced if replaced_before is None else max(0, min(replaced_before, n_replaced))
    lo = max(0, min(kept_after, n_kept))
    return {
        "replaced_from": max(0, hi - limit),
        "replaced_to": hi,
        "kept_from": lo,
        "kept_to": min(n_kept, lo + limit),
    }


def compaction_detail(
    session: Session,
    route: CompactionRoute | Sequence[LightEntry],
    item: dict[str, Any],
    *,
    replaced_before: int | None = None,
    kept_after: int = 0,
    limit: int = DETAIL_WINDOW,
) -> dict[str, Any]:
    """One compaction (an item of :func:`route_compactions` on ``route``) beside a window
    of what it replaced and kept (:func:`detail_windows`), with the survival check.

    Only the entries listed, the newest replaced ones the check reads, the compaction and
    the one before it are parsed, and of a placed route only their rows are read (by
    depth). "Tokens after" is the route figure stored with the compaction (the engine's
    estimate there, ``pisession context --leaf``); a Codex compaction carrying the context
    its agent recorded is estimated from that context and the kept entries instead
    (:func:`explorer.analysis.recorded.projection_of`)."""
    from explorer.analysis.compactions import kept_indices, replaced_window, survival_of
    from explorer.analysis.projection import projected_context_tokens
    from explorer.analysis.recorded import recorded_of
    from explorer.session.describe import finite

    route = as_route(route)
    ci, start, fk = item["index"], item["start"], item["first_kept_index"]
    rng = (ci, start, fk)
    depths = [m.depth for m in route.marks if m.type == "compaction"]
    mark = next(m for m in route.marks if m.depth == ci)
    n_replaced = item["replaced_count"]
    win = detail_windows(item, replaced_before=replaced_before, kept_after=kept_after, limit=limit)
    listed_replaced = replaced_window(rng, depths, win["replaced_from"], win["replaced_to"])
    listed_kept = list(kept_indices(rng)[win["kept_from"] : win["kept_to"]])
    row = survival_store.stored_check(session, mark.pk)
    stored_report = row.report if row is not None else None
    checked = (
        replaced_window(rng, depths, n_replaced - REPLACED_SHOWN, n_replaced)
        if stored_report is None
        else []
    )
    ids = {d: eid for d, (eid, _pk) in route.at({*listed_replaced, *listed_kept, *checked}).items()}
    ids[ci] = mark.entry_id
    # A listed multi-MB line shows the texts stored with it (``line_text_store``): its line
    # is read only for the check, when that is not stored either.
    texts = stored_texts(session, [ids[j] for j in (*listed_replaced, *listed_kept)])
    listed = [j for j in (*listed_replaced, *listed_kept) if ids[j] not in texts]
    wanted = {*listed, ci, *checked}
    data = load_entries(session, [ids[j] for j in sorted(wanted)])
    comp = data.get(mark.entry_id, {})
    summary = comp.get("summary")
    summary = summary if isinstance(summary, str) else None
    if recorded_of(comp) is not None:  # a Codex compaction: its recorded context
        kept_ids = [eid for _d, (eid, _pk) in sorted(route.at(kept_indices(rng)).items())]
        head = load_entries(session, kept_ids)
        kept_route = [head[eid] for eid in kept_ids if eid in head]
        tokens_after = projected_context_tokens([*kept_route, comp])
    else:
        stored = route_store.figures_at(session, mark.entry_id)
        tokens_after = int(finite(stored.context_tokens)) if stored is not None else 0
    details = comp.get("details") if isinstance(comp.get("details"), dict) else {}

    def paths(name: str) -> list[str]:
        value = details.get(name)
        return [p for p in value if isinstance(p, str)] if isinstance(value, list) else []

    return {
        "figures": {
            "id": comp.get("id"),
            "first_kept": comp.get("firstKeptEntryId"),
            "summary": summary,
            "tokens_before": finite(comp.get("tokensBefore")),
            "tokens_after": tokens_after,
            "read_files": paths("readFiles"),
            "modified_files": paths("modifiedFiles"),
            "off_path": item["off_path"],
            **codex_context.recorded_figures(comp),  # a Codex compaction's history
        },
        "replaced": _rows([ids[j] for j in listed_replaced], data, texts),
        "kept": _rows([ids[j] for j in listed_kept], data, texts, kept=True),
        **win,
        "replaced_count": n_replaced,
        "kept_count": item["kept_count"],
        "hidden_before": win["replaced_from"],  # replaced entries before the window
        "checked_count": min(n_replaced, REPLACED_SHOWN),
        "unchecked_count": max(0, n_replaced - REPLACED_SHOWN),  # older than the check reads
        "report": stored_report
        if stored_report is not None
        else survival_of([data[ids[j]] for j in checked if ids[j] in data], summary or ""),
        "previous": row.previous
        if row is not None and row.previous is not survival_store.NOT_STORED
        else compare_summaries(database_reads(session).lines, route.whole(), ci, summary or ""),
    }


def _rows(
    ids: Sequence[str],
    data: dict[str, dict],
    texts: dict[str, LineTexts],
    *,
    kept: bool = False,
) -> list[dict[str, Any]]:
    """The listed rows of the entries ``ids``: from their stored texts, else from their
    parsed lines (``data``; a line that did not parse to an object is left out)."""
    out: list[dict[str, Any]] = []
    for eid in ids:
        stored = texts.get(eid)
        if stored is not None:
            out.append(stored.kept if kept else stored.listed)
        elif eid in data:
            out.append(kept_row(data[eid]) if kept else listed_row(data[eid]))
    return out


@dataclass(frozen=True)
class CheckReads:
    """What a survival check reads: the lines of some entries (parsed and masked as a page
    reads them, without a Codex compaction's recorded context, which the check does not
    read), the route ending at an entry (``light_path``'s rows) and whether an entry is
    stored. An append and the page ask the database each time (:func:`database_reads`); an
    import's end, checking every compaction of a session, reads the session's index rows
    once and walks each route in memory (``explorer.survival_batch``), with the same
    answers."""

    lines: Callable[[Iterable[str]], dict[str, dict]]
    route: Callable[[str], list[LightEntry]]
    exists: Callable[[str], bool]


def database_reads(session: Session) -> CheckReads:
    """:class:`CheckReads` asking the database each time (one check: an append, the page)."""
    return CheckReads(
        lines=lambda ids: load_entries(session, ids, recorded=False),
        route=lambda entry_id: light_path(session, entry_id),
        exists=lambda entry_id: entry_exists(session, entry_id),
    )


def compaction_check(
    session: Session, light: Sequence[LightEntry], reads: CheckReads | None = None
) -> SurvivalReport | None:
    """The survival check of the compaction ending the route ``light``, as
    :func:`compaction_detail` computes it when none is stored (None: not a compaction).
    Its range is :func:`route_compactions`'s; the lines are read without a Codex
    compaction's recorded context, which the check does not read (a write path calls it).
    ``reads``: where the lines come from (the database by default)."""
    from explorer.analysis.compactions import (
        extend_compaction_ranges,
        replaced_indices,
        survival_of,
    )

    lines_of = (reads or database_reads(session)).lines
    types = [e.type for e in light]
    comps = [i for i, t in enumerate(types) if t == "compaction"]
    if not comps or comps[-1] != len(light) - 1:
        return None
    data = lines_of([light[i].entry_id for i in comps])
    index = {e.entry_id: i for i, e in enumerate(light)}
    fks = [(ci, data.get(light[ci].entry_id, {}).get("firstKeptEntryId")) for ci in comps]
    ranges, _start = extend_compaction_ranges(fks, index, 0)
    checked = replaced_indices(types, ranges[-1])[-REPLACED_SHOWN:]
    lines = lines_of([light[j].entry_id for j in checked])
    summary = data.get(light[-1].entry_id, {}).get("summary")
    entries = [lines[light[j].entry_id] for j in checked if light[j].entry_id in lines]
    return survival_of(entries, summary if isinstance(summary, str) else "")


def compare_summaries(
    lines_of: Callable[[Iterable[str]], dict[str, dict]],
    light: Sequence[LightEntry],
    ci: int,
    summary: str,
) -> dict[str, Any] | None:
    """The compaction at ``ci`` on the route ``light`` (its summary ``summary``) beside the
    compaction before it on the route: a word diff and the references of the earlier summary
    that this one dropped (None: no compaction before it). ``lines_of`` reads lines masked as
    a page shows them (:class:`CheckReads`).

    Both summaries lie above the compaction, so the answer never changes: it is stored with
    the compaction's survival check when the compaction arrives (``survival_writer``), and a
    page computes it only for a row stored without it."""
    from explorer.analysis.summary_diff import dropped_references, word_diff

    prev = next((j for j in range(ci - 1, -1, -1) if light[j].type == "compaction"), None)
    if prev is None:
        return None
    entry = lines_of([light[prev].entry_id]).get(light[prev].entry_id, {})
    before = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
    report = dropped_references(before, summary, (e.entry_id for e in light[: ci + 1]))
    return {
        "id": light[prev].entry_id,
        "diff": word_diff(before, summary),
        "dropped": report,
        "lost": [i for i in report.items if not i.survived],
    }


def route_branch_summaries(route: CompactionRoute | Sequence[LightEntry]) -> list[str]:
    """Ids of the branch summaries on ``route`` (as :func:`route_compactions` takes it),
    oldest first."""
    return [m.entry_id for m in as_route(route).marks if m.type == "branch_summary"]


def branch_summary_detail(
    session: Session, light: Sequence[LightEntry], summary_id: str
) -> dict[str, Any] | None:
    """A branch summary on ``light`` beside the route it summarised (from its ``fromId`` up
    to the common ancestor with the route it was left on), with the survival check
    compactions have. The summarised route was written before the summary and never
    changes, so the detail is kept below the summary. None: not a
    branch summary on this route."""
    index = next((i for i, e in enumerate(light) if e.entry_id == summary_id), None)
    if index is None or light[index].type != "branch_summary":
        return None
    return kept_below(
        session,
        _BRANCH_SUMMARY_DETAIL,
        summary_id,
        lambda: _branch_summary_detail(session, light[: index + 1]),
    )


def branch_summary_check(
    session: Session, route: Sequence[LightEntry], reads: CheckReads | None = None
) -> SurvivalReport | None:
    """The survival check of the branch summary ending ``route``, as its detail computes it
    when none is stored (None: not to be stored, since the route it summarised, from its
    ``fromId``, is not all stored yet). ``reads``: as for :func:`compaction_check`."""
    reads = reads or database_reads(session)
    return _branch_summary_detail(session, route, computed=True, reads=reads).get("report")


def _branch_summary_detail(
    session: Session,
    route: Sequence[LightEntry],
    *,
    computed: bool = False,
    reads: CheckReads | None = None,
) -> dict[str, Any]:
    """``computed``: the check alone, for storing, read through ``reads``; else the page's
    detail, read from the database."""
    from explorer.analysis.compactions import survival_of

    ask = reads or CheckReads(
        lines=lambda ids: load_entries(session, ids, recorded=not computed),
        route=lambda entry_id: light_path(session, entry_id),
        exists=lambda entry_id: entry_exists(session, entry_id),
    )
    summary_id = route[-1].entry_id
    entry = ask.lines([summary_id]).get(summary_id, {})
    summary = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
    from_id = entry.get("fromId") if isinstance(entry.get("fromId"), str) else ""
    known = not from_id or ask.exists(from_id)
    left = ask.route(from_id) if from_id and known else []
    on_route = {e.entry_id for e in route}
    common = max((k for k, e in enumerate(left) if e.entry_id in on_route), default=-1)
    summarised = left[common + 1 :]
    shown = summarised[-REPLACED_SHOWN:]
    stored = None if computed else survival_store.stored_report(session, route[-1].pk)
    # With the check stored, a multi-MB line listed shows its stored texts, unread.
    texts = stored_texts(session, [e.entry_id for e in shown]) if stored is not None else {}
    data = ask.lines([e.entry_id for e in shown if e.entry_id not in texts])
    entries = [data[e.entry_id] for e in shown if e.entry_id in data]
    if computed:  # the check alone, for storing
        return (
            {"report": survival_of(entries, summary, (e.entry_id for e in left))} if known else {}
        )
    return {
        "id": summary_id,
        "from_id": from_id or None,
        "common_ancestor": left[common].entry_id if common >= 0 else None,
        "summary": summary,
        "summarised": _rows([e.entry_id for e in shown], data, texts),
        "summarised_count": len(summarised),
        "hidden_before": len(summarised) - len(shown),
        "report": stored
        if stored is not None
        else survival_of(entries, summary, (e.entry_id for e in left)),
    }
