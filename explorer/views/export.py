"""The single-file HTML export: a route or the whole tree as one offline page (see
:mod:`explorer.export_html`), streamed as a download."""

from __future__ import annotations

import re

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from explorer import atif_export, export_html
from explorer.permissions import get_session_for_user, viewer_required
from explorer.views.common import HtmxHttpRequest, resolve_cursor


@viewer_required
@require_GET
def export_html_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """``?scope=tree`` exports every route, else the route to ``?leaf=`` (or the cursor)."""
    session = get_session_for_user(request, pk)
    whole = request.GET.get("scope") == "tree"
    leaf = resolve_cursor(request, session)
    if whole and session.entry_count > export_html.MAX_ENTRIES:
        return HttpResponse(
            f"This session has {session.entry_count} entries; a whole-tree HTML export is "
            f"limited to {export_html.MAX_ENTRIES}. Export one route, or the JSONL file.",
            status=413,
            content_type="text/plain; charset=utf-8",
        )
    comments = request.GET.get("comments") == "1"
    plan = export_html.plan(session, leaf=leaf, whole=whole, comments=comments)
    title = f"{session.display_name} — {'tree' if whole else 'route'}"
    pieces = export_html.pieces(export_html.stream(session, plan, title=title))
    # Under ASGI a sync iterator is collected whole before the first byte is sent.
    content = export_html.astream(pieces) if isinstance(request, ASGIRequest) else pieces
    response = StreamingHttpResponse(content, content_type="text/html; charset=utf-8")
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", session.display_name)[:60].strip("-") or "session"
    suffix = "tree" if whole else (leaf or "route")[:16]
    response["Content-Disposition"] = f'attachment; filename="{stem}-{suffix}.html"'
    response["Cache-Control"] = "no-store"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@viewer_required
@require_GET
def export_atif_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The route to ``?leaf=`` (or the cursor) as ATIF: one JSON file, or, when compactions
    cut it into several trajectories, a zip of them under the names their
    ``continued_trajectory_ref`` use; ``?segment=N`` gives the N-th alone as JSON."""
    session = get_session_for_user(request, pk)
    leaf = resolve_cursor(request, session)
    docs = atif_export.route_documents(session, leaf)
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", session.display_name)[:60].strip("-") or "session"
    stem = f"{stem}-{(leaf or 'route')[:16]}"
    segment = request.GET.get("segment")
    if segment is not None:
        if not segment.isdigit() or not 1 <= int(segment) <= len(docs):
            return HttpResponse(
                f"segment must be a number from 1 to {len(docs)}",
                status=400,
                content_type="text/plain; charset=utf-8",
            )
        docs = [docs[int(segment) - 1]]
        name = atif_export.segment_name(int(segment) - 1)
        body, kind, filename = atif_export.document_bytes(docs[0]), "application/json", name
    elif len(docs) == 1:
        body, kind = atif_export.document_bytes(docs[0]), "application/json"
        filename = f"{stem}.atif.json"
    else:
        body, kind, filename = atif_export.zip_bytes(docs), "application/zip", f"{stem}.atif.zip"
    response = HttpResponse(body, content_type=kind)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "no-store"
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _size_text(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f} MB"
    return f"{max(1, round(n / 1000))} kB"


@viewer_required
@require_GET
def export_size_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The expected size of each HTML export, fetched when the export menu opens (reading
    the sizes of a long route's entries is not worth doing on every page)."""
    session = get_session_for_user(request, pk)
    figures = export_html.expected_sizes(session, resolve_cursor(request, session))
    if request.GET.get("format") == "json":
        return JsonResponse(figures)
    tree = figures["tree_bytes"]
    return render(
        request,
        "explorer/partials/export_sizes.html",
        {**figures, "route_size": _size_text(figures["route_bytes"]),
         "tree_size": _size_text(tree) if tree is not None else "",
         "warn": session.entry_count > export_html.WARN_ENTRIES},
    )  # fmt: skip
