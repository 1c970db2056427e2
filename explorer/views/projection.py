"""Raw path versus what the model sees, aligned by source entry."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from explorer import treedata
from explorer.explore import align_projection, entry_title
from explorer.permissions import get_session_for_user, viewer_required
from explorer.session.tokens import CompactionSettings
from explorer.views.common import render_panel, resolve_cursor, session_frame

TEMPLATE = "explorer/context.html"
WINDOWS = (32_000, 128_000, 200_000, 400_000, 1_000_000)
FOLDED_PAGE = 200


def _int(value: str | None, default: int, lo: int, hi: int) -> int:
    try:
        v = int(value or default)
    except ValueError:
        return default
    return max(lo, min(hi, v))


def context_panel(request: HttpRequest, session, cursor: str | None) -> dict[str, Any]:
    """Rows for the live range (from the newest compaction's kept entries on) plus a count of
    the folded history before it, which is listed page by page on request."""
    window = _int(request.GET.get("window"), 200_000, 1_000, 10_000_000)
    reserve = _int(request.GET.get("reserve"), 16_384, 0, 10_000_000)
    light = treedata.light_path(session, cursor)
    path, start = treedata.context_path(session, light)
    view = align_projection(
        path, context_window=window, settings=CompactionSettings(reserve_tokens=reserve)
    )
    folded_rows = []
    show_folded = request.GET.get("folded") == "1"
    offset = _int(request.GET.get("offset"), 0, 0, max(start, 0))
    folded_light = list(light[:start])
    if show_folded and folded_light:
        page = folded_light[offset : offset + FOLDED_PAGE]
        data = treedata.load_entries(session, [e.entry_id for e in page])
        for e in page:
            d = data.get(e.entry_id, {})
            folded_rows.append(
                {
                    "id": e.entry_id,
                    "type": e.type,
                    "role": (
                        (d.get("message") or {}).get("role", "")
                        if isinstance(d.get("message"), dict)
                        else ""
                    ),
                    "title": entry_title(d, 120),
                }
            )
    settings_rows = {id(r.entry) for r in view.rows[: len(path) - (len(light) - start)]}
    rows = [r for r in view.rows if id(r.entry) not in settings_rows]
    return {
        "view": view,
        "rows": rows,
        "folded_count": start,
        "folded_rows": folded_rows,
        "folded_next": offset + FOLDED_PAGE
        if show_folded and offset + FOLDED_PAGE < start
        else None,
        "show_folded": show_folded,
        "window": window,
        "reserve": reserve,
        "windows": WINDOWS,
        "path_length": len(light),
        "edited_count": sum(1 for r in rows if r.status in ("hidden", "replaced")),
    }


@viewer_required
@require_GET
def context_view(request: HttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "context", cursor)
    ctx.update(context_panel(request, session, cursor))
    partial = "folded-rows" if request.GET.get("folded") == "1" else "context-panel"
    return render_panel(request, TEMPLATE, partial, ctx)
