"""Per-session totals for the session list, loaded into each row on demand."""

from __future__ import annotations

from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from explorer.permissions import get_session_for_user, viewer_required
from explorer.queries.listing import default_path_totals
from explorer.views.common import HtmxHttpRequest
from explorer.views.jsonapi import json_page, wants_json


@viewer_required
@require_GET
def session_stats(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    if wants_json(request):
        return json_page({"default_path_usage": default_path_totals(session)})
    return render(
        request,
        "explorer/partials/session_stats.html",
        {"s": session, "totals": default_path_totals(session)},
    )
