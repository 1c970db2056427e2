"""Search inside a session and across sessions: every hit counted, grouped by session, paged."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from explorer import archives, html, params, queries
from explorer.analysis.snippets import snippet_source
from explorer.permissions import get_session_for_user, viewer_required
from explorer.views.common import (
    HtmxHttpRequest,
    render_panel,
    resolve_cursor,
    session_frame,
    shared_fragment,
)
from explorer.views.jsonapi import json_page, wants_json

SESSION_PAGE = "explorer/search.html"
TYPES = (
    ("", "Any type"),
    ("message", "Messages"),
    ("compaction", "Compactions"),
    ("branch_summary", "Branch summaries"),
    ("label", "Labels"),
    ("custom_message", "Custom messages"),
)


def plain_snippet(text: str, query: str, width: int = 90) -> str:
    """The text around the first match, as plain text (for JSON)."""
    flat = " ".join(text.split())
    m = re.search(re.escape(query), flat, re.I)
    lo = max(0, m.start() - width) if m else 0
    hi = min(len(flat), (m.end() if m else 0) + width) if m else min(len(flat), 2 * width)
    return ("…" if lo else "") + flat[lo:hi] + ("…" if hi < len(flat) else "")


def _params(request: HtmxHttpRequest) -> tuple[str, str, int]:
    q = (request.GET.get("q") or "").strip()[:200]
    t = request.GET.get("type") or ""
    offset = params.int_param(request.GET.get("offset"), 0, 0, 10**9)
    return q, t if t in dict(TYPES) else "", offset


def search_context(request: HtmxHttpRequest, session=None, *, exact: bool = True) -> dict[str, Any]:
    """The one builder of a search page, its partial, its count and its JSON.

    ``exact=False`` (a session's page): a big session's first search of a word lists its
    first hits at once and leaves ``found.total`` None when there are more; the page then
    asks :func:`session_search_count` for the count, so a reader does not wait for every
    hit to be matched before seeing the first ones."""
    q, t, offset = _params(request)
    # Hits in archived branches are left out unless shown (then marked): "N archived · show".
    shown = archives.wants_shown(request.GET)
    hide = archives.hidden_by_session(session)
    found = (
        queries.search_entries(
            q, session=session, entry_type=t, offset=offset, exact=exact, hide=hide
        )
        if len(q) >= 2
        else None
    )
    left_out = found.get("left_out", 0) if found else 0
    if found and shown and left_out:
        found = queries.search_entries(q, session=session, entry_type=t, offset=offset)
    keep = [(archives.SHOW_PARAM, archives.SHOW_VALUE)] if shown else []
    results = []
    for hit in found["hits"] if found else []:
        # The readable text around the first match only (a multi-MB hit is not read whole).
        source = snippet_source(hit["text"], q)
        results.append(
            {
                **hit,
                "snippet": html.highlight(source, q),
                "plain": plain_snippet(source, q),
                "archived": hit["entry_id"] in hide.get(hit["session_id"], ()),
            }
        )
    next_url = None
    if found and found["next_offset"] is not None:
        next_url = (
            request.path
            + "?"
            + urlencode([("q", q), ("type", t), ("offset", found["next_offset"]), *keep])
        )
    return {
        **_form_context(q, t, session),
        "found": found,
        "results": results,
        "first": offset + 1,
        "last": offset + len(results),
        "next_url": next_url,
        "prev_url": request.path
        + "?"
        + urlencode(
            [("q", q), ("type", t), ("offset", max(0, offset - queries.SEARCH_PAGE)), *keep]
        )
        if offset
        else None,
        "too_short": 0 < len(q) < 2,
        "archived_count": left_out,
        "archived_shown": shown,
        "archived_toggle_url": archives.toggle_url(request.path, request.GET, shown),
        "count_url": reverse("explorer:session_search_count", args=[session.pk])
        + "?"
        + urlencode({"q": q, "type": t, "offset": offset})
        if session is not None
        else None,
        "exact_url": request.path
        + "?"
        + urlencode({"q": q, "type": t, "offset": offset, "exact": 1}),
    }


def _form_context(q: str, t: str, session) -> dict[str, Any]:
    """What the search form shows (outside the results)."""
    return {"q": q, "type": t, "types": TYPES, "scope": "session" if session is not None else "all"}


def as_json(request: HtmxHttpRequest, ctx: dict[str, Any]) -> HttpResponse:
    """The sessions with their hit counts, this page of hits and ``next``; every hit counted
    (``total``), except in a big session's first answer for a common word, which lists the
    first hits at once with ``total`` null and ``exact`` (the same answer counted), as its
    page does.

    The narrow retrieval form: id, plain-text snippet and where it came from; the full entry
    is one request away (``url``)."""
    found = ctx["found"] or {"total": 0, "sessions": [], "offset": 0}

    def entry_url(pk: int, entry_id: str) -> str:
        path = reverse("explorer:entry", args=[pk]) + "?" + urlencode({"id": entry_id, "raw": "1"})
        return request.build_absolute_uri(path)

    return json_page(
        {
            "query": ctx["q"],
            "type": ctx["type"],
            "total": found["total"],
            "sessions": [
                {
                    "session": s["session"].session_id,
                    "session_name": s["session"].display_name,
                    "hits": s["hits"],
                    "url": request.build_absolute_uri(
                        reverse("explorer:session_search", args=[s["session"].pk])
                        + "?"
                        + urlencode({"q": ctx["q"], "type": ctx["type"], "format": "json"})
                    ),
                }
                for s in found["sessions"]
            ],
            "offset": found["offset"],
            "exact": request.build_absolute_uri(ctx["exact_url"] + "&format=json")
            if found["total"] is None
            else None,
            "capped": ctx["next_url"] is not None,
            "next": request.build_absolute_uri(ctx["next_url"] + "&format=json")
            if ctx["next_url"]
            else None,
            "results": [
                {
                    "session": r["session"].session_id,
                    "session_name": r["session"].display_name,
                    "entry_id": r["entry_id"],
                    "type": r["type"],
                    "role": r["role"],
                    "snippet": r["plain"],
                    "url": entry_url(r["session"].pk, r["entry_id"]),
                }
                for r in ctx["results"]
            ],
        }
    )


@viewer_required
@require_GET
def session_search(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "search", cursor)
    q, t, offset = _params(request)
    # exact=1: the count's link, for a reader without scripts (and a JSON client)
    exact = request.GET.get("exact") == "1" or (
        len(q) >= 2 and queries.search_is_counted(q, session, t)
    )
    if wants_json(request):
        return as_json(request, ctx | search_context(request, session, exact=exact))
    # The results are the same for every reader of this query: drawn once per version.
    ctx.update(_form_context(q, t, session))
    ctx["results_html"] = shared_fragment(
        session, f"{request.path}:{offset}:{t}:{q}:{int(exact)}:{int(archives.wants_shown(request.GET))}", f"{SESSION_PAGE}#search-results",
        lambda: ctx | search_context(request, session, exact=exact),
    )  # fmt: skip
    return render_panel(request, SESSION_PAGE, "search-results", ctx)


@viewer_required
@require_GET
def session_search_count(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The count line of a session's search, every hit counted: what the page asks for when
    it listed a big session's first hits before counting them (the hits are then kept, so
    the next pages and the same search again read them by id)."""
    session = get_session_for_user(request, pk)
    ctx = {"session": session, **search_context(request, session)}
    response = render(request, "explorer/partials/_search_count.html", ctx)
    response["Vary"] = "HX-Request"
    return response


@viewer_required
@require_GET
def global_search(request: HtmxHttpRequest) -> HttpResponse:
    ctx = search_context(request)
    if wants_json(request):
        return as_json(request, ctx)
    return render_panel(request, "explorer/search_all.html", "search-results", ctx)
