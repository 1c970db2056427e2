"""Every compaction on the path: its summary beside what it replaced, and what survived."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.http import Http404, HttpResponse, QueryDict
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
DETAIL_PARTIAL = f"{TEMPLATE}#compaction-detail"
BRANCH_PARTIAL = f"{TEMPLATE}#branch-detail"
LIST_SHOWN = 10  # the newest compactions listed at first; older ones on request


def compactions_panel(
    request: HtmxHttpRequest, session, cursor: str | None
) -> tuple[dict[str, Any], Callable[[], dict[str, Any] | None]]:
    """The route's compactions (and the stretch of them listed), with a builder of the
    chosen one's detail.

    Nothing here is kept between requests: the list reads the route's marks (its
    compactions and branch summaries by depth, :func:`queries.compaction_route`: a placed
    route is not read whole) and its compaction lines, the detail only the window of
    entries it lists (``rbefore``, ``kafter``, ``limit``: :func:`queries.detail_windows`).
    The detail is built only when asked."""
    asked = request.GET.get("c") or None
    route = queries.compaction_route(session, cursor)
    listed = queries.route_compactions(session, route)
    branch_asked = bool(request.GET.get("b"))
    chosen = asked or (listed[-1]["id"] if listed and not branch_asked else None)
    items = [{**c, "chosen": c["id"] == chosen} for c in listed]
    picked = next((c for c in items if c["chosen"]), None)
    detail = functools.cache(lambda: _detail(request, session, route, picked))  # once if asked
    panel = {
        "compactions": items,
        **_list_window(items, request.GET.get("older")),
        "branch_summaries": queries.route_branch_summaries(route),
        "chosen_branch": request.GET.get("b") or None,
        "route": route,
    }
    return panel, detail


def branch_detail(session, route, summary_id: str) -> dict[str, Any] | None:
    """A branch summary on the route beside the route it summarised (None: not on it).
    It reads the route whole (the summarised route is compared with it)."""
    found = queries.branch_summary_detail(session, route.whole(), summary_id)
    if found is None:
        return None
    return {**found, "summary_html": render_markdown(found["summary"] or "")}


def _detail(
    request: HtmxHttpRequest, session, route, picked: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The detail of ``picked`` (an item of the list, None: no compaction chosen) with the
    windows of its lists the request asks for, as the partial and the JSON answer read it."""
    if picked is None:
        return None
    q = request.GET
    big = 2**31 - 1
    detail = dict(
        queries.compaction_detail(
            session,
            route,
            picked,
            replaced_before=params.int_param(q.get("rbefore"), big, 0, big)
            if q.get("rbefore")
            else None,
            kept_after=params.int_param(q.get("kafter"), 0, 0, big),
            limit=params.int_param(
                q.get("limit"), queries.DETAIL_WINDOW, 1, queries.DETAIL_WINDOW_MAX
            ),
        )
    )
    detail["summary_html"] = render_markdown(detail["figures"]["summary"] or "")
    detail["item"] = picked
    detail["kept_left"] = detail["kept_count"] - detail["kept_to"]
    detail["replaced_more"] = _more_query(request, picked["id"], "rbefore", detail["replaced_from"])
    detail["kept_more"] = _more_query(request, picked["id"], "kafter", detail["kept_to"])
    return detail


def _more_query(request: HtmxHttpRequest, chosen: str, name: str, value: int) -> str:
    """The request's query asking for the next window of one list (``name=value``)."""
    query = QueryDict(mutable=True)
    query[name] = str(value)  # first: a list item's own link is the one starting "?c="
    for key in ("leaf", "limit"):  # what else the window depends on: nothing more
        if request.GET.get(key):
            query[key] = request.GET[key]
    query["c"] = chosen
    return query.urlencode()


def _list_window(items: list[dict[str, Any]], older: str | None) -> dict[str, Any]:
    """The part of the list the page shows (``older=``: "show older" asked, see
    :func:`list_window`)."""
    n = len(items)
    before = None if older in (None, "all") else params.int_param(older, n, 0, n)
    chosen = next((k for k, c in enumerate(items) if c["chosen"]), None)
    lo, hi = list_window(n, LIST_SHOWN, chosen=chosen, before=before, every=older == "all")
    return {"shown_compactions": items[lo:hi], "older_count": lo, "older_page": min(lo, LIST_SHOWN)}


def _json_data(request: HtmxHttpRequest, ctx: dict[str, Any], cursor: str | None) -> dict[str, Any]:
    """The JSON answer: every compaction of the route (not only the listed stretch), and the
    chosen one's detail with its figures instead of rendered HTML; its replaced and kept
    lists are windows, ``replaced_next`` / ``kept_next`` the addresses of the next ones
    (None when the list is done)."""
    links = {}
    if ctx["detail"]:
        d = ctx["detail"]

        def link(query: str, more: bool) -> str | None:
            url = f"{request.path}?{query}&format=json"
            return request.build_absolute_uri(url) if more else None

        links = {
            "replaced_next": link(d["replaced_more"], d["replaced_from"] > 0),
            "kept_next": link(d["kept_more"], d["kept_left"] > 0),
        }
    detail = dict(ctx["detail"] or {})
    figures = detail.pop("figures", None)
    for name in ("summary_html", "kept_left", "replaced_more", "kept_more"):
        detail.pop(name, None)
    if figures is not None:
        for name in ("summary", "tokens_before", "tokens_after", "read_files", "modified_files"):
            detail[name] = figures[name]
        detail["recorded_context"] = figures.get("recorded")  # Codex: read from the file
    listed = [
        {k: v for k, v in c.items() if k not in ("start", "first_kept_index")}
        for c in ctx["compactions"]
    ]
    if "item" in detail:
        detail["item"] = next(c for c in listed if c["id"] == detail["item"]["id"])
    previous = detail.pop("previous", None)
    if detail:
        detail["previous"] = None
    detail.update(links)
    if previous is not None:
        detail["previous"] = {
            "id": previous["id"],
            "diff": [{"op": op, "text": text} for op, text in previous["diff"]],
            "dropped": [
                {"kind": i.kind, "value": i.value, "partial": i.partial} for i in previous["lost"]
            ],
            "references": previous["dropped"].total,
        }
    branch = ctx.get("branch_detail")
    if branch is not None:
        branch = {k: v for k, v in branch.items() if k != "summary_html"}
    return {
        "cursor": cursor,
        "compactions": listed,
        "branch_summaries": ctx["branch_summaries"],
        "detail": detail or None,
        "branch_summary": branch,
    }


@viewer_required
@require_GET
def compactions_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "compactions", cursor)
    panel, detail_of = compactions_panel(request, session, cursor)
    route = panel.pop("route")
    ctx.update(panel)
    chosen_branch = panel["chosen_branch"]
    if chosen_branch is not None and chosen_branch not in panel["branch_summaries"]:
        raise Http404("No such branch summary on this route")
    if wants_json(request):
        ctx["detail"] = detail_of() if chosen_branch is None else None
        if chosen_branch is not None:
            ctx["branch_detail"] = branch_detail(session, route, chosen_branch)
        return json_page(plain(_json_data(request, ctx, cursor)))
    if request.GET.get("older") not in (None, "all") and request.htmx:
        return render_panel(request, TEMPLATE, "comp-older", ctx)
    shown = next((c["id"] for c in panel["compactions"] if c["chosen"]), None)
    if chosen_branch is not None:
        # Kept below the branch summary: the route it summarised never changes.
        ctx["detail_html"] = shared_fragment(
            session,
            "branch-1",
            BRANCH_PARTIAL,
            lambda: {"session": session, "bdetail": branch_detail(session, route, chosen_branch)},
            below=chosen_branch,
        )
    elif shown is not None:
        ctx["detail"] = detail_of()  # only the windows it lists are read: nothing kept
        partial = request.GET.get("partial")
        if partial in ("replaced-rows", "kept-rows") and request.htmx:  # an "N more" control
            return render_panel(request, TEMPLATE, partial, ctx)
    else:
        ctx["none_on_route"] = not panel["compactions"]  # nothing to choose: say so
        ctx["detail"] = None
    return render_panel(request, TEMPLATE, "compaction-detail", ctx)
