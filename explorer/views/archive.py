"""Archive and unarchive a branch (editors, POST only) from the tree's entry panel.

Plain form posts answer with a redirect back to the entry on the Tree tab (post /
redirect / get) and say what happened; what is refused is said too, nothing half-done.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from explorer import services
from explorer.permissions import editor_required, get_session_for_user
from explorer.views.common import HtmxHttpRequest
from explorer.views.jsonapi import json_page, wants_json


class ArchiveForm(forms.Form):
    target = forms.CharField(max_length=200)
    reason = forms.CharField(max_length=services.ARCHIVE_REASON_MAX, required=False)


def _back(session, entry_id: str) -> str:
    url = reverse("explorer:session_detail", args=[session.pk])
    return url + "?" + urlencode({"entry": entry_id, "archived": "show"}) if entry_id else url


def _answer(request: HtmxHttpRequest, session, entry_id: str, ok: bool, note: str):
    if wants_json(request):
        return json_page({"ok": ok, "message": note}, status=200 if ok else 400)
    (messages.success if ok else messages.error)(request, note)
    return redirect(_back(session, entry_id))


@editor_required
@require_POST
def archive_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Archive the branch starting at ``target`` with a ``reason``."""
    session = get_session_for_user(request, pk)
    form = ArchiveForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
        return _answer(request, session, request.POST.get("target", "")[:200], False, errors)
    target = form.cleaned_data["target"]
    try:
        services.archive_branch(session, request.user, target, form.cleaned_data["reason"])
    except services.ArchiveRefused as exc:
        return _answer(request, session, target, False, f"Not archived: {exc}")
    return _answer(request, session, target, True, f"Archived the branch starting at {target}.")


@editor_required
@require_POST
def unarchive_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Bring the branch starting at ``target`` back."""
    session = get_session_for_user(request, pk)
    target = (request.POST.get("target") or "")[:200]
    if services.unarchive_branch(session, request.user, target):
        return _answer(request, session, target, True, f"Unarchived the branch at {target}.")
    return _answer(request, session, target, False, f"No archived branch starts at {target}.")
