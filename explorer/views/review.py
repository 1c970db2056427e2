"""Review comments: threads on entries, replies, resolving, and an approved / flagged
status per entry. Site data (never written into the session file); viewers may comment
and set statuses, only a comment's author or an admin edits or deletes it."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_GET, require_POST

from explorer import forms, queries
from explorer.permissions import can_admin, can_edit, get_session_for_user, viewer_required
from explorer.views.common import HtmxHttpRequest, render_panel, resolve_cursor, session_frame
from explorer.views.jsonapi import json_page, plain, wants_json

TEMPLATE = "explorer/review.html"
STATES = ("open", "resolved", "all")


def _back(request: HtmxHttpRequest, session) -> HttpResponse:
    """Back to the page the form was on (same site only), else the Review tab."""
    target = request.POST.get("next") or ""
    same_site = target.startswith("/") and url_has_allowed_host_and_scheme(
        target, {request.get_host()}, request.is_secure()
    )
    if not same_site:
        target = reverse("explorer:review", args=[session.pk])
    return HttpResponseRedirect(target)


def review_context(request: HtmxHttpRequest, session) -> dict:
    """The Review tab: threads (open by default, or one entry's), counts and the rights."""
    state = request.GET.get("state") if request.GET.get("state") in STATES else "open"
    entry = request.GET.get("entry") or None
    threads = queries.review_threads(
        session, entry_id=entry, state="" if state == "all" or entry else state
    )
    # Every entry's approved / flagged status, threads or not: the tab once showed none.
    statuses = queries.entry_reviews(session, [entry] if entry else None)
    for t in threads:
        t["entry_status"] = statuses.get(t["entry_id"])
    reviewed = sorted(
        ({"entry_id": k, **v} for k, v in statuses.items()), key=lambda r: r["at"], reverse=True
    )
    return {
        "threads": threads,
        "counts": queries.review_counts(session),
        "state": state,
        "entry_filter": entry,
        "statuses": statuses,
        "reviewed": reviewed,
        "status_counts": {
            s: sum(1 for r in reviewed if r["status"] == s) for s in ("approved", "flagged")
        },
        "me": request.user.pk,
        "is_admin": can_admin(request.user),
        "may_resolve_all": can_edit(request.user),
        "back": request.get_full_path(),
    }


@viewer_required
@require_GET
def review_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    data = review_context(request, session)
    if wants_json(request):
        keys = ("threads", "counts", "state", "statuses", "status_counts")
        return json_page(plain({k: data[k] for k in keys}))
    ctx = session_frame(request, session, "review", resolve_cursor(request, session))
    ctx.update(data)
    return render_panel(request, TEMPLATE, "review-panel", ctx)


@viewer_required
@require_GET
def entry_threads(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """One entry's threads and status (the entry panel loads this partial)."""
    session = get_session_for_user(request, pk)
    entry = request.GET.get("entry") or ""
    if not queries.entry_exists(session, entry):
        raise Http404("No such entry")
    ctx = {"session": session, "entry": entry, **review_context(request, session)}
    ctx["status"] = queries.entry_reviews(session, [entry]).get(entry)
    page = request.htmx.current_url_abs_path if request.htmx else None
    detail = reverse("explorer:session_detail", args=[session.pk])
    ctx["back"] = page or detail + "?" + urlencode({"entry": entry})
    if wants_json(request):
        return json_page(plain({"threads": ctx["threads"], "status": ctx["status"]}))
    return render_panel(request, TEMPLATE, "entry-threads", ctx)


@viewer_required
@require_POST
def comment_add(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    form = forms.CommentForm(request.POST, session=session, user=request.user)
    if form.is_valid():
        form.apply()
        messages.success(request, "Comment added.")
    else:
        for errors in form.errors.values():
            for m in errors:
                messages.error(request, str(m))
    return _back(request, session)


def _comment(request: HtmxHttpRequest, pk: int, comment_pk: int):
    session = get_session_for_user(request, pk)
    comment = queries.get_comment(session, comment_pk)
    if comment is None:
        raise Http404("No such comment")
    return session, comment


@viewer_required
@require_POST
def comment_edit(request: HtmxHttpRequest, pk: int, comment_pk: int) -> HttpResponse:
    """Edit or delete a comment: its author or an admin only."""
    session, comment = _comment(request, pk, comment_pk)
    if comment.author_id != request.user.pk and not can_admin(request.user):
        raise PermissionDenied("Only the author or an admin may change a comment")
    form = forms.CommentEditForm(request.POST, comment=comment, user=request.user)
    if not form.is_valid():
        return HttpResponse("A comment needs some text", status=400)
    form.apply()
    return _back(request, session)


@viewer_required
@require_POST
def thread_resolve(request: HtmxHttpRequest, pk: int, comment_pk: int) -> HttpResponse:
    """Resolve (or reopen) a thread: its author, editors and admins."""
    session, comment = _comment(request, pk, comment_pk)
    root = comment.parent or comment
    if root.author_id != request.user.pk and not can_edit(request.user):
        raise PermissionDenied("Only the thread's author or an editor may resolve it")
    form = forms.ResolveForm(request.POST, comment=comment, user=request.user)
    form.is_valid()
    form.apply()
    return _back(request, session)


@viewer_required
@require_POST
def entry_status(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Approve or flag an entry (viewers and editors alike)."""
    session = get_session_for_user(request, pk)
    form = forms.EntryReviewForm(request.POST, session=session, user=request.user)
    if not form.is_valid():
        return HttpResponse("Unknown entry or status", status=400)
    form.apply()
    return _back(request, session)
