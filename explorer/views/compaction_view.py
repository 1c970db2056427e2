"""Every compaction on the path: its summary beside what it replaced, and what survived."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.http import Http404, HttpResponse
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from explorer import params, queries, stored_figures
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

    Nothing here is cached per session version: the route, the list and the detail are
    each kept as they grow (the process's routes, the list kept per compaction, the
    detail kept below its compaction), so the first request after an append pays a few
    cache reads instead of writing the whole panel again. The detail is read only when
    asked: a page shows its rendering, which is kept below the compaction as well."""
    asked = request.GET.get("c") or None
    light = queries.light_path(session, cursor)
    listed = queries.route_compactions(session, light)
    branch_asked = bool(request.GET.get("b"))
    chosen = asked or (listed[-1]["id"] if listed and not branch_asked else None)
    items = [{**c, "chosen": c["id"] == chosen} for c in listed]
    picked = next((c for c in items if c["chosen"]), None)
    detail = functools.cache(lambda: _detail(session, light, picked))  # built once if asked
    panel = {
        "compactions": items,
        **_list_window(items, request.GET.get("older")),
        "branch_summaries": queries.route_branch_summaries(light),
        "chosen_branch": request.GET.get("b") or None,
        "light": light,
    }
    return panel, detail


def branch_detail(session, light, summary_id: str) -> dict[str, Any] | None:
    """A branch summary on the route beside the route it summarised (None: not on it)."""
    found = queries.branch_summary_detail(session, light, summary_id)
    if found is None:
        return None
    return {**found, "summary_html": render_markdown(found["summary"] or "")}


def _detail(session, light, picked: dict[str, Any] | None) -> dict[str, Any] | None:
    """The detail of ``picked`` (an item of the list, None: no compaction chosen) as the
    partial and the JSON answer read it."""
    if picked is None:
        return None
    detail = dict(queries.compaction_detail(session, light, picked))
    detail["summary_html"] = render_markdown(detail["figures"]["summary"] or "")
    detail["item"] = picked
    return detail


def _detail_html(session, shown: str, detail: Callable[[], dict[str, Any] | None]) -> SafeString:
    """The drawn detail of compaction ``shown``, kept below it (``detail`` is called only
    when no reader drew it yet)."""
    return shared_fragment(
        session,
        "detail-4",  # 4: a Codex compaction's recorded context
        DETAIL_PARTIAL,
        lambda: {"session": session, "detail": detail()},
        below=shown,
    )


def store_opening_detail(sender: Any = None, *, session, **kwargs: Any) -> None:
    """Draw the detail the tab opens on (the default route's newest compaction) and keep
    it, on ``services.session_imported`` (after :func:`queries.store_figures`; connected
    in ``ExplorerConfig.ready``, so the writer never imports a view): a big session's drawing
    is stored with it like the detail itself, so the first reader loads it instead of
    drawing 150 replaced entries (what made the first visit of a big session's tab cost
    twice a small one's). A session under the stored figures' bound is left alone."""
    if not stored_figures.wanted(session):
        return
    with stored_figures.patiently():
        opening = queries.opening_compaction(session)
        if opening is not None:
            light, newest = opening
            picked = {**newest, "chosen": True}
            _detail_html(session, picked["id"], lambda: _detail(session, light, picked))


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
    figures = detail.pop("figures", None)
    detail.pop("summary_html", None)
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
    light = panel.pop("light")
    ctx.update(panel)
    chosen_branch = panel["chosen_branch"]
    if chosen_branch is not None and chosen_branch not in panel["branch_summaries"]:
        raise Http404("No such branch summary on this route")
    if wants_json(request):
        ctx["detail"] = detail_of() if chosen_branch is None else None
        if chosen_branch is not None:
            ctx["branch_detail"] = branch_detail(session, light, chosen_branch)
        return json_page(plain(_json_data(ctx, cursor)))
    if request.GET.get("older") not in (None, "all") and request.htmx:
        return render_panel(request, TEMPLATE, "comp-older", ctx)
    # The detail is the same for every reader: drawn once per compaction (it shows only
    # what lies above the compaction, which appends do not change), or, when the route has
    # none, once per cursor and session version. Read only when it is not drawn yet.
    shown = next((c["id"] for c in panel["compactions"] if c["chosen"]), None)
    if chosen_branch is not None:
        # Kept below the branch summary: the route it summarised never changes.
        ctx["detail_html"] = shared_fragment(
            session,
            "branch-1",
            BRANCH_PARTIAL,
            lambda: {"session": session, "bdetail": branch_detail(session, light, chosen_branch)},
            below=chosen_branch,
        )
    elif shown is not None:
        ctx["detail_html"] = _detail_html(session, shown, detail_of)
    else:
        none = not panel["compactions"]  # nothing to choose: say so, not "choose one"
        name = f"{cursor or ''}:{request.GET.get('c') or ''}:{int(none)}"
        ctx["none_on_route"] = none
        ctx["detail_html"] = shared_fragment(
            session,
            name,
            DETAIL_PARTIAL,
            {"session": session, "detail": None, "none_on_route": none},
        )
    return render_panel(request, TEMPLATE, "compaction-detail", ctx)
