"""Secrets found in sessions: the findings of one session and of all sessions, the team's
decision on each, and an audited reveal of one secret. Entries themselves are masked at
the read edge (``queries.shown_entry``); these pages list where the secrets are."""

from __future__ import annotations

import csv
import io
import json

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from explorer import conf, queries
from explorer.forms import FindingStatusForm, RevealFindingForm
from explorer.models import AuditEvent, SecretFinding
from explorer.permissions import (
    admin_required,
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
    """Two steps: the first post (the findings page's *Reveal…*) answers the confirm form,
    which asks why; the second (``confirm`` with a reason) records the reveal, then shows
    the secret once. A post without a reason reveals nothing."""
    if not may_reveal(request.user):
        raise PermissionDenied("Revealing a secret is not allowed for your role")
    session, finding = _finding(request, pk, finding_pk)
    form = RevealFindingForm(request.POST, finding=finding, user=request.user)
    if not request.POST.get("confirm") or not form.is_valid():
        errors = [str(m) for field in ("reason",) for m in form.errors.get(field, [])]
        ctx = {"session": session, "f": finding, "asked": bool(request.POST.get("confirm")),
               "errors": errors, "reason": request.POST.get("reason", "")[:500]}  # fmt: skip
        status = 400 if request.POST.get("confirm") else 200
        return render(request, "explorer/partials/secret_reveal_confirm.html", ctx, status=status)
    secret = form.apply()
    ctx = {"session": session, "f": finding, "secret": secret}
    response = render(request, "explorer/partials/secret_reveal.html", ctx)
    response["Cache-Control"] = "no-store"
    return response


AUDIT_SHOWN = 500
AUDIT_COLUMNS = ("at", "username", "action", "session_ref", "session_name", "target", "what",
                 "reason")  # fmt: skip


@admin_required
@require_GET
def audit_list(request: HtmxHttpRequest) -> HttpResponse:
    """The audit list: reveals, context edits and deletes, newest first; admins read it here
    and download it whole (``?format=csv`` or ``?format=json``)."""
    rows = AuditEvent.objects.all()
    action = request.GET.get("action", "")
    if action in dict(AuditEvent.ACTIONS):
        rows = rows.filter(action=action)
    else:
        action = ""
    fmt = request.GET.get("format", "")
    if fmt in ("csv", "json"):
        return _audit_download(rows, fmt)
    ctx = {"events": list(rows[:AUDIT_SHOWN]), "total": rows.count(), "action": action,
           "actions": AuditEvent.ACTIONS, "shown_limit": AUDIT_SHOWN}  # fmt: skip
    return render(request, "explorer/audit.html", ctx)


def _audit_row(event: AuditEvent) -> dict[str, str]:
    row = {k: str(getattr(event, k)) for k in AUDIT_COLUMNS}
    row["at"] = event.at.isoformat()
    return row


def _audit_download(rows, fmt: str) -> HttpResponse:
    """Every row (not only the shown ones), as a file; the values are the stored text."""
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    if fmt == "json":
        data = [_audit_row(e) for e in rows.iterator()]
        response = HttpResponse(json.dumps(data, ensure_ascii=False, indent=1),
                                content_type="application/json")  # fmt: skip
    else:
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(AUDIT_COLUMNS)
        for e in rows.iterator():
            row = _audit_row(e)
            # A cell a spreadsheet would run as a formula starts with a quote instead.
            writer.writerow(["'" + v if v[:1] in ("=", "+", "-", "@") else v
                             for v in (row[k] for k in AUDIT_COLUMNS)])  # fmt: skip
        response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="audit-{stamp}.{fmt}"'
    response["Cache-Control"] = "no-store"
    return response
