"""A route read as a conversation: a window of the route around an entry, pages loaded
on scroll, branch switchers, compaction cards, edits marked inline, find-in-route.

The route is known only as a cached :class:`explorer.queries.RouteMap` (ids and types);
raw lines are read for the entries of the window being shown, so a 50,000-entry route
opens as fast as a short one.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from explorer import forms, html, queries, read_marks
from explorer.analysis.compactions import replaced_indices
from explorer.items import Reader, window_html
from explorer.items import transcript_url as _url
from explorer.permissions import can_edit_model, get_session_for_user, viewer_required
from explorer.session.describe import (
    entry_message,
    entry_title,
    kind_name,
)
from explorer.views.common import HtmxHttpRequest, render_panel, resolve_cursor, session_frame
from explorer.views.jsonapi import json_page, wants_json

TEMPLATE = "explorer/transcript.html"
PAGE = 60  # entries per window page
REPLACED_LIST = 300  # entries listed when a compaction card is expanded


def reader_of(request: HtmxHttpRequest, session, cursor_entry: str | None) -> Reader:
    """What the window's rows show for this reader alone (see :class:`items.Reader`)."""
    return Reader(
        editable=can_edit_model(request.user, session),
        cursor_entry=cursor_entry,
        csrf_token=get_token(request),
        move_url=reverse("explorer:transcript_cursor", args=[session.pk]),
    )


def _page(session, rmap, start: int, end: int, target, leaf_q, reader: Reader) -> dict[str, Any]:
    """One window page with what the sentinels before and after it need. A page that ends
    at the tip of the reader's own route also asks for arrivals (``tail``): appends there
    move the cursor along (``services.follow_appends``), so they extend this route. The
    page and its htmx pages draw their rows through the one :func:`items.window_html`."""
    n = len(rmap.ids)
    if not n:  # a header-only session: nothing to page through
        return {"rows_html": "", "earlier": 0, "later": 0}
    at_tip = end == n and not leaf_q
    rows = window_html(session, rmap, start, end, target=target, leaf_q=leaf_q, reader=reader)
    return {
        "tail_url": _url(session, after=rmap.ids[-1], tail="1") if at_tip else "",
        "rows_html": rows,
        "earlier": start,
        "later": n - end,
        "earlier_url": _url(session, leaf=rmap.leaf, before=rmap.ids[start]) if start else "",
        "later_url": _url(session, leaf=rmap.leaf, after=rmap.ids[end - 1]) if end < n else "",
        "earlier_link": _url(session, leaf=leaf_q, entry=rmap.ids[max(0, start - 1)]),
        "later_link": _url(session, leaf=leaf_q, entry=rmap.ids[min(n - 1, end)]) if end < n else "",
    }  # fmt: skip


def transcript_context(request: HtmxHttpRequest, session) -> dict[str, Any]:
    """The page: frame, the route's window around the target, find hits, cursor notice."""
    via = request.GET.get("via") or ""
    if via and not queries.entry_exists(session, via):
        raise Http404("No such entry")
    viewing = None
    if via:
        viewing = queries.newest_leaf_under(session, via)
    elif request.GET.get("leaf") and queries.entry_exists(session, request.GET["leaf"]):
        viewing = request.GET["leaf"]
    cursor = queries.cursor_id(session, request.user)
    leaf = viewing or resolve_cursor(request, session)
    ctx = session_frame(request, session, "transcript", leaf)
    rmap = queries.route_map(session, leaf)
    needle = (request.GET.get("q") or "").strip()[:200]
    hits = queries.route_find(session, leaf, needle) if needle else []
    hits = list(dict.fromkeys(hits))
    target = via or request.GET.get("entry") or ""
    if target and rmap.index(target) is None:
        target = ""
    if not target and hits:
        target = hits[0]
    n = len(rmap.ids)
    ti = rmap.index(target) if target else (n - 1 if n else None)
    start = max(0, (ti or 0) - PAGE // 2) if target else max(0, n - PAGE)
    end = min(n, start + PAGE)
    newer, tip = queries.newer_than(session, leaf)
    hit_i = hits.index(target) if target in hits else -1
    ctx.update(
        _page(session, rmap, start, end, target, viewing, reader_of(request, session, cursor))
    )
    ctx["new_ids"] = read_marks.new_ids(session, ctx["seen"].mark, rmap.ids[start:end])
    ctx.update({
        "window_ids": rmap.ids[start:end], "window_types": rmap.types[start:end],
        "route_length": n, "leaf": leaf, "viewing": viewing, "cursor_entry": cursor,
        "on_cursor": leaf == cursor, "target": target, "newer": newer, "tip": tip,
        "tip_url": _url(session, leaf=tip) if viewing else _url(session),
        "needle": needle, "hits": len(hits), "hit_pos": hit_i + 1,
        "hit_prev": _url(session, leaf=viewing, q=needle, entry=hits[hit_i - 1]) if hit_i > 0 else "",
        "hit_next": _url(session, leaf=viewing, q=needle, entry=hits[hit_i + 1]) if 0 <= hit_i < len(hits) - 1 else "",
        "move_url": reverse("explorer:transcript_cursor", args=[session.pk]),
    })  # fmt: skip
    return ctx


@viewer_required
@require_GET
def transcript_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The Transcript tab; its htmx pages (``before=`` / ``after=`` an entry) and a
    compaction's replaced entries (``replaced=``) are partials of the same template."""
    session = get_session_for_user(request, pk)
    before, after = request.GET.get("before"), request.GET.get("after")
    replaced = request.GET.get("replaced")
    if before or after or replaced:
        leaf = resolve_cursor(request, session)
        rmap = queries.route_map(session, leaf)
        ctx = session_frame(request, session, "transcript", leaf)
        if replaced:
            ctx.update(_replaced(session, rmap, replaced))
            return render_panel(request, TEMPLATE, "replaced-list", ctx)
        i = rmap.index(before or after)
        tail = bool(request.GET.get("tail"))
        if tail and (i is None or i + 1 >= len(rmap.ids)):
            return HttpResponse(status=204)  # nothing new at the tip (or the cursor moved on)
        if i is None:
            raise Http404("That entry is not on this route")
        start, end = (max(0, i - PAGE), i) if before else (i + 1, min(len(rmap.ids), i + 1 + PAGE))
        viewing = leaf if request.GET.get("leaf") else None
        cursor = queries.cursor_id(session, request.user)
        ctx.update(
            _page(session, rmap, start, end, None, viewing, reader_of(request, session, cursor))
        )
        ctx["later" if before else "earlier"] = 0  # only the side being read grows
        if before:
            ctx["tail_url"] = ""
        ctx["cursor_entry"] = cursor
        ctx["move_url"] = reverse("explorer:transcript_cursor", args=[session.pk])
        return render_panel(request, TEMPLATE, "transcript-page", ctx)
    ctx = transcript_context(request, session)
    if wants_json(request):
        return json_page(transcript_json(ctx))
    return render_panel(request, TEMPLATE, None, ctx)


def transcript_json(ctx: dict[str, Any]) -> dict[str, Any]:
    """The page's window as data: which entries it shows (ids and types, in route order),
    where the window sits on the route, the find hits and the cursor."""
    entries = [
        {"id": i, "type": t} for i, t in zip(ctx["window_ids"], ctx["window_types"], strict=True)
    ]
    keys = (
        "leaf", "viewing", "cursor_entry", "on_cursor", "route_length", "earlier", "later",
        "target", "needle", "hits", "hit_pos", "newer", "tip",
    )  # fmt: skip
    data = {k: ctx.get(k) for k in keys}
    return {**data, "target": data["target"] or None, "entries": entries}


def _replaced(session, rmap: queries.RouteMap, comp_id: str) -> dict[str, Any]:
    """The entries a compaction on this route replaced, one line each (first ones only)."""
    i = rmap.index(comp_id)
    rng = next((r for r in rmap.compactions if r[0] == i), None) if i is not None else None
    if rng is None:
        raise Http404("No such compaction on this route")
    ids = [rmap.ids[j] for j in replaced_indices(rmap.types, rng)]
    data = queries.load_entries(session, ids[:REPLACED_LIST])
    leaf_q = rmap.leaf
    rows = [
        {"id": eid, "dom": html.dom_id(eid), "title": entry_title(data.get(eid, {}), 140),
         "role": kind_name((entry_message(data.get(eid, {})) or {}).get("role") or data.get("type", "")),
         "url": _url(session, leaf=leaf_q, entry=eid) + f"#e-{html.dom_id(eid)}"}
        for eid in ids[:REPLACED_LIST]
    ]  # fmt: skip
    return {"replaced_rows": rows, "replaced_more": max(0, len(ids) - REPLACED_LIST)}


@viewer_required
@require_POST
def move_cursor_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Move your own cursor (any role: it appends nothing), then read from there."""
    session = get_session_for_user(request, pk)
    form = forms.CursorForm(
        request.POST, session=session, user=request.user, cursor=None, target_entry=None
    )
    note = form.perform()
    for text in [note] if note else form.error_messages():
        (messages.success if note else messages.error)(request, text)
    if not note:
        return redirect(_url(session))
    target = form.cleaned_data["target"]
    return redirect(_url(session, entry=target) + f"#e-{html.dom_id(target)}")
