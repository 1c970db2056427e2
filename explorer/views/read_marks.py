""" "Mark as read" and the visit record behind "new since you last looked"."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import redirect
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from explorer import params, read_marks, services
from explorer.permissions import get_session_for_user, viewer_required
from explorer.views.common import HtmxHttpRequest
from explorer.views.jsonapi import json_page, wants_json


@viewer_required
@require_POST
def seen_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Record the reader's visit up to ``position`` (what the page showed; the page posts
    it once shown), or everything with ``all`` ("Mark as read"). Answers the banner as it
    now stands (htmx), JSON, or a redirect back to ``next``."""
    session = get_session_for_user(request, pk)
    position = None if request.POST.get("all") else params.parse_int(request.POST.get("position"))
    if position is None and not request.POST.get("all"):
        position = read_marks.newest_position(session)
    mark = services.mark_seen(session, request.user, position)
    if wants_json(request):
        return json_page({"session": session.pk, "mark": mark})
    if request.htmx:
        seen = read_marks.seen(request.user, session)
        # After "Mark as read" the banner goes; after a visit record it stays as drawn.
        if not request.POST.get("all"):
            return HttpResponse(status=204)
        body = render_to_string(
            "explorer/partials/new_since.html",
            {"session": session, "seen": seen, "new_ids": []},
            request=request,
        )
        return HttpResponse(body)
    target = request.POST.get("next") or ""
    if not (
        target.startswith("/")
        and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()})
    ):
        target = reverse("explorer:session_detail", args=[session.pk])
    return redirect(target)
