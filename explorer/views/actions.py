"""Editing: context edits with a preview, undo, labels, rename, navigation, compaction.

Every action is a form of ``explorer.forms`` (validated with the engine, written through
``explorer.services``, which records the author and never changes raw history); moving the
cursor appends nothing. Plain form posts work without JavaScript and redirect
(post/redirect/get); htmx requests get the refreshed panel.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django_htmx.http import HttpResponseClientRedirect

from explorer import conf, forms, queries, services
from explorer.analysis.projection import align_projection
from explorer.permissions import editor_required, get_session_for_user
from explorer.session.describe import entry_text, entry_title
from explorer.session.errors import SessionError
from explorer.session.request_preview import (
    branch_entries_request_preview,
    compaction_request_preview,
    format_request_preview,
)
from explorer.views.common import HtmxHttpRequest, render_panel, resolve_cursor, session_frame
from explorer.views.jsonapi import json_page, plain, wants_json


def _done(request: HtmxHttpRequest, note: str, url: str, session=None) -> HttpResponse:
    if wants_json(request):
        # The leaf to aim the next write at (the caller's cursor after this one).
        leaf = queries.cursor_id(session, request.user) if session is not None else None
        return json_page({"ok": True, "message": note, "leaf": leaf})
    messages.success(request, note)
    if request.htmx:
        return HttpResponseClientRedirect(url)
    return redirect(url)


def _source(request: HtmxHttpRequest):
    return request.POST if request.method == "POST" else request.GET


def _target(session, src) -> tuple[str, dict]:
    """The entry an action names (``target=``), or 404."""
    target = src.get("target", "")
    data = queries.load_entries(session, [target]).get(target)
    if data is None:
        raise Http404("No such entry")
    return target, data


def _pinned(request: HtmxHttpRequest, cursor: str | None) -> bool:
    """Whether the page's leaf is a permalink (``?leaf=``) rather than the user's cursor."""
    leaf = request.GET.get("leaf") or request.POST.get("leaf")
    return bool(leaf) and leaf == cursor


def _form(request: HtmxHttpRequest, form_class, session, cursor, entry=None):
    return form_class(
        _source(request), session=session, user=request.user, cursor=cursor, target_entry=entry,
        pinned=_pinned(request, cursor),
    )  # fmt: skip


def _conflict(request: HtmxHttpRequest, form) -> HttpResponse | None:
    """A write refused because the leaf moved: 409 with the reason for JSON callers (and the
    leaf to aim at now); None for pages, which show the form again at the new leaf."""
    if form.conflict is None or not wants_json(request):
        return None
    data = {"ok": False, "error": str(form.conflict), "conflict": True,
            "expected_leaf": form.conflict.expected, "leaf": form.conflict.current}  # fmt: skip
    return json_page(data, status=409)


def _edit_entry(cursor: str | None, target: str, replacement: Any) -> dict:
    return {
        "type": "context_edit",
        "id": "(preview)",
        "parentId": cursor,
        "timestamp": "",
        "targetId": target,
        "replacement": replacement,
    }


# What saving the edit makes of its target, in words (the badge already names the status).
PREVIEW_EFFECTS = {
    "hidden": "the model will no longer see this entry",
    "replaced": "the model will see your replacement instead of the original",
    "same": "the model will see the original content",
    "compacted": "no effect: the entry is folded into a compaction",
}


def _effect(row) -> str:
    if row.status == "same" and "does not apply" in row.reason:
        return "no effect: an edit does not apply to this entry's role"
    return PREVIEW_EFFECTS.get(row.status, row.reason)


def _preview(session, cursor: str | None, target: str, replacement: Any) -> dict[str, Any]:
    """The context before and after the edit, on one basis: the engine's estimate with every
    message estimated, before and after (an edit leaves no provider figure to start from,
    so the usage-aware figure before it would compare a provider's count with an estimate:
    hiding a 35-token message once read 1,920 → 34). The provider-reported context before
    the edit is returned apart, for the page to label as such."""
    light = queries.light_path(session, cursor)
    path, _ = queries.context_path(session, light)
    before = align_projection(path)
    after = align_projection([*path, _edit_entry(cursor, target, replacement)])
    changed = [r for r in after.rows if r.id == target]
    row = changed[0] if changed else None
    return {
        "before_tokens": before.projected_estimate,
        "after_tokens": after.projected_estimate,
        "delta": after.projected_estimate - before.projected_estimate,
        "before_reported": before.projected_reported,
        "before_engine": before.projected_tokens,
        "before_messages": before.message_count,
        "after_messages": after.message_count,
        "row": row,
        "row_status": row.status if row else "",
        "row_effect": _effect(row) if row else "",
        "in_context": any(r.id == target and r.status != "compacted" for r in before.rows),
    }


def _panel(request, session, cursor, tab, template, partial, form, extra) -> HttpResponse:
    refused = _conflict(request, form)
    if refused is not None:
        return refused
    if form.conflict is not None and not form.pinned:
        cursor = form.conflict.current  # the form shown again aims at the leaf as it is now
    ctx = session_frame(request, session, tab, cursor)
    ctx.update({"errors": form.error_messages(), **extra})
    status = 400 if ctx["errors"] and request.method == "POST" else 200
    if wants_json(request):  # the form's preview as data, for a script to check first
        return json_page(plain({"cursor": cursor, "errors": ctx["errors"], **extra}), status=status)
    if form.conflict is not None:
        # The losing writer is told: 409, with the form shown again at the leaf as it is now
        # and the message saying why (htmx swaps the panel; a browser shows the page).
        status = 409
    return render_panel(request, template, partial, ctx, status=status)


def _refused_here(request: HtmxHttpRequest, session, what: str, tab: str) -> HttpResponse | None:
    """A Claude Code or Codex session's edit forms are not offered; asked for directly, they
    answer with the reason and the tab, before any preview (a compaction's preview calls the
    summarizer)."""
    reason = services.foreign_edit_refusal(session, what)
    if reason is None:
        return None
    messages.error(request, reason)
    url = reverse(tab, args=[session.pk])
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@editor_required
def edit_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Hide or replace one entry's model-visible content, with a preview before saving."""
    session = get_session_for_user(request, pk)
    if (
        refused := _refused_here(request, session, "context edits", "explorer:context")
    ) is not None:
        return refused
    cursor = resolve_cursor(request, session)
    target, data = _target(session, _source(request))
    form = _form(request, forms.EditForm, session, cursor, data)
    if request.method == "POST" and request.POST.get("confirm") == "1":
        note = form.perform()
        if note:
            url = reverse("explorer:context", args=[pk]) + f"#row-{target}"
            return _done(request, note, url, session)
    replacement = form.replacement()
    errors = form.error_messages()
    return _panel(request, session, cursor, "context", "explorer/edit.html", "edit-form", form, {
        "target": target, "target_entry": data, "target_title": entry_title(data, 120),
        "mode": _source(request).get("mode") or "hide",
        "content": (replacement or {}).get("content", _source(request).get("content") or ""),
        "reason": (_source(request).get("reason") or "").strip()[:500], "on_path": form.on_path(),
        "preview": _preview(session, cursor, target, replacement) if not errors else None,
        "original_text": entry_text(data, 4000),
    })  # fmt: skip


@editor_required
def undo_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Undo an edit by appending a restoring edit (the original content as replacement)."""
    session = get_session_for_user(request, pk)
    if (
        refused := _refused_here(request, session, "context edits", "explorer:context")
    ) is not None:
        return refused
    if request.method != "POST":
        return redirect(reverse("explorer:context", args=[session.pk]))
    cursor = resolve_cursor(request, session)
    target, data = _target(session, request.POST)
    form = _form(request, forms.UndoForm, session, cursor, data)
    url = reverse("explorer:context", args=[session.pk]) + f"#row-{target}"
    note = form.perform()
    if note:
        return _done(request, note, url, session)
    refused = _conflict(request, form)
    if refused is not None:
        return refused
    if form.conflict is not None and request.htmx:
        return HttpResponse(str(form.conflict), status=409, content_type="text/plain")
    for error in form.error_messages():
        messages.error(request, error)
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@editor_required
def label_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    target, data = _target(session, _source(request))
    form = _form(request, forms.LabelForm, session, cursor, data)
    if request.method == "POST":
        note = form.perform()
        if note:
            url = reverse("explorer:session_detail", args=[pk]) + "?" + urlencode({"entry": target})
            return _done(request, note, url, session)
    return _panel(request, session, cursor, "tree", "explorer/label.html", "label-form", form, {
        "target": target, "target_title": entry_title(data, 120), "current": form.current(),
    })  # fmt: skip


@editor_required
def rename_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    form = forms.RenameForm(
        request.POST if request.method == "POST" else None,
        session=session, user=request.user, cursor=cursor, pinned=_pinned(request, cursor),
    )  # fmt: skip
    if request.method == "POST":
        note = form.perform()
        if note:
            url = reverse("explorer:session_detail", args=[session.pk])
            return _done(request, note, url, session)
    return _panel(request, session, cursor, "tree", "explorer/rename.html", "rename-form", form, {})


@editor_required
def navigate_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Move your cursor to another entry; optionally leave a branch summary behind."""
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    target, data = _target(session, _source(request))
    form = _form(request, forms.NavigateForm, session, cursor, data)
    abandoned = form.abandoned()
    if request.method == "POST":
        note = form.perform()
        if note:
            url = reverse("explorer:session_detail", args=[pk]) + "?" + urlencode({"entry": target})
            return _done(request, note, url, session)
    return _panel(request, session, cursor, "tree", "explorer/navigate.html", "navigate-form", form, {
        "target": target, "target_title": entry_title(data, 120),
        "abandoned_count": len(abandoned),
        "request_text": format_request_preview(branch_entries_request_preview(abandoned))
        if abandoned
        else "",
        "summary_mode": _source(request).get("summary") or "none",
    })  # fmt: skip


@editor_required
def compact_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Dry run (cut point and summary preview) on GET; apply on POST.

    The "keep recent tokens" setting is the user's: Pi's default (20,000) keeps a small
    session whole, so the form lets a reviewer try a smaller tail before applying.
    """
    session = get_session_for_user(request, pk)
    if (
        refused := _refused_here(request, session, "compaction", "explorer:compactions")
    ) is not None:
        return refused
    cursor = resolve_cursor(request, session)
    form = _form(request, forms.CompactForm, session, cursor)
    if request.method == "POST":
        note = form.perform()
        if note:
            url = reverse("explorer:compactions", args=[session.pk])
            return _done(request, note, url, session)
    return _panel(
        request, session, cursor, "compactions", "explorer/compact.html", "compact-form", form,
        _compact_preview(request, session, form),
    )  # fmt: skip


def _compact_preview(request: HtmxHttpRequest, session, form) -> dict[str, Any]:
    """The dry run: the engine's cut point and, when asked, the summary it would store with
    the context size after it (the engine's estimate, as Raw vs projected would show it)."""
    from explorer.session import compaction

    light, path = form.route()
    prep = form.preparation()
    dry: dict[str, Any] | None = None
    if prep is not None and request.method == "GET" and request.GET.get("preview") == "1":
        try:
            result = compaction.compact(prep, conf.summarizer())
        except SessionError as exc:
            form.add_error(None, str(exc))
        else:
            entry = {
                "type": "compaction", "id": "(preview)", "parentId": form.cursor,
                "timestamp": "", **result.to_json(),
            }  # fmt: skip
            before = queries.context_summary(
                session, form.cursor, *forms.ContextWindowForm.defaults()
            )["projected_tokens"]
            after = align_projection([*path, entry]).projected_tokens
            dry = {
                "summary": result.summary,
                "tokens_before": before,
                "tokens_after": after,
                "grows": after >= before,
                "token": form.sign(result),
            }
    request_text = ""
    if prep is not None:
        request_text = format_request_preview(compaction_request_preview(path, form.settings()))
    first_id = prep.first_kept_entry_id if prep else None
    first = queries.load_entries(session, [first_id]).get(first_id, {}) if first_id else {}
    return {
        "prep": prep,
        "dry": dry,
        "first_kept_title": entry_title(first, 120),
        "keep_recent": form.settings().keep_recent_tokens,
        "request_text": request_text,
        "already_compacted": bool(light) and light[-1].type == "compaction",
    }
