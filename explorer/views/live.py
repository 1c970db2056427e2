"""The live page of a session: transcript, text tree, turn form and token meter, kept up to
date over the session's websocket (``explorer.consumers``)."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from explorer import conf, html, queries, turns
from explorer.models import Entry
from explorer.permissions import can_edit, editor_required, get_session_for_user, viewer_required
from explorer.views.common import HtmxHttpRequest, session_frame

# The live page renders at most this many of the newest entries in its tree: 2,000 made the
# 50,000-entry session's page 1.15 MB of HTML, 500 makes it 0.52 MB (the Tree tab has the rest).
TREE_LIMIT = 500


def _status(message: str, *, css: str = "", status: int = 200) -> HttpResponse:
    return HttpResponse(html.turn_status(message, css=css), status=status)


@viewer_required
@require_GET
def live_page(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    from explorer.consumers import _transcript_items

    session = get_session_for_user(request, pk)
    total = Entry.objects.filter(session=session).count()
    rows = list(Entry.objects.filter(session=session).order_by("-position")[:TREE_LIMIT])
    rows.reverse()
    newest = rows[-1] if rows else None
    items, tip = _transcript_items(session.pk, newest.entry_id if newest else None)
    summary = queries.projection_summary(
        session,
        tip,
        window=conf.context_window(),
        reserve=conf.compaction_settings().reserve_tokens,
    )
    running = turns.running_turn(session.pk)
    context = session_frame(request, session, "live", queries.cursor_id(session, request.user))
    context |= {
        "tree_html": html.live_tree(rows),
        "tree_hidden": max(0, total - len(rows)),
        "transcript_html": html.join(html.trusted(i) for i in items),
        "tip": tip or "",
        "last_position": newest.position if newest else 0,
        "projection_html": html.projection_panel(summary),
        "provider_configured": turns.provider_configured(),
        "no_provider_message": turns.NO_PROVIDER_MESSAGE,
        "can_edit": can_edit(request.user),
        "turn_running": running is not None or turns.turn_busy_elsewhere(session.pk),
        "ws_path": f"/ws/sessions/{session.pk}/",
    }  # the frame's header, tabs and actions, then the live parts
    return render(request, "explorer/live.html", context)


@editor_required
@require_POST
def turn_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    text = request.POST.get("text", "")
    try:
        turns.start_turn(session, request.user, text)
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
