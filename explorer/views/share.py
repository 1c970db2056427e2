"""Share links on the web: the pages an anonymous reader opens through a link, and the
editors' and admins' lists where links are made and revoked.

A reader's request ``/share/<token>/sessions/<pk>/<tab>/`` is served by the tab's own view
(the same builders, caches and templates a viewer gets), called with a :class:`ShareReader`
in place of a user, after this module has checked the link, the method (GET only: nothing
here can write), the tab (the link's scope) and the query (a route link is pinned to its
leaf). The answer is then made fit for a reader without an account: its links to the
session point back into the share, and every POST form (cursor moves, review forms: all of
them need a login anyway) and the raw JSON toggle are cut out, so no write and no raw line is
reachable from a share page.
"""

from __future__ import annotations

import re
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseNotAllowed,
    HttpResponseRedirect,
)
from django.shortcuts import get_object_or_404, render
from django.template.loader import render_to_string
from django.urls import Resolver404, resolve, reverse
from django.views.decorators.http import require_GET

from explorer import queries, shares
from explorer.models import ShareLink
from explorer.permissions import (
    ShareReader,
    admin_required,
    editor_required,
    get_session_for_user,
)
from explorer.views.common import HtmxHttpRequest, share_tabs

# The views a share may reach, by URL name, and the tab each belongs to.
_VIEW_TABS = {
    "session_detail": "tree",
    "graph_svg": "tree",
    "tree_chain": "tree",
    "entry": None,  # the entry panel: any tab's, checked against the scope by its id
    "transcript": "transcript",
    "context": "context",
    "compactions": "compactions",
    "compare": "compare",
    "timeline": "timeline",
    "session_search": "search",
    "session_search_count": "search",
    "integrity": "integrity",
    "review": "review",
    "review_entry": None,  # one entry's threads: only when the link carries them
}
# Query parameters a share never passes on: the JSON form of a page, the raw line, and
# ``via`` (a route link's switchers would otherwise open the routes beside it).
_DROPPED = ("format", "raw", "via")
_POST_FORM = re.compile(r"<form\b[^>]*\bmethod=\"post\"[^>]*>.*?</form>", re.S | re.I)
_RAW_JSON = re.compile(r"<details class=\"raw-json\".*?</details>", re.S)
_REVIEW_SLOT = re.compile(r"<div class=\"entry-review-slot\".*?</div>", re.S)
_COMMENT_BADGE = re.compile(r"<a class=\"badge t-comments\"[^>]*>.*?</a>", re.S)
_CSRF_HEADER = re.compile(r"\shx-headers='\{\"X-CSRFToken\": \"[^\"]*\"\}'")
_REWRITTEN_TYPES = ("text/html", "image/svg+xml")


def _address(request: HttpRequest) -> str:
    """The peer's address (the same choice the login throttle makes: never a header a
    client could set)."""
    return str(request.META.get("REMOTE_ADDR") or "unknown")


def _plain(request: HttpRequest, status: int, title: str, text: str) -> HttpResponse:
    response = HttpResponse(
        render_to_string("explorer/share_gone.html", {"title": title, "text": text}),
        status=status,
        content_type="text/html; charset=utf-8",
    )
    return _private(response)


def _private(response: HttpResponse) -> HttpResponse:
    """What every answer through a link carries: the token is in its address, so no
    referrer may carry it off, no search engine may list it, no shared cache may keep it."""
    response["Referrer-Policy"] = "no-referrer"
    response["X-Robots-Tag"] = "noindex, nofollow"
    response["Cache-Control"] = "private, no-store"
    return response


def _open(request: HttpRequest, token: str) -> ShareLink | HttpResponse:
    """The active link of ``token``, or the answer to give instead (429 guessing, 404
    unknown, 410 revoked or expired)."""
    address = _address(request)
    if shares.guessing_blocked(address):
        response = _plain(
            request, 429, "Too many tries", "Too many unknown links from this address. Try later."
        )
        response["Retry-After"] = "600"
        return response
    link = shares.find(token)
    if link is None:
        shares.count_guess(address)
        return _plain(request, 404, "No such link", "This link does not exist.")
    state = shares.state(link)
    if state != "active":
        return _plain(
            request,
            410,
            "Link no longer valid",
            f"This share link has {'been revoked' if state == 'revoked' else 'expired'}. "
            "Ask whoever sent it for a new one.",
        )
    return link


@login_not_required
def share_root(request: HttpRequest, token: str) -> HttpResponse:
    """The link itself: opens the Transcript of its route (or of the session)."""
    if request.method not in ("GET", "HEAD"):
        return _private(HttpResponseNotAllowed(["GET"]))
    opened = _open(request, token)
    if isinstance(opened, HttpResponse):
        return opened
    target = reverse("explorer:transcript", args=[opened.session_id])
    return _private(HttpResponseRedirect(shares.share_path(token) + target.lstrip("/")))


def _scoped_query(request: HttpRequest, link: ShareLink, name: str) -> bool:
    """Pin the query to the link's scope; False when it asks for what the link does not
    show (an entry off the route, another session's threads)."""
    q = request.GET.copy()
    for key in _DROPPED:
        q.pop(key, None)
    if link.leaf_id:
        q["leaf"] = link.leaf_id
        q.pop("b", None)  # a branch summary's detail lists the branch it left: not shared
        asked = (
            q.get("id") if name == "entry" else q.get("entry") if name == "review_entry" else None
        )
        if asked and queries.route_map(link.session, link.leaf_id).index(asked) is None:
            return False
    request.GET = q
    return True


@login_not_required
def share_page(request: HttpRequest, token: str, rest: str) -> HttpResponse:
    """One page (or htmx part, or graph) of the shared session, read as a viewer would."""
    if request.method != "GET":
        return _private(HttpResponseNotAllowed(["GET"]))
    opened = _open(request, token)
    if isinstance(opened, HttpResponse):
        return opened
    link = opened
    try:
        match = resolve("/" + rest)
    except Resolver404:
        raise Http404("Not part of this share") from None
    name = match.url_name or ""
    allowed = share_tabs(link)
    tab = _VIEW_TABS.get(name, "-")
    if (
        match.namespace != "explorer"
        or tab == "-"
        or (tab is not None and tab not in allowed)
        or (name == "review_entry" and not link.with_reviews)
        or match.kwargs.get("pk") != link.session_id
        or not _scoped_query(request, link, name)
    ):
        return _private(_plain(request, 404, "Not shared", "This link does not share that page."))
    request.user = ShareReader(link)
    request.share_link = link  # type: ignore[attr-defined]
    view = match.func.__wrapped__  # past viewer_required (a login); require_GET stays
    try:
        response = view(request, *match.args, **match.kwargs)
    except Http404:
        return _plain(request, 404, "Not found", "This link's session has no such page.")
    request.META["CSRF_COOKIE_NEEDS_UPDATE"] = False  # no token: nothing here posts
    shares.record_view(
        link,
        address=_address(request),
        path=request.get_full_path(),
        user_agent=request.META.get("HTTP_USER_AGENT", ""),
        page=not getattr(request, "htmx", False) and name != "graph_svg",
    )
    return _private(_for_reader(response, token, link))


def _for_reader(response: HttpResponse, token: str, link: ShareLink) -> HttpResponse:
    """The tab's answer as a share reader gets it: links into the share, no forms that
    post, no raw JSON, no CSRF token, no review section unless the link carries it."""
    pk = link.session_id
    prefix = shares.share_path(token)
    own = f"/sessions/{pk}/"
    location = response.get("Location")
    if location and location.startswith(own):
        response["Location"] = prefix + location.lstrip("/")
    if getattr(response, "streaming", False):
        return response
    if not response.get("Content-Type", "").startswith(_REWRITTEN_TYPES):
        return response
    text = response.content.decode(response.charset or "utf-8")
    text = re.sub(r"(?<=[\"'])" + re.escape(own), prefix + own.lstrip("/"), text)
    text = _POST_FORM.sub("", text)
    text = _RAW_JSON.sub("", text)
    text = _CSRF_HEADER.sub("", text)
    if not link.with_reviews:
        text = _REVIEW_SLOT.sub("", text)
    if "review" not in share_tabs(link):  # a badge would count threads the link hides
        text = _COMMENT_BADGE.sub("", text)
    response.content = text.encode(response.charset or "utf-8")
    # Only a reader's answer is rewritten, so no cookie the tab may have set is wanted.
    for cookie in list(response.cookies):
        del response.cookies[cookie]
    return response


# --- the editors' and admins' lists -------------------------------------------------------------


def _rows(links) -> list[dict[str, Any]]:
    return [{"link": link, "state": shares.state(link)} for link in links]


@editor_required
def session_shares(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The session's links; POST makes one (its URL is shown on this answer only)."""
    session = get_session_for_user(request, pk)
    created_url = ""
    error = ""
    if request.method == "POST":
        scope = request.POST.get("scope", "session")
        leaf = request.POST.get("leaf", "").strip() if scope == "route" else ""
        if scope == "route" and not leaf:
            leaf = queries.cursor_id(session, request.user) or ""
        try:
            new = shares.create(
                session,
                user=request.user,
                leaf_id=leaf or None,
                with_reviews=request.POST.get("with_reviews") == "1",
                expires_in=shares.parse_expiry(request.POST.get("expires") or "7d"),
            )
        except shares.ShareError as exc:
            error = str(exc)
        else:
            created_url = request.build_absolute_uri(new.path)
    elif request.method != "GET":
        return HttpResponseNotAllowed(["GET", "POST"])
    links = ShareLink.objects.filter(session=session).select_related("created_by")
    response = render(
        request,
        "explorer/shares.html",
        {
            "session": session,
            "rows": _rows(links),
            "created_url": created_url,
            "error": error,
            "cursor": queries.cursor_id(session, request.user),
            "max_days": shares.max_expiry().days,
            "all_sessions": False,
        },
        status=400 if error else 200,
    )
    if created_url:
        response["Cache-Control"] = "private, no-store"
        response["Referrer-Policy"] = "no-referrer"
    return response


@editor_required
def share_revoke(request: HtmxHttpRequest, pk: int, link_pk: int) -> HttpResponse:
    """Revoke a link at once (POST only)."""
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    session = get_session_for_user(request, pk)
    link = get_object_or_404(ShareLink, pk=link_pk, session=session)
    if shares.revoke(link, request.user):
        messages.success(request, f"Share link {link.pk} revoked.")
    back = request.POST.get("next")
    if back == "all":
        return HttpResponseRedirect(reverse("explorer:shares"))
    return HttpResponseRedirect(reverse("explorer:session_shares", args=[session.pk]))


@admin_required
@require_GET
def all_shares(request: HtmxHttpRequest) -> HttpResponse:
    """Every link of every session, newest first."""
    links = ShareLink.objects.select_related("session", "created_by")[:1000]
    return render(
        request,
        "explorer/shares.html",
        {"rows": _rows(links), "all_sessions": True},
    )
