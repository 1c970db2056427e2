"""Context size per turn: projected estimate against provider-reported input tokens."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from explorer import params, queries
from explorer.permissions import get_session_for_user, viewer_required
from explorer.views.common import (
    HtmxHttpRequest,
    render_panel,
    resolve_cursor,
    session_frame,
    shared_fragment,
)
from explorer.views.jsonapi import json_page, plain, wants_json

TEMPLATE = "explorer/timeline.html"


def timeline_panel(
    request: HtmxHttpRequest, session, cursor: str | None, before: int | None
) -> dict[str, Any]:
    """The panel's figures: one builder (:func:`queries.timeline_figures`) for all forms
    (the JSON without the chart's coordinates)."""
    return queries.timeline_figures(session, cursor, before, chart=not wants_json(request))


def _marks_before(request: HtmxHttpRequest) -> int | None:
    """``?marks_before=N``: page back through the marks to those before window index N;
    anything but a positive whole number shows the newest."""
    before = params.parse_int(request.GET.get("marks_before"))
    return before if before is not None and before > 0 else None


@viewer_required
@require_GET
def timeline_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "timeline", cursor)
    before = _marks_before(request)
    if wants_json(request):
        ctx.update(timeline_panel(request, session, cursor, before))
        keys = ("cursor", "points", "marks", "marks_total", "mark_counts", "older_marks",
                "marks_older", "marks_newer", "now_point", "clipped", "peak", "turns", "path_length")  # fmt: skip
        return json_page(plain({k: ctx[k] for k in keys}))
    # The chart is the same for every reader of this cursor: drawn once per version ("5:"
    # since it draws the newest marks only), its figures read only when it is drawn.
    build = lambda: {**ctx, **timeline_panel(request, session, cursor, before)}  # noqa: E731
    ctx["timeline_html"] = shared_fragment(
        session, f"5:{before or ''}:{cursor or ''}", f"{TEMPLATE}#timeline-panel", build
    )
    return render_panel(request, TEMPLATE, "timeline-panel", ctx)
