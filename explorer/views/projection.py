"""Raw path versus what the model sees, aligned by source entry."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from explorer import archives, html, params, queries
from explorer.forms import ContextWindowForm
from explorer.permissions import can_edit, can_edit_model, get_session_for_user, viewer_required
from explorer.session.describe import entry_role, entry_title
from explorer.views.common import (
    HtmxHttpRequest,
    render_panel,
    resolve_cursor,
    route_share,
    session_frame,
    shared_fragment,
)
from explorer.views.jsonapi import json_page, wants_json

TEMPLATE = "explorer/context.html"
WINDOWS = (32_000, 128_000, 200_000, 400_000, 1_000_000)
FOLDED_PAGE = 200
ROWS_SHOWN = 150  # newest rows shown at first; earlier ones on request, a window at a time
ROWS_MAX = 1000  # the largest window a reader may ask for (``limit``)


def _int(value: str | None, default: int, lo: int, hi: int) -> int:
    return params.int_param(value, default, lo, hi)


def _folded_rows(session, cursor: str | None, start: int, offset: int) -> list[dict[str, Any]]:
    """One page of the entries folded before the kept range (listed on request only)."""
    page = queries.light_path(session, cursor)[:start][offset : offset + FOLDED_PAGE]
    data = queries.load_entries(session, [e.entry_id for e in page])
    return [
        {
            "id": e.entry_id,
            "type": e.type,
            "role": entry_role(data.get(e.entry_id, {})),
            "title": entry_title(data.get(e.entry_id, {}), 120),
        }
        for e in page
    ]


def _rows_html(request: HtmxHttpRequest, session, name: str, rows: list[dict]) -> SafeString:
    """The table's rows. A viewer's hold nothing of the viewer (no form, no token), so they
    are drawn once per session version for every viewer; an editor's carry the editor's
    CSRF token and viewed leaf in their Undo forms and are drawn for the editor."""
    if can_edit_model(request.user, session):
        return html.context_rows(request, session, rows, True)
    build = lambda: str(html.context_rows(request, session, rows, False))  # noqa: E731
    return html.trusted(queries.cached(session, f"context-rows:{name}:{len(rows)}", build))


def context_panel(request: HtmxHttpRequest, session, cursor: str | None) -> dict[str, Any]:
    """Everything the panel shows; the figures come from ``queries.context_summary`` alone."""
    form = ContextWindowForm(request.GET)
    window, reserve = form.values()
    summary = queries.context_summary(session, cursor, window, reserve)
    rows = summary["rows"]
    lo, hi = row_window(request, len(rows))
    # The window's stood-in lines read (queries.omitted)
    shown = queries.shown_rows(session, rows[lo:hi], f"{cursor}:{window}:{reserve}:{lo}:{hi}")
    show_folded = request.GET.get("folded") == "1"
    start = summary["folded_count"]
    offset = _int(request.GET.get("offset"), 0, 0, max(start, 0))
    return {
        "view": summary,
        "form_errors": form.error_messages(),
        "rows_html": _rows_html(request, session, f"{cursor}:{window}:{reserve}:{lo}", shown),
        "shown_rows": shown,
        "row_count": len(rows),
        "hidden_rows": lo,
        "rows_from": lo,
        "rows_to": hi,
        "earlier_query": _window_query(request, lo) if lo else None,
        "newest_query": _window_query(request, None) if hi < len(rows) else None,
        "folded_count": start,
        "folded_rows": _folded_rows(session, cursor, start, offset)
        if show_folded and start
        else [],
        "folded_next": offset + FOLDED_PAGE
        if show_folded and offset + FOLDED_PAGE < start
        else None,
        "show_folded": show_folded,
        "window": request.GET.get("window", window) if form.errors else window,
        "reserve": request.GET.get("reserve", reserve) if form.errors else reserve,
        "windows": WINDOWS,
        "leaves": archives.pick(session, _leaf_choices(request, session), False)["choices"],
        "path_length": summary["path_length"],
        "edited_count": summary["edited_count"],
    }


def row_window(request: HtmxHttpRequest, count: int) -> tuple[int, int]:
    """The rows ``[lo, hi)`` of the live range a request shows: ``limit`` rows (150 unless
    asked, at most :data:`ROWS_MAX`) ending before row ``before`` (the newest unless asked).
    The page, its partials and the JSON list only this window, so their bytes do not grow
    with the route; the figures still cover every row."""
    limit = _int(request.GET.get("limit"), ROWS_SHOWN, 1, ROWS_MAX)
    hi = _int(request.GET.get("before"), count, 0, count)
    return max(0, hi - limit), hi


def _window_query(request: HtmxHttpRequest, before: int | None) -> str:
    """The request's query with the window ending before row ``before`` (None: the newest)."""
    query = request.GET.copy()
    for name in ("before", "format", "all", "partial", "folded", "offset"):
        query.pop(name, None)
    if before is not None:
        query["before"] = str(before)
    return query.urlencode()


def _json_answer(request: HtmxHttpRequest, ctx: dict[str, Any]) -> dict[str, Any]:
    """The JSON: every figure, the window of rows (``rows_from``..``rows_to`` of
    ``row_count``) and the address of the earlier window (``next``, None at the first row)."""
    view, lo, hi = ctx["view"], ctx["rows_from"], ctx["rows_to"]
    following = None
    if lo:
        query = request.GET.copy()
        query["before"], query["format"] = str(lo), "json"
        following = request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
    return {
        **view,
        "rows": ctx["shown_rows"],
        "row_count": ctx["row_count"],
        "rows_from": lo,
        "rows_to": hi,
        "next": following,
        "errors": ctx["form_errors"],
    }


def _leaf_choices(request: HtmxHttpRequest, session) -> list[dict[str, str]]:
    """The leaf picker's choices; a share link to one route offers that route alone, so
    the picker does not list the branches the link does not show."""
    link = route_share(request)
    if link is not None:
        return [c for c in queries.leaf_choices(session) if c.get("id") == link.leaf_id] or [
            {"id": link.leaf_id, "title": link.leaf_id}
        ]
    return queries.leaf_choices(session)


def _shared_panel(request: HtmxHttpRequest) -> bool:
    """Whether the page's panel holds nothing of the reader: a viewer (an editor's rows carry
    Undo forms with the editor's token) asking for a valid window, not the JSON or the
    folded entries' list."""
    return not (
        wants_json(request)
        or request.GET.get("folded") == "1"
        or request.GET.get("partial") == "earlier-rows"
        or can_edit(request.user)
        or ContextWindowForm(request.GET).errors
        or route_share(request) is not None  # its leaf picker offers the one route
    )


@viewer_required
@require_GET
def context_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "context", cursor)
    if _shared_panel(request):  # a viewer's panel: the same for every viewer of this query
        q = request.GET
        name = (
            f"{cursor}:{q.get('leaf')}:{q.get('window')}:{q.get('reserve')}"
            f":{q.get('before')}:{q.get('limit')}"
        )
        build = lambda: ctx | context_panel(request, session, cursor) | {"request": request}  # noqa: E731
        ctx["panel_html"] = shared_fragment(session, name, f"{TEMPLATE}#context-panel", build)
        return render_panel(request, TEMPLATE, "context-panel", ctx)
    ctx.update(context_panel(request, session, cursor))
    status = 400 if ctx["form_errors"] else 200
    if wants_json(request):
        return json_page(_json_answer(request, ctx), status=status)
    partial = "folded-rows" if request.GET.get("folded") == "1" else "context-panel"
    if request.GET.get("partial") == "earlier-rows" and request.htmx and not ctx["form_errors"]:
        partial = "earlier-rows"  # the "N more" control: the earlier window, then its own
    return render_panel(request, TEMPLATE, partial, ctx, status=status)
