"""The single-file HTML export: a route or the whole tree as one offline page (see
:mod:`explorer.export_html`), streamed as a download."""

from __future__ import annotations

import re

from django.http import HttpResponse, StreamingHttpResponse
from django.views.decorators.http import require_GET

from explorer import export_html
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
    response = StreamingHttpResponse(
        export_html.stream(session, plan, title=title), content_type="text/html; charset=utf-8"
    )
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", session.display_name)[:60].strip("-") or "session"
    suffix = "tree" if whole else (leaf or "route")[:16]
    response["Content-Disposition"] = f'attachment; filename="{stem}-{suffix}.html"'
    response["Cache-Control"] = "no-store"
    response["X-Content-Type-Options"] = "nosniff"
    return response
