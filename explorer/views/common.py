"""Helpers shared by the explorer views: page-or-partial rendering, the session frame."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString
from django_htmx.middleware import HtmxDetails

from explorer import agent_import, archives, html, queries, read_marks
from explorer.models import Session
from explorer.permissions import can_edit, can_edit_model


class HtmxHttpRequest(HttpRequest):
    """A request as the views see it: django-htmx's middleware adds ``htmx``."""

    htmx: HtmxDetails


TABS = (
    ("tree", "Tree", "explorer:session_detail"),
    ("transcript", "Transcript", "explorer:transcript"),
    ("context", "Raw vs projected", "explorer:context"),
    ("compactions", "Compactions", "explorer:compactions"),
    ("compare", "Compare", "explorer:compare"),
    ("timeline", "Timeline", "explorer:timeline"),
    ("search", "Search", "explorer:session_search"),
    ("integrity", "Integrity", "explorer:integrity"),
    ("live", "Live", "explorer:live"),
    ("review", "Review", "explorer:review"),
)


# The tabs a share link shows (``views.share``): a link to one route shows only the tabs
# that read that route; the Live tab (a socket) and the Review tab (unless the link carries
# the threads) are never shared.
SHARE_SESSION_TABS = frozenset(
    {"tree", "transcript", "context", "compactions", "compare", "timeline", "search", "integrity"}
)
SHARE_ROUTE_TABS = frozenset({"transcript", "context", "compactions", "timeline"})


def share_tabs(link: Any) -> frozenset[str]:
    """The tab keys a reader of ``link`` may open."""
    tabs = SHARE_ROUTE_TABS if link.leaf_id else SHARE_SESSION_TABS
    return tabs | {"review"} if link.with_reviews and not link.leaf_id else tabs


def route_share(request: HttpRequest) -> Any:
    """The share link of this request when it shows one route only, else None."""
    link = getattr(request, "share_link", None)
    return link if link is not None and link.leaf_id else None


def render_panel(
    request: HtmxHttpRequest,
    template: str,
    partial: str | None,
    context: dict[str, Any],
    status: int = 200,
) -> HttpResponse:
    """The whole page, or only its named partial when htmx asks (the same context either way)."""
    name = f"{template}#{partial}" if partial and request.htmx else template
    response = render(request, name, context, status=status)
    response["Vary"] = "HX-Request"
    return response


def shared_fragment(
    session: Session,
    name: str,
    template: str,
    context: dict[str, Any] | Callable[[], dict[str, Any]],
    *,
    below: str | None = None,
) -> SafeString:
    """The template (or partial) ``template`` rendered once per session version and shared
    by every reader: the heavy parts of a page that do not depend on who asks.

    ``name`` must hold everything the fragment shows besides the session version and the
    masking (the cache key's own parts): the cursor, the query parameters, the role when it
    changes what is drawn. Rendered without the request's context processors, so no CSRF
    token, message or user's name can be in it (a fragment that needs one is not shared;
    what a builder hands over of the request belongs in the name). ``context`` may be a
    builder, called only when the fragment is not kept yet. ``below``: the fragment shows
    only what that entry's ancestors hold, so it is kept across appends
    (:func:`queries.kept_below`) instead of per session version."""

    def build() -> str:
        return str(render_to_string(template, context() if callable(context) else context))

    if below is not None:
        return html.trusted(
            queries.kept_below(session, f"fragment:{template}:{name}", below, build)
        )
    return html.trusted(queries.cached(session, f"fragment:{template}:{name}", build))


def resolve_cursor(request: HtmxHttpRequest, session: Session) -> str | None:
    """`?leaf=` (a permalink to a leaf) when it names an entry; else the user's cursor."""
    leaf = request.GET.get("leaf") or request.POST.get("leaf")
    if leaf and queries.entry_exists(session, leaf):
        return leaf
    if leaf:
        warn_missing_entry(request, leaf, "your cursor")
    return queries.cursor_id(session, request.user)


def warn_missing_entry(request: HtmxHttpRequest, entry_id: str, instead: str) -> None:
    """Say so when a permalink names an entry this session does not have.

    Full pages only: an htmx fragment has no place for the notice, and the message would
    otherwise surface on some later page.
    """
    if not request.htmx:
        messages.warning(
            request, f"This session has no entry {entry_id[:80]!r}; showing {instead}."
        )


def session_frame(
    request: HtmxHttpRequest, session: Session, tab: str, cursor: str | None
) -> dict[str, Any]:
    leaf_q = f"?{urlencode({'leaf': cursor})}" if cursor and request.GET.get("leaf") else ""
    link = getattr(request, "share_link", None)
    shown = share_tabs(link) if link is not None else None
    open_threads = queries.open_thread_count(session) if shown is None or "review" in shown else 0
    return {
        "session": session,
        "tab": tab,
        "tabs": [
            {
                "key": k,
                "title": f"{t} ({open_threads})" if k == "review" and open_threads else t,
                "url": reverse(u, args=[session.pk]) + leaf_q,
                "current": k == tab,
            }
            for k, t, u in TABS
            if shown is None or k in shown
        ],
        "cursor": cursor,
        "editable": can_edit(request.user),
        "model_editable": can_edit_model(request.user, session),
        # *Continue as a Pi session*: the agent session and the Pi sessions made from it.
        "continued_from": agent_import.continued_from(session),
        "continuations": agent_import.continuations(session),
        # "New since you last looked": the reader's mark before this visit; a tab lists
        # which of the entries it shows arrived after it (``new_ids``).
        "seen": read_marks.seen(request.user, session),
        "new_ids": [],
        # The header's totals leave archived branches out (and say how many entries).
        "archived_total": archives.archived(session).count,
        "archived": archives.archived(session),
        "entries_shown": session.entry_count - len(archives.archived(session).ids),
        "leaves_shown": session.leaf_count - archives.archived(session).leaves,
    }


def entry_url(session: Session, entry_id: str, **extra: str) -> str:
    return reverse("explorer:entry", args=[session.pk]) + "?" + urlencode({"id": entry_id, **extra})
