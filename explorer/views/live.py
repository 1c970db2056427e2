"""The Live tab: the tail window of the newest route (the Transcript tab's rows), the Tree
tab's text tree, the turn form and the token meter, kept up to date over the session's
websocket (``explorer.consumers``)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from explorer import conf, html, live_frames, queries, turns
from explorer.items import route_window_items, shared_rows
from explorer.permissions import (
    can_edit_model,
    editor_required,
    get_session_for_user,
    viewer_required,
)
from explorer.session.sentinel import UNSET
from explorer.views.common import HtmxHttpRequest, render_panel, resolve_cursor, session_frame
from explorer.views.jsonapi import json_page, plain, wants_json
from explorer.views.transcript import PAGE
from explorer.views.tree import graph_context

TEMPLATE = "explorer/live.html"


def _status(message: str, *, css: str = "", status: int = 200) -> HttpResponse:
    return HttpResponse(html.turn_status(message, css=css), status=status)


def tail_window(session, leaf: str | None) -> dict[str, Any]:
    """The last ``PAGE`` entries of the route root → ``leaf`` as the Transcript tab's rows,
    rendered once per session version for every viewer (no per-viewer parts: the page's
    script gives their forms the viewer's CSRF token), with the "earlier entries" sentinel.
    The Live tab weighs and costs the same for 500 or 50,000 entries."""
    return queries.cached(session, f"live-tail:{leaf or ''}", lambda: _tail_window(session, leaf))


def _tail_window(
    session, leaf: str | None, *, page: int = PAGE, bounded: bool = False
) -> dict[str, Any]:
    # The route's last ``page`` entries alone (``queries.tail_window``): the Transcript
    # tab's window of the route's map, without reading the whole route.
    win = queries.tail_window(session, leaf, page)
    n, start = win.length, win.start
    items = route_window_items(session, win, target=None, leaf_q=None) if n else []
    earlier_url = ""
    if start:
        base = reverse("explorer:transcript", args=[session.pk])
        earlier_url = f"{base}?{html.urlencode({'leaf': win.leaf or '', 'before': win.ids[0]})}"
    ctx = {
        "session": session, "items": items, "earlier": start, "later": 0,
        "tail_url": "",  # the websocket brings arrivals; no polling sentinel
        "earlier_url": earlier_url, "earlier_link": reverse("explorer:transcript", args=[session.pk]),
        "cursor_entry": None, "editable": False,
        "move_url": reverse("explorer:transcript_cursor", args=[session.pk]),
        "shared_row": True,  # cached for every viewer: no token; live.js adds the viewer's
    }  # fmt: skip
    # Only the rows no kept row serves are rendered: after an append, the new entry's.
    rows_list = shared_rows(session, items)
    if bounded:  # sent over the websocket: each row within a frame (``live_frames``)
        rows_list = [
            live_frames.bounded_row(session.pk, it["id"], html.dom_id(it["id"]), row)
            for it, row in zip(items, rows_list, strict=True)
        ]
    ctx["rows_html"] = html.join(rows_list)
    rows = render_to_string("explorer/transcript.html#transcript-page", ctx)
    return {"rows_html": rows, "route_length": n, "tip": win.ids[-1] if n else ""}


def window_swap(session, leaf: str | None) -> tuple[str, str | None]:
    """The whole transcript window as an out-of-band swap (a viewer's route changed branch),
    and the tip it ends at. It is one websocket frame, so it holds as many of the route's
    last rows as fit in one (``live_frames``); the "earlier entries" link reaches the rest."""
    page = PAGE
    while True:
        ctx = _tail_window(session, leaf, page=page, bounded=True) | {"oob": True}
        swap = render_to_string(f"{TEMPLATE}#live-transcript", ctx)
        budget = live_frames.FRAME_BYTES - live_frames.NOTICE_BYTES
        if page == 1 or live_frames.size(swap) <= budget:
            return swap, ctx["tip"] or None
        page //= 2


def _turn_context(request: HtmxHttpRequest, session) -> dict[str, Any]:
    """What the turn form shows: whether a provider is set up, whether a turn runs now
    (Cancel is enabled exactly then), whether this user may send."""
    running = turns.running_turn(session.pk) is not None or turns.turn_busy_elsewhere(session.pk)
    return {
        "provider_configured": turns.provider_configured(),
        "no_provider_message": turns.NO_PROVIDER_MESSAGE,
        "can_edit": can_edit_model(request.user, session),
        "turn_running": running,
    }


@viewer_required
@require_GET
def live_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The Live tab; ``?partial=tree-panel`` redraws only its text tree (the arrivals
    notice's "refresh")."""
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    last = queries.last_position(session)  # read before the tip: a resume repeats, never skips
    newest = queries.default_leaf_id(session)
    if wants_json(request):
        return json_page(plain(_live_json(request, session, newest, last)))
    context = session_frame(request, session, "live", cursor)
    context |= graph_context(request, session, cursor, svg=False)  # the Tree tab's text tree
    context |= tail_window(session, newest)
    window, reserve = conf.window_and_reserve()
    summary = queries.projection_summary(
        session, context["tip"] or None, window=window, reserve=reserve
    )
    context |= _turn_context(request, session) | {
        "cursor_entry": queries.cursor_id(session, request.user),
        "move_url": reverse("explorer:transcript_cursor", args=[session.pk]),
        "last_position": last,
        "projection_html": html.projection_panel(summary),
        "ws_path": f"/ws/sessions/{session.pk}/",
    }
    if request.GET.get("partial") == "tree-panel" and request.htmx:  # the Tree tab's partial
        return render_panel(request, "explorer/session_detail.html", "tree-panel", context)
    return render_panel(request, TEMPLATE, None, context)


def _live_json(request: HtmxHttpRequest, session, newest: str | None, last: Any) -> dict:
    """The Live tab's JSON: the newest route's length and tip, the reader's cursor, where
    the websocket resumes, the turn state and the meter. Read from the tip's stored route
    figures (its depth, its meter); none of the page's tree or transcript rows is built (or parsed)
    for it."""
    length = queries.route_length(session, newest)
    tip = (newest or "") if length else ""
    window, reserve = conf.window_and_reserve()
    turn = _turn_context(request, session)
    return {
        "route_length": length,
        "tip": tip,
        "cursor_entry": queries.cursor_id(session, request.user),
        "last_position": last,
        **{k: turn[k] for k in ("provider_configured", "turn_running", "can_edit")},
        "ws_path": f"/ws/sessions/{session.pk}/",
        "projection": queries.projection_summary(
            session, tip or None, window=window, reserve=reserve
        ),
    }


@editor_required
@require_POST
def turn_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    text = request.POST.get("text", "")
    # The cursor the page showed (absent: an older page or a script, sent at the cursor as
    # it is then); empty: the page showed no entry yet.
    expected = request.POST.get("expected_leaf", UNSET)
    if expected is not UNSET:
        expected = expected or None
    try:
        turns.start_turn(session, request.user, text, expected_leaf=expected)
    except turns.TurnStale as exc:
        return _answer(request, session, str(exc), css="error stale", status=409)
    except turns.TurnBusy as exc:
        return _answer(request, session, str(exc), css="error busy", status=409)
    except turns.NoProvider as exc:
        return _answer(request, session, str(exc), css="error", status=503)
    except turns.TurnError as exc:
        return _answer(request, session, str(exc), css="error", status=400)
    return _answer(request, session, "Sent. The answer streams in below.", css="busy", status=202)


@editor_required
@require_http_methods(["POST"])
def cancel_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    if turns.cancel_turn(session.pk):
        return _answer(request, session, "Cancelling…", css="busy", status=202)
    return _answer(request, session, "No turn is running.", status=200)


def _answer(
    request: HtmxHttpRequest, session, message: str, *, css: str = "", status: int
) -> HttpResponse:
    if request.htmx or request.headers.get("HX-Request"):
        return _status(message, css=css, status=status)
    # Without JavaScript: back to the page, with the outcome as a message.
    level = messages.ERROR if status >= 400 else messages.INFO
    messages.add_message(request, level, message)
    response = redirect(reverse("explorer:live", args=[session.pk]))
    if status >= 400:
        response.status_code = 303
    return response
