"""Raw path versus what the model sees, aligned by source entry."""

from __future__ import annotations

import hashlib
from typing import Any

from django.core.cache import cache
from django.http import HttpResponse
from django.views.decorators.http import require_GET

from explorer import html, params, queries
from explorer.analysis.projection import align_projection
from explorer.permissions import get_session_for_user, viewer_required
from explorer.session.describe import entry_role, entry_title, message_preview
from explorer.session.tokens import CompactionSettings
from explorer.views.common import HtmxHttpRequest, render_panel, resolve_cursor, session_frame

TEMPLATE = "explorer/context.html"
WINDOWS = (32_000, 128_000, 200_000, 400_000, 1_000_000)
FOLDED_PAGE = 200
ROWS_SHOWN = 150  # newest rows shown at first; earlier ones on request
EDITABLE_ROLES = ("user", "assistant", "toolResult")


def _int(value: str | None, default: int, lo: int, hi: int) -> int:
    return params.int_param(value, default, lo, hi)


def context_summary(session, cursor: str | None, window: int, reserve: int) -> dict[str, Any]:
    """The aligned view reduced to what the page shows, cached per session version and leaf.

    Rows cover the live range (from the newest compaction's kept entries on); the history
    folded before it is only counted here and listed page by page on request.
    """
    key = (
        "explorer:ctx:"
        + hashlib.sha256(
            f"{queries.content_key(session)}|{cursor}|{window}|{reserve}".encode()
        ).hexdigest()
    )
    hit = cache.get(key)
    if hit is not None:
        return hit
    light = queries.light_path(session, cursor)
    path, start = queries.context_path(session, light)
    view = align_projection(
        path, context_window=window, settings=CompactionSettings(reserve_tokens=reserve)
    )
    settings_only = len(path) - (len(light) - start)  # settings entries kept from the folded part
    rows = []
    for r in view.rows[settings_only:]:
        e = r.entry
        role = entry_role(e)
        rows.append(
            {
                "id": r.id,
                "kind": role or str(e.get("type", "")),
                "status": r.status,
                "reason": r.reason,
                "raw_tokens": r.raw_tokens,
                "projected_tokens": r.projected_tokens,
                "raw_text": entry_title(e, 220),
                "projected": [
                    (o, str(m.get("role", "")), message_preview(m, 220))
                    for o, m in zip(r.order, r.projected, strict=False)
                ],
                "editable": e.get("type") == "custom_message" or role in EDITABLE_ROLES,
            }
        )
    summary = {
        "rows": rows,
        "raw_tokens": view.raw_tokens,
        "projected_tokens": view.projected_tokens,
        "message_count": view.message_count,
        "thinking_level": view.thinking_level,
        "model": view.model,
        "compaction_id": view.compaction_id,
        "differences": view.differences,
        "would_compact": view.would_compact,
        "threshold": view.threshold,
        "folded_count": start,
        "path_length": len(light),
        "edited_count": sum(1 for r in rows if r["status"] in ("hidden", "replaced")),
    }
    cache.set(key, summary, 3600)
    return summary


def context_panel(request: HtmxHttpRequest, session, cursor: str | None) -> dict[str, Any]:
    window = _int(request.GET.get("window"), 200_000, 1_000, 10_000_000)
    reserve = _int(request.GET.get("reserve"), 16_384, 0, 10_000_000)
    summary = context_summary(session, cursor, window, reserve)
    rows = summary["rows"]
    show_all = request.GET.get("all") == "1"
    hidden_rows = 0 if show_all else max(0, len(rows) - ROWS_SHOWN)
    folded_rows = []
    show_folded = request.GET.get("folded") == "1"
    start = summary["folded_count"]
    offset = _int(request.GET.get("offset"), 0, 0, max(start, 0))
    if show_folded and start:
        light = queries.light_path(session, cursor)[:start]
        page = light[offset : offset + FOLDED_PAGE]
        data = queries.load_entries(session, [e.entry_id for e in page])
        for e in page:
            d = data.get(e.entry_id, {})
            folded_rows.append(
                {
                    "id": e.entry_id,
                    "type": e.type,
                    "role": entry_role(d),
                    "title": entry_title(d, 120),
                }
            )
    from explorer.permissions import can_edit

    return {
        "view": summary,
        "rows_html": html.context_rows(
            request, session, rows[hidden_rows:], can_edit(request.user)
        ),
        "row_count": len(rows),
        "hidden_rows": hidden_rows,
        "folded_count": start,
        "folded_rows": folded_rows,
        "folded_next": offset + FOLDED_PAGE
        if show_folded and offset + FOLDED_PAGE < start
        else None,
        "show_folded": show_folded,
        "window": window,
        "reserve": reserve,
        "windows": WINDOWS,
        "path_length": summary["path_length"],
        "edited_count": summary["edited_count"],
    }


@viewer_required
@require_GET
def context_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "context", cursor)
    ctx.update(context_panel(request, session, cursor))
    partial = "folded-rows" if request.GET.get("folded") == "1" else "context-panel"
    return render_panel(request, TEMPLATE, partial, ctx)
