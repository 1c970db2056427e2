"""Secrets found in sessions: the findings of one session and of all sessions, the team's
decision on each, and an audited reveal of one secret. Entries themselves are masked at
the read edge (``queries.shown_entry``); these pages list where the secrets are."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from explorer import conf, queries
from explorer.forms import FindingStatusForm, RevealFindingForm
from explorer.models import SecretFinding
from explorer.permissions import (
    can_admin,
    can_edit,
    editor_required,
    get_session_for_user,
    viewer_required,
)
from explorer.views.common import HtmxHttpRequest, render_panel, resolve_cursor, session_frame
from explorer.views.jsonapi import finding_rows, json_page, wants_json

TEMPLATE = "explorer/secrets.html"


def may_reveal(user) -> bool:
    """Admins may reveal a secret; editors only when ``SESSIONS_EDITORS_MAY_REVEAL`` is on."""
    return can_admin(user) or (can_edit(user) and conf.editors_may_reveal())


def _status(request: HtmxHttpRequest) -> str:
    status = request.GET.get("status") or ""
    return status if status in dict(SecretFinding.STATUSES) else ""


def _rights(request: HtmxHttpRequest) -> dict[str, object]:
    return {
        "statuses": SecretFinding.STATUSES,
        "may_decide": can_edit(request.user),
        "may_reveal": may_reveal(request.user),
    }


@viewer_required
@require_GET
def session_secrets(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    ctx = session_frame(request, session, "secrets", resolve_cursor(request, session))
    status = _status(request)
    ctx.update(_rights(request))
    ctx.update(
        {
            "findings": queries.session_findings(session, status),
            "counts": queries.finding_counts(session),
            "status": status,
            "shown_limit": queries.FINDINGS_SHOWN,
        }
    )
    if wants_json(request):
        return json_page(_json(ctx))
    return render_panel(request, TEMPLATE, "secrets-panel", ctx)


@viewer_required
@require_GET
def all_secrets(request: HtmxHttpRequest) -> HttpResponse:
    status = _status(request)
    ctx = {
        "findings": queries.findings_overview(status),
        "counts": queries.finding_counts(),
        "status": status,
        "shown_limit": queries.FINDINGS_SHOWN,
        **_rights(request),
    }
    if wants_json(request):
        return json_page(_json(ctx, with_session=True))
    return render_panel(request, "explorer/secrets_all.html", "secrets-all", ctx)


def _json(ctx: dict, *, with_session: bool = False) -> dict:
    """The page's findings (masked previews only), counts and filter as JSON."""
    return {
        "status": ctx["status"] or None,
        "counts": ctx["counts"],
        "shown_limit": ctx["shown_limit"],
        "findings": finding_rows(ctx["findings"], with_session=with_session),
        "may_decide": ctx["may_decide"],
        "may_reveal": ctx["may_reveal"],
    }


def _finding(request: HtmxHttpRequest, pk: int, finding_pk: int):
    session = get_session_for_user(request, pk)
    finding = queries.get_finding(session, finding_pk)
    if finding is None:
        raise Http404("No such finding in this session")
    return session, finding


@editor_required
@require_POST
def finding_status(request: HtmxHttpRequest, pk: int, finding_pk: int) -> HttpResponse:
    session, finding = _finding(request, pk, finding_pk)
    form = FindingStatusForm(request.POST, finding=finding, user=request.user)
    if not form.is_valid():
        return HttpResponse("Unknown status", status=400)
    form.apply()
    if request.htmx:
        ctx = {"session": session, "f": finding, **_rights(request)}
        return render(request, f"{TEMPLATE}#finding-row", ctx)
    return redirect(reverse("explorer:session_secrets", args=[session.pk]))


@editor_required
@require_POST
def finding_reveal(request: HtmxHttpRequest, pk: int, finding_pk: int) -> HttpResponse:
    if not may_reveal(request.user):
        raise PermissionDenied("Revealing a secret is not allowed for your role")
    session, finding = _finding(request, pk, finding_pk)
    secret = RevealFindingForm(request.POST, finding=finding, user=request.user).apply()
    ctx = {"session": session, "f": finding, "secret": secret}
    response = render(request, "explorer/partials/secret_reveal.html", ctx)
    response["Cache-Control"] = "no-store"
    return response
