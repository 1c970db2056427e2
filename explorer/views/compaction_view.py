"""Every compaction on the path: its summary beside what it replaced, and what survived."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from explorer import queries
from explorer.analysis.compactions import compaction_info, compaction_ranges, survival_for
from explorer.permissions import get_session_for_user, viewer_required
from explorer.rendering import render_markdown
from explorer.session.describe import entry_title
from explorer.views.common import HtmxHttpRequest, render_panel, resolve_cursor, session_frame
from explorer.views.jsonapi import json_page, plain, wants_json

TEMPLATE = "explorer/compactions.html"
REPLACED_SHOWN = 150  # the newest replaced entries listed and checked against the summary


def compactions_panel(request: HtmxHttpRequest, session, cursor: str | None) -> dict[str, Any]:
    chosen = request.GET.get("c") or ""
    return queries.cached(
        session,
        f"compactions:{cursor or ''}:{chosen}",
        lambda: _compactions(session, cursor, chosen or None),
    )


def _compactions(session, cursor: str | None, asked: str | None) -> dict[str, Any]:
    light = queries.light_path(session, cursor)
    comps = [i for i, e in enumerate(light) if e.type == "compaction"]
    comp_data = queries.load_entries(session, [light[i].entry_id for i in comps])
    # Ranges need only ids, types and firstKeptEntryId: build them from light rows.
    stub = []
    for e in light:
        d = {"id": e.entry_id, "type": e.type}
        if e.type == "compaction":
            d["firstKeptEntryId"] = comp_data.get(e.entry_id, {}).get("firstKeptEntryId")
        stub.append(d)
    ranges = compaction_ranges(stub)
    chosen = asked or (light[ranges[-1][0]].entry_id if ranges else None)
    items = []
    detail = None
    for ci, start, fk in ranges:
        comp = comp_data.get(light[ci].entry_id, {})
        item = {
            "id": light[ci].entry_id,
            "index": ci,
            "replaced_count": (fk if fk is not None else ci) - start,
            "kept_count": (ci - fk) if fk is not None else 0,
            "tokens_before": comp.get("tokensBefore"),
            "first_kept": comp.get("firstKeptEntryId"),
            "off_path": fk is None and comp.get("firstKeptEntryId") != light[ci].entry_id,
            "timestamp": comp.get("timestamp", ""),
            "chosen": light[ci].entry_id == chosen,
        }
        items.append(item)
        if item["chosen"]:
            end = fk if fk is not None else ci
            lo = max(start, end - REPLACED_SHOWN)
            ids = [e.entry_id for e in light[lo : ci + 1]]
            data = queries.load_entries(session, ids)
            sub = [data[i] for i in ids if i in data]
            offset = lo
            info = compaction_info(sub, ci - offset, 0, (fk - offset) if fk is not None else None)
            report = survival_for(info)
            detail = {
                "info": info,
                "summary_html": render_markdown(
                    comp.get("summary") if isinstance(comp.get("summary"), str) else ""
                ),
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
                "hidden_before": lo - start,
                "report": report,
                "item": item,
            }
    return {"compactions": items, "detail": detail}


@viewer_required
@require_GET
def compactions_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "compactions", cursor)
    ctx.update(compactions_panel(request, session, cursor))
    if wants_json(request):
        detail = dict(ctx["detail"] or {})
        info = detail.pop("info", None)
        detail.pop("summary_html", None)
        if info is not None:
            summary = info.entry.get("summary")
            detail["summary"] = summary if isinstance(summary, str) else None
            detail["tokens_before"] = info.tokens_before
            detail["tokens_after"] = info.tokens_after
            detail["read_files"] = info.read_files
            detail["modified_files"] = info.modified_files
        data = {"cursor": cursor, "compactions": ctx["compactions"], "detail": detail or None}
        return json_page(plain(data))
    return render_panel(request, TEMPLATE, "compaction-detail", ctx)
