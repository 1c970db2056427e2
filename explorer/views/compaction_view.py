"""Every compaction on the path: its summary beside what it replaced, and what survived."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from explorer import params, queries
from explorer.analysis.compactions import list_window
from explorer.permissions import get_session_for_user, viewer_required
from explorer.rendering import render_markdown
from explorer.views.common import (
    HtmxHttpRequest,
    render_panel,
    resolve_cursor,
    session_frame,
    shared_fragment,
)
from explorer.views.jsonapi import json_page, plain, wants_json

TEMPLATE = "explorer/compactions.html"
LIST_SHOWN = 10  # the newest compactions listed at first; older ones on request


def compactions_panel(request: HtmxHttpRequest, session, cursor: str | None) -> dict[str, Any]:
    chosen = request.GET.get("c") or ""
    panel = queries.cached(
        session,
        f"compactions:{cursor or ''}:{chosen}",
        lambda: _compactions(session, cursor, chosen or None),
    )
    return {**panel, **_list_window(panel["compactions"], request.GET.get("older"))}


def _compactions(session, cursor: str | None, asked: str | None) -> dict[str, Any]:
    light = queries.light_path(session, cursor)
    listed = queries.route_compactions(session, light)
    chosen = asked or (listed[-1]["id"] if listed else None)
    items = [{**c, "chosen": c["id"] == chosen} for c in listed]
    detail = None
    picked = next((c for c in items if c["chosen"]), None)
    if picked is not None:
        detail = dict(queries.compaction_detail(session, light, picked))
        detail["summary_html"] = render_markdown(detail.pop("summary"))
        detail["item"] = picked
    return {"compactions": items, "detail": detail}


def _list_window(items: list[dict[str, Any]], older: str | None) -> dict[str, Any]:
    """The part of the list the page shows (``older=``: "show older" asked, see
    :func:`list_window`)."""
    n = len(items)
    before = None if older in (None, "all") else params.int_param(older, n, 0, n)
    chosen = next((k for k, c in enumerate(items) if c["chosen"]), None)
    lo, hi = list_window(n, LIST_SHOWN, chosen=chosen, before=before, every=older == "all")
    return {"shown_compactions": items[lo:hi], "older_count": lo, "older_page": min(lo, LIST_SHOWN)}


def _json_data(ctx: dict[str, Any], cursor: str | None) -> dict[str, Any]:
    """The JSON answer: every compaction of the route (not only the listed stretch), and the
    chosen one's detail with its figures instead of rendered HTML."""
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
    listed = [
        {k: v for k, v in c.items() if k not in ("start", "first_kept_index")}
        for c in ctx["compactions"]
    ]
    if "item" in detail:
        detail["item"] = next(c for c in listed if c["id"] == detail["item"]["id"])
    return {"cursor": cursor, "compactions": listed, "detail": detail or None}


@viewer_required
@require_GET
def compactions_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "compactions", cursor)
    ctx.update(compactions_panel(request, session, cursor))
    if wants_json(request):
        return json_page(plain(_json_data(ctx, cursor)))
    if request.GET.get("older") not in (None, "all") and request.htmx:
        return render_panel(request, TEMPLATE, "comp-older", ctx)
    # The detail is the same for every reader: drawn once per compaction (it shows only
    # what lies above the compaction, which appends do not change), or, when the route has
    # none, once per cursor and session version.
    detail = {"session": session, "detail": ctx["detail"]}
    partial = f"{TEMPLATE}#compaction-detail"
    if ctx["detail"] is not None:
        shown = ctx["detail"]["item"]["id"]
        ctx["detail_html"] = shared_fragment(session, "detail-2", partial, detail, below=shown)
    else:
        name = f"{cursor or ''}:{request.GET.get('c') or ''}"
        ctx["detail_html"] = shared_fragment(session, name, partial, detail)
    return render_panel(request, TEMPLATE, "compaction-detail", ctx)
