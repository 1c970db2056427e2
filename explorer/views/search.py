"""Search inside a session and across sessions: session, entry id, highlighted snippet, link."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from django.http import HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_GET

from explorer import html
from explorer.models import Entry, Session
from explorer.permissions import get_session_for_user, viewer_required
from explorer.rendering import VisibleJsonResponse
from explorer.session import jsonfmt
from explorer.session.describe import entry_text
from explorer.views.common import HtmxHttpRequest, render_panel, resolve_cursor, session_frame

MAX_RESULTS = 50
TYPES = (
    ("", "Any type"),
    ("message", "Messages"),
    ("compaction", "Compactions"),
    ("branch_summary", "Branch summaries"),
    ("label", "Labels"),
    ("custom_message", "Custom messages"),
)


def plain_snippet(text: str, query: str, width: int = 90) -> str:
    flat = " ".join(text.split())
    m = re.search(re.escape(query), flat, re.I)
    lo = max(0, m.start() - width) if m else 0
    hi = min(len(flat), (m.end() if m else 0) + width) if m else min(len(flat), 2 * width)
    return ("…" if lo else "") + flat[lo:hi] + ("…" if hi < len(flat) else "")


def as_json(request: HtmxHttpRequest, q: str, results: list[dict[str, Any]]) -> HttpResponse:
    """The narrow retrieval form: id, snippet and where it came from; the full entry is one
    request away (`url`), so callers read whole texts only when they need them."""
    return VisibleJsonResponse(
        {
            "query": q,
            "results": [
                {
                    "session": r["session"].session_id,
                    "session_name": r["session"].display_name,
                    "entry_id": r["entry_id"],
                    "type": r["type"],
                    "role": r["role"],
                    "snippet": r["plain"],
                    "url": request.build_absolute_uri(
                        reverse("explorer:entry", args=[r["session"].pk])
                        + "?"
                        + urlencode({"id": r["entry_id"], "raw": "1"})
                    ),
                }
                for r in results
            ],
        }
    )


def run_search(
    query: str, *, session: Session | None = None, entry_type: str = ""
) -> list[dict[str, Any]]:
    qs = Entry.objects.all() if session is None else Entry.objects.filter(session=session)
    if entry_type:
        qs = qs.filter(type=entry_type)
    # The raw line is JSON: match the query as JSON would spell it, then confirm on the text.
    needle = jsonfmt.dumps(query)[1:-1]
    qs = qs.filter(raw__icontains=needle).order_by("session_id", "position")
    results = []
    for row in qs.select_related("session").only(
        "entry_id", "type", "role", "raw", "session__id", "session__name", "session__session_id"
    )[: MAX_RESULTS * 4]:
        try:
            data = jsonfmt.loads(row.raw)
        except ValueError:
            continue
        text = entry_text(data) if isinstance(data, dict) else ""
        if query.lower() not in text.lower():
            continue  # matched only in metadata (ids, signatures): not a useful hit
        results.append(
            {
                "session": row.session,
                "entry_id": row.entry_id,
                "type": row.type,
                "role": row.role,
                "snippet": html.highlight(text, query),
                "plain": plain_snippet(text, query),
            }
        )
        if len(results) >= MAX_RESULTS:
            break
    return results


def _query(request: HtmxHttpRequest) -> tuple[str, str]:
    q = (request.GET.get("q") or "").strip()[:200]
    t = request.GET.get("type") or ""
    return q, t if t in dict(TYPES) else ""


@viewer_required
@require_GET
def session_search(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    q, t = _query(request)
    ctx = session_frame(request, session, "search", cursor)
    ctx.update(
        {
            "q": q,
            "type": t,
            "types": TYPES,
            "results": run_search(q, session=session, entry_type=t) if len(q) >= 2 else [],
            "scope": "session",
            "too_short": 0 < len(q) < 2,
        }
    )
    if request.GET.get("format") == "json":
        return as_json(request, q, ctx["results"])
    return render_panel(request, "explorer/search.html", "search-results", ctx)


@viewer_required
@require_GET
def global_search(request: HtmxHttpRequest) -> HttpResponse:
    q, t = _query(request)
    ctx = {
        "q": q,
        "type": t,
        "types": TYPES,
        "results": run_search(q, entry_type=t) if len(q) >= 2 else [],
        "scope": "all",
        "too_short": 0 < len(q) < 2,
    }
    if request.GET.get("format") == "json":
        return as_json(request, q, ctx["results"])
    return render_panel(request, "explorer/search_all.html", "search-results", ctx)
