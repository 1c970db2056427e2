"""Two routes from their common ancestor: side by side, projection difference, costs."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from explorer import archives, queries
from explorer.permissions import get_session_for_user, viewer_required
from explorer.views.common import HtmxHttpRequest, render_panel, resolve_cursor, session_frame
from explorer.views.jsonapi import json_page, wants_json

TEMPLATE = "explorer/compare.html"


def _resolve(session, value: str | None, labels: dict[str, str]) -> str | None:
    """A leaf id, or a label text naming an entry."""
    if not value:
        return None
    if queries.entry_exists(session, value):
        return value
    return next((target for target, text in labels.items() if text == value), None)


def compare_panel(request: HtmxHttpRequest, session, cursor: str | None) -> dict[str, Any]:
    labels = queries.current_labels(session)
    asked_a = _resolve(session, request.GET.get("a"), labels)
    a = asked_a or cursor
    b = _resolve(session, request.GET.get("b"), labels)
    shown = archives.wants_shown(request.GET)
    return {
        "a": a,
        "b": b,
        # Archived routes left out of the picker unless shown ("N archived · show").
        **archives.pick(session, queries.leaf_choices(session), shown),
        "archived_toggle_url": archives.toggle_url(request.path, request.GET, shown),
        "result": queries.compare_routes(session, a, b, cursor) if a and b else None,
        "bad_a": bool(request.GET.get("a")) and asked_a is None,
        "bad_b": bool(request.GET.get("b")) and b is None,
    }


@viewer_required
@require_GET
def compare_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "compare", cursor)
    ctx.update(compare_panel(request, session, cursor))
    if wants_json(request):
        keys = ("a", "b", "result", "bad_a", "bad_b")
        return json_page({"cursor": cursor, **{k: ctx[k] for k in keys}})
    return render_panel(request, TEMPLATE, "compare-result", ctx)
