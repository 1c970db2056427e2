"""Context size per turn: projected estimate against provider-reported input tokens."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from explorer import queries
from explorer.analysis.timeline import timeline, timeline_svg_data
from explorer.permissions import get_session_for_user, viewer_required
from explorer.views.common import HtmxHttpRequest, render_panel, resolve_cursor, session_frame
from explorer.views.jsonapi import json_page, plain, wants_json

TEMPLATE = "explorer/timeline.html"
MAX_PATH = 6000


def timeline_panel(request: HtmxHttpRequest, session, cursor: str | None) -> dict[str, Any]:
    return queries.cached(session, f"timeline:{cursor or ''}", lambda: _timeline(session, cursor))


def _timeline(session, cursor: str | None) -> dict[str, Any]:
    light = queries.light_path(session, cursor)
    clipped = max(0, len(light) - MAX_PATH)
    path = queries.full_path(session, light[clipped:])
    points, marks = timeline(path)
    chart = timeline_svg_data(points, marks, len(path))
    peak = max((p.projected for p in points), default=0)
    return {
        "chart": chart,
        "points": points,
        "marks": marks,
        "clipped": clipped,
        "peak": peak,
        "turns": len(points),
        "path_length": len(light),
    }


@viewer_required
@require_GET
def timeline_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "timeline", cursor)
    ctx.update(timeline_panel(request, session, cursor))
    if wants_json(request):
        keys = ("cursor", "points", "marks", "clipped", "peak", "turns", "path_length")
        return json_page(plain({k: ctx[k] for k in keys}))
    return render_panel(request, TEMPLATE, "timeline-panel", ctx)
