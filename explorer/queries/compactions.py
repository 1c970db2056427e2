"""The Compactions tab: the compactions and branch summaries of a route and the detail of
each (what it replaced, the summary before it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.core.cache import cache

from explorer import codex_context
from explorer.models import Session
from explorer.queries.entries import load_entries
from explorer.queries.keep import TREE_CACHE_SECONDS, _upto_key, kept_below, mask_key
from explorer.queries.routes import LightEntry, default_leaf_id, entry_exists, light_path
from explorer.session.describe import entry_title


def opening_compaction(session: Session) -> tuple[list[LightEntry], dict[str, Any]] | None:
    """The default route and its newest compaction (an item of :func:`route_compactions`),
    which the Compactions tab opens on; None when the route has none."""
    light = light_path(session, default_leaf_id(session))
    listed = route_compactions(session, light)
    return (light, listed[-1]) if listed else None


# ---------------------------------------------------------------------------------------------
# Compactions on a route

REPLACED_SHOWN = 150  # the newest replaced entries listed and checked against the summary
COMPACTIONS_LOOKBACK = 8  # kept lists looked for, newest compaction first, before a fresh build


# The kept lists' cache name; a new name whenever what an item holds changes meaning, so no
# worker reads a list kept under the old meaning (the counts of replaced entries, once).
_COMPACTIONS_UPTO = "compactions-upto-2"
# 3: "tokens after" is the engine's estimate; 4: the compaction's figures, not the entries.
_COMPACTION_DETAIL = "compaction-detail-6"  # 5: the previous summary; 6: recorded context
_BRANCH_SUMMARY_DETAIL = "branch-summary-detail-1"


def route_compactions(session: Session, light: Sequence[LightEntry]) -> list[dict[str, Any]]:
    """Every compaction on the route ``light``, oldest first, as the Compactions tab lists it.

    The list up to a compaction is kept (shared cache, per session identity) under that
    compaction's id; the list of a route is the one kept for its newest compaction, plus
    any compaction after the newest kept one. An append that adds no compaction costs a
    scan of the route's types and one cache read, whatever the number of compactions.
    """
    from explorer.analysis.compactions import (
        extend_compaction_ranges,
        kept_count,
        replaced_indices,
    )

    types = [e.type for e in light]
    comps = [i for i, t in enumerate(types) if t == "compaction"]
    if not comps:
        return []
    mask = mask_key(session)
    items: list[dict[str, Any]] = []
    start, done = 0, 0
    for j in range(len(comps) - 1, max(-1, len(comps) - 1 - COMPACTIONS_LOOKBACK), -1):
        hit = cache.get(_upto_key(session, mask, _COMPACTIONS_UPTO, light[comps[j]].entry_id))
        if hit is not None:
            items, start = list(hit[0]), hit[1]
            done = j + 1
            break
    new = comps[done:]
    if not new:
        return items
    data = load_entries(session, [light[i].entry_id for i in new])
    index = {e.entry_id: i for i, e in enumerate(light)}
    fks = [(ci, data.get(light[ci].entry_id, {}).get("firstKeptEntryId")) for ci in new]
    ranges, start = extend_compaction_ranges(fks, index, start)
    for ci, begin, fk in ranges:
        comp = data.get(light[ci].entry_id, {})
        items.append(
            {
                "id": light[ci].entry_id,
                "index": ci,
                "start": begin,
                "first_kept_index": fk,
                "replaced_count": len(replaced_indices(types, (ci, begin, fk))),
                "kept_count": kept_count((ci, begin, fk)),
                "tokens_before": comp.get("tokensBefore"),
                "first_kept": comp.get("firstKeptEntryId"),
                "off_path": fk is None and comp.get("firstKeptEntryId") != light[ci].entry_id,
                "timestamp": comp.get("timestamp", ""),
            }
        )
    cache.set(
        _upto_key(session, mask, _COMPACTIONS_UPTO, items[-1]["id"]),
        (items, start),
        TREE_CACHE_SECONDS,
    )
    return items


def compaction_detail(
    session: Session, light: Sequence[LightEntry], item: dict[str, Any]
) -> dict[str, Any]:
    """One compaction (an item of :func:`route_compactions` on ``light``) beside what it
    replaced and kept, with the survival check: kept per compaction like the list, since
    none of it changes when the route grows below the compaction."""
    return kept_below(
        session, _COMPACTION_DETAIL, item["id"], lambda: _compaction_detail(session, light, item)
    )


def _compaction_detail(
    session: Session, light: Sequence[LightEntry], item: dict[str, Any]
) -> dict[str, Any]:
    from explorer.analysis.compactions import compaction_info, survival_for

    ci, start, fk = item["index"], item["start"], item["first_kept_index"]
    end = fk if fk is not None else ci
    lo = max(start, end - REPLACED_SHOWN)
    ids = [e.entry_id for e in light[lo : ci + 1]]
    data = load_entries(session, ids)
    sub = [data[i] for i in ids if i in data]
    info = compaction_info(sub, ci - lo, 0, (fk - lo) if fk is not None else None)
    summary = info.entry.get("summary")
    return {
        # The figures the tab shows, not the whole CompactionInfo: its replaced and kept
        # entries are whole lines (300 KB for 150 of them), and this dict is pickled into
        # the cache and the stored figures by the first reader of every compaction.
        "figures": {
            "id": info.entry.get("id"),
            "first_kept": info.entry.get("firstKeptEntryId"),
            "summary": summary if isinstance(summary, str) else None,
            "tokens_before": info.tokens_before,
            "tokens_after": info.tokens_after,
            "read_files": info.read_files,
            "modified_files": info.modified_files,
            "off_path": info.off_path,
            **codex_context.recorded_figures(info.entry),  # a Codex compaction's history
        },
        "replaced": [
            {
                "id": e.get("id"),
                "type": e.get("type"),
                "title": entry_title(e, 140),
                "role": (e.get("message") or {}).get("role")
                if isinstance(e.get("message"), dict)
                else "",
            }
            for e in info.replaced
        ],
        "kept": [
            {"id": e.get("id"), "type": e.get("type"), "title": entry_title(e, 140)}
            for e in info.kept
        ],
        "hidden_before": item["replaced_count"] - len(info.replaced),
        "report": survival_for(info),
        "previous": _previous_summary(
            session, light, ci, summary if isinstance(summary, str) else ""
        ),
    }


def _previous_summary(
    session: Session, light: Sequence[LightEntry], ci: int, summary: str
) -> dict[str, Any] | None:
    """The compaction before the one at ``ci`` on the route, its summary beside this one's:
    a word diff and the references of the earlier summary that this one dropped. It lies
    above the compaction, so it belongs in the detail kept below it."""
    from explorer.analysis.summary_diff import dropped_references, word_diff

    prev = next((j for j in range(ci - 1, -1, -1) if light[j].type == "compaction"), None)
    if prev is None:
        return None
    entry = load_entries(session, [light[prev].entry_id]).get(light[prev].entry_id, {})
    before = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
    report = dropped_references(before, summary, (e.entry_id for e in light[: ci + 1]))
    return {
        "id": light[prev].entry_id,
        "diff": word_diff(before, summary),
        "dropped": report,
        "lost": [i for i in report.items if not i.survived],
    }


def route_branch_summaries(light: Sequence[LightEntry]) -> list[str]:
    """Ids of the branch summaries on the route ``light``, oldest first."""
    return [e.entry_id for e in light if e.type == "branch_summary"]


def branch_summary_detail(
    session: Session, light: Sequence[LightEntry], summary_id: str
) -> dict[str, Any] | None:
    """A branch summary on ``light`` beside the route it summarised (from its ``fromId`` up
    to the common ancestor with the route it was left on), with the survival check
    compactions have. The summarised route was written before the summary and never
    changes, so the detail is kept below the summary like a compaction's. None: not a
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


def _branch_summary_detail(session: Session, route: Sequence[LightEntry]) -> dict[str, Any]:
    from explorer.analysis.compactions import survival_of

    summary_id = route[-1].entry_id
    entry = load_entries(session, [summary_id]).get(summary_id, {})
    summary = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
    from_id = entry.get("fromId") if isinstance(entry.get("fromId"), str) else ""
    left = light_path(session, from_id) if from_id and entry_exists(session, from_id) else []
    on_route = {e.entry_id for e in route}
    common = max((k for k, e in enumerate(left) if e.entry_id in on_route), default=-1)
    summarised = left[common + 1 :]
    shown = summarised[-REPLACED_SHOWN:]
    data = load_entries(session, [e.entry_id for e in shown])
    entries = [data[e.entry_id] for e in shown if e.entry_id in data]
    return {
        "id": summary_id,
        "from_id": from_id or None,
        "common_ancestor": left[common].entry_id if common >= 0 else None,
        "summary": summary,
        "summarised": [
            {
                "id": e.get("id"),
                "type": e.get("type"),
                "title": entry_title(e, 140),
                "role": (e.get("message") or {}).get("role")
                if isinstance(e.get("message"), dict)
                else "",
            }
            for e in entries
        ],
        "summarised_count": len(summarised),
        "hidden_before": len(summarised) - len(shown),
        "report": survival_of(entries, summary, (e.entry_id for e in left)),
    }
