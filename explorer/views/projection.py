"""Raw path versus what the model sees, aligned by source entry."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlencode

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.views.decorators.http import require_GET

from explorer import treedata
from explorer.analysis.projection import align_projection
from explorer.permissions import get_session_for_user, viewer_required
from explorer.session.describe import entry_role, entry_title, message_preview
from explorer.session.tokens import CompactionSettings
from explorer.views.common import render_panel, resolve_cursor, session_frame

TEMPLATE = "explorer/context.html"
WINDOWS = (32_000, 128_000, 200_000, 400_000, 1_000_000)
FOLDED_PAGE = 200
ROWS_SHOWN = 150  # newest rows shown at first; earlier ones on request
EDITABLE_ROLES = ("user", "assistant", "toolResult")


def _int(value: str | None, default: int, lo: int, hi: int) -> int:
    try:
        v = int(value or default)
    except ValueError:
        return default
    return max(lo, min(hi, v))


def context_summary(session, cursor: str | None, window: int, reserve: int) -> dict[str, Any]:
    """The aligned view reduced to what the page shows, cached per session version and leaf.

    Rows cover the live range (from the newest compaction's kept entries on); the history
    folded before it is only counted here and listed page by page on request.
    """
    key = (
        "explorer:ctx:"
        + hashlib.sha256(
            f"{treedata.content_key(session)}|{cursor}|{window}|{reserve}".encode()
        ).hexdigest()
    )
    hit = cache.get(key)
    if hit is not None:
        return hit
    light = treedata.light_path(session, cursor)
    path, start = treedata.context_path(session, light)
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


def render_rows(request: HttpRequest, session, rows: list[dict], editable: bool) -> SafeString:
    """Table rows as HTML, built directly (hundreds of rows; a template loop per cell costs more
    than everything else on the page)."""
    detail = reverse("explorer:session_detail", args=[session.pk])
    undo = reverse("explorer:undo", args=[session.pk])
    edit = reverse("explorer:edit", args=[session.pk])
    leaf = request.GET.get("leaf")
    token = get_token(request) if editable else ""
    leaf_input = format_html('<input type="hidden" name="leaf" value="{}">', leaf) if leaf else ""
    out: list[str] = []
    for r in rows:
        rid = r["id"]
        head = format_html(
            '<div class="ar-head"><a class="mono small" href="{}?{}">{}</a> <span class="pill pill-{}">{}</span>{}</div>'
            '<div class="ar-text raw-text">{}</div>',
            detail, urlencode({"entry": rid}), rid, r["kind"], r["kind"],
            format_html('<span class="muted small">{} tok</span>', r["raw_tokens"]) if r["raw_tokens"] else "",
            r["raw_text"],
        )  # fmt: skip
        if r["status"] == "same":
            status = format_html(
                '<span class="muted small">=</span>{}',
                format_html('<div class="small muted">{}</div>', r["reason"])
                if r["reason"]
                else "",
            )
        else:
            status = format_html(
                '<span class="badge st-{}">{}</span><div class="small">{}</div>',
                r["status"],
                r["status"],
                r["reason"],
            )
        action: str = ""
        if editable and r["status"] in ("hidden", "replaced"):
            action = format_html(
                '<form method="post" action="{}" class="inline-form"><input type="hidden" name="csrfmiddlewaretoken" value="{}">'
                '<input type="hidden" name="target" value="{}">{}<button class="button small" type="submit">Undo (restore)</button></form>',
                undo, token, rid, leaf_input,
            )  # fmt: skip
        elif editable and r["status"] == "same" and r["projected"] and r["editable"]:
            action = format_html(
                '<a class="button small subtle" href="{}?{}">Hide / replace</a>',
                edit,
                urlencode({"target": rid, **({"leaf": leaf} if leaf else {})}),
            )
        if r["projected"]:
            msgs = "".join(
                format_html(
                    '<div class="proj-msg"><span class="order">#{}</span> <span class="pill pill-{}">{}</span> '
                    '<span class="msg-snippet">{}</span></div>',
                    o,
                    role,
                    role,
                    text,
                )  # fmt: skip
                for o, role, text in r["projected"]
            )
            proj = format_html(
                '{}<div class="muted small">{} tok</div>', mark_safe(msgs), r["projected_tokens"]
            )
        else:
            proj = mark_safe('<span class="muted small">—</span>')
        out.append(
            format_html(
                '<tr id="row-{}" class="ar ar-{}" data-entry="{}" data-status="{}"><td class="col-raw">{}</td>'
                '<td class="col-status">{}{}</td><td class="col-proj">{}</td></tr>',
                rid,
                r["status"],
                rid,
                r["status"],
                head,
                status,
                action,
                proj,
            )  # fmt: skip
        )
    return mark_safe("".join(out))  # noqa: S308 - built with format_html


def context_panel(request: HttpRequest, session, cursor: str | None) -> dict[str, Any]:
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
        light = treedata.light_path(session, cursor)[:start]
        page = light[offset : offset + FOLDED_PAGE]
        data = treedata.load_entries(session, [e.entry_id for e in page])
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
        "rows_html": render_rows(request, session, rows[hidden_rows:], can_edit(request.user)),
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
def context_view(request: HttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "context", cursor)
    ctx.update(context_panel(request, session, cursor))
    partial = "folded-rows" if request.GET.get("folded") == "1" else "context-panel"
    return render_panel(request, TEMPLATE, partial, ctx)
