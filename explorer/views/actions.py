"""Editing: context edits with a preview, undo, labels, rename, navigation, compaction.

Every action appends an entry through `explorer.services` (which records the author and
never changes raw history); moving the cursor appends nothing. Plain form posts work
without JavaScript and redirect (post/redirect/get); htmx requests get the refreshed panel.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django_htmx.http import HttpResponseClientRedirect

from explorer import queries, services
from explorer.analysis.compare import common_ancestor_index
from explorer.analysis.projection import align_projection
from explorer.permissions import editor_required, get_session_for_user
from explorer.session.describe import entry_message, entry_text, entry_title
from explorer.session.errors import SessionError
from explorer.views.common import render_panel, resolve_cursor, session_frame

REASON_TYPE = "session-explorer/edit-reason"
EDITABLE_ROLES = ("user", "assistant", "toolResult")


def _done(request: HttpRequest, url: str) -> HttpResponse:
    if getattr(request, "htmx", False):
        return HttpResponseClientRedirect(url)
    return redirect(url)


def _editable(entry: dict) -> bool:
    if entry.get("type") == "custom_message":
        return True
    m = entry_message(entry)
    return m is not None and m.get("role") in EDITABLE_ROLES


def _original_content(entry: dict) -> Any:
    if entry.get("type") == "custom_message":
        c = entry.get("content")
    else:
        c = (entry_message(entry) or {}).get("content")
    return c if isinstance(c, str | list) else ""


def _edit_entry(cursor: str | None, target: str, replacement: Any) -> dict:
    return {
        "type": "context_edit",
        "id": "(preview)",
        "parentId": cursor,
        "timestamp": "",
        "targetId": target,
        "replacement": replacement,
    }


def _context_edits_on_path(session, light) -> list[dict]:
    ids = [e.entry_id for e in light if e.type == "context_edit"]
    data = queries.load_entries(session, ids)
    return [data[i] for i in ids if i in data]


def _preview(session, cursor: str | None, target: str, replacement: Any) -> dict[str, Any]:
    light = queries.light_path(session, cursor)
    path, _ = queries.context_path(session, light)
    before = align_projection(path)
    after = align_projection([*path, _edit_entry(cursor, target, replacement)])
    changed = [r for r in after.rows if r.id == target]
    return {
        "before_tokens": before.projected_tokens,
        "after_tokens": after.projected_tokens,
        "delta": after.projected_tokens - before.projected_tokens,
        "before_messages": before.message_count,
        "after_messages": after.message_count,
        "row": changed[0] if changed else None,
        "in_context": any(r.id == target and r.status != "compacted" for r in before.rows),
    }


@editor_required
def edit_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Hide or replace one entry's model-visible content, with a preview before saving."""
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    src = request.POST if request.method == "POST" else request.GET
    target = src.get("target", "")
    data = queries.load_entries(session, [target]).get(target)
    if data is None:
        raise Http404("No such entry")
    on_path = any(e.entry_id == target for e in queries.light_path(session, cursor))
    mode = src.get("mode") or "hide"
    original = _original_content(data)
    content = src.get("content")
    if content is None:
        content = original if isinstance(original, str) else entry_text(data)
    reason = (src.get("reason") or "").strip()[:500]
    errors: list[str] = []
    if not _editable(data):
        errors.append("This entry does not contribute editable model content.")
    if not on_path:
        errors.append(
            "This entry is not on your current route; move your cursor to a leaf below it first."
        )
    replacement: Any = None if mode == "hide" else {"content": content}
    if request.method == "POST" and not errors and src.get("confirm") == "1":
        try:
            result = services.append_via_manager(
                session,
                request.user,
                cursor,
                lambda m: _append_edit(m, target, replacement, reason, request.user),
            )
        except SessionError as exc:
            errors.append(str(exc))
        else:
            edit_id = result.entries[0].entry_id if result.entries else ""
            messages.success(
                request,
                f"Context edit {edit_id} appended: {'hidden' if replacement is None else 'replaced'} {target}.",
            )
            return _done(request, reverse("explorer:context", args=[session.pk]) + f"#row-{target}")
    ctx = session_frame(request, session, "context", cursor)
    ctx.update({
        "target": target, "target_entry": data, "target_title": entry_title(data, 120), "mode": mode,
        "content": content, "reason": reason, "errors": errors, "on_path": on_path,
        "preview": _preview(session, cursor, target, replacement) if not errors else None,
        "original_text": entry_text(data, 4000),
    })  # fmt: skip
    return render_panel(
        request,
        "explorer/edit.html",
        "edit-form",
        ctx,
        status=400 if errors and request.method == "POST" else 200,
    )


def _append_edit(manager: Any, target: str, replacement: Any, reason: str, user: Any) -> str:
    edit_id = manager.append_context_edit(target, replacement)
    if reason:
        manager.append_custom_entry(
            REASON_TYPE,
            {"editId": edit_id, "targetId": target, "reason": reason, "by": user.get_username()},
        )
    return edit_id


@editor_required
def undo_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Undo an edit by appending a restoring edit (the original content as replacement)."""
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    if request.method != "POST":
        return redirect(reverse("explorer:context", args=[session.pk]))
    target = request.POST.get("target", "")
    data = queries.load_entries(session, [target]).get(target)
    if data is None:
        raise Http404("No such entry")
    try:
        services.add_context_edit(
            session, request.user, target, {"content": _original_content(data)}, leaf_id=cursor
        )
    except SessionError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, f"Restored the original content of {target} (a restoring edit was appended)."
        )
    return _done(request, reverse("explorer:context", args=[session.pk]) + f"#row-{target}")


@editor_required
def label_view(request: HttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    src = request.POST if request.method == "POST" else request.GET
    target = src.get("target", "")
    data = queries.load_entries(session, [target]).get(target)
    if data is None:
        raise Http404("No such entry")
    current = queries.current_labels(session).get(target, "")
    errors: list[str] = []
    if request.method == "POST":
        label = (src.get("label") or "").strip()[:200]
        if src.get("clear") == "1":
            label = ""
        if label == current:
            # Appending a label entry that changes nothing would only grow the history.
            errors.append(
                f"{target} already has the label “{label}”."
                if label
                else f"{target} has no label to clear."
            )
        else:
            try:
                services.set_label(session, request.user, target, label or None, leaf_id=cursor)
            except SessionError as exc:
                errors.append(str(exc))
        if not errors:
            messages.success(
                request, f"Label {'set to “' + label + '”' if label else 'cleared'} on {target}."
            )
            return _done(
                request,
                reverse("explorer:session_detail", args=[session.pk])
                + "?"
                + urlencode({"entry": target}),
            )
    ctx = session_frame(request, session, "tree", cursor)
    ctx.update(
        {
            "target": target,
            "target_title": entry_title(data, 120),
            "current": current,
            "errors": errors,
        }
    )
    return render_panel(
        request, "explorer/label.html", "label-form", ctx, status=400 if errors else 200
    )


@editor_required
def rename_view(request: HttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    errors: list[str] = []
    if request.method == "POST":
        name = request.POST.get("name", "")[:500]
        try:
            services.rename_session(session, request.user, name, leaf_id=cursor)
        except SessionError as exc:
            errors.append(str(exc))
        else:
            messages.success(
                request, "Session renamed." if name.strip() else "Session name cleared."
            )
            return _done(request, reverse("explorer:session_detail", args=[session.pk]))
    ctx = session_frame(request, session, "tree", cursor)
    ctx.update({"errors": errors})
    return render_panel(
        request, "explorer/rename.html", "rename-form", ctx, status=400 if errors else 200
    )


def _abandoned(session, old: str | None, target: str) -> list[dict]:
    if not old:
        return []
    lo, lt = queries.light_path(session, old), queries.light_path(session, target)
    k = common_ancestor_index([e.entry_id for e in lo], [e.entry_id for e in lt])
    return queries.full_path(session, lo[k + 1 :])


@editor_required
def navigate_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Move your cursor to another entry; optionally leave a branch summary behind."""
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    src = request.POST if request.method == "POST" else request.GET
    target = src.get("target", "")
    if not queries.entry_exists(session, target):
        raise Http404("No such entry")
    summary_mode = src.get("summary") or "none"
    errors: list[str] = []
    abandoned = _abandoned(session, cursor, target)
    if request.method == "POST":
        try:
            if summary_mode == "none" or not abandoned:
                services.move_cursor(session, request.user, target)
                note = f"Cursor moved to {target}."
            else:
                text = (src.get("summary_text") or "").strip()
                details = None
                usage = None
                if summary_mode != "custom" or not text:
                    from explorer.session.branch_summary import generate_branch_summary
                    from explorer.session.summarizers import summarizer_from_env

                    res = generate_branch_summary(abandoned, summarizer_from_env())
                    if res.error or res.aborted or not res.summary:
                        raise SessionError(res.error or "Branch summarization was aborted")
                    text, details, usage = res.summary, res.details, res.usage
                services.branch_with_summary(
                    session,
                    request.user,
                    target,
                    text,
                    details=details,
                    usage=usage,
                    leaf_id=cursor,
                )
                note = f"Moved to {target} with a branch summary of {len(abandoned)} entries."
        except SessionError as exc:
            errors.append(str(exc))
        else:
            messages.success(request, note)
            return _done(
                request,
                reverse("explorer:session_detail", args=[session.pk])
                + "?"
                + urlencode({"entry": target}),
            )
    ctx = session_frame(request, session, "tree", cursor)
    data = queries.load_entries(session, [target]).get(target, {})
    ctx.update(
        {
            "target": target,
            "target_title": entry_title(data, 120),
            "abandoned_count": len(abandoned),
            "summary_mode": summary_mode,
            "errors": errors,
        }
    )
    return render_panel(
        request, "explorer/navigate.html", "navigate-form", ctx, status=400 if errors else 200
    )


def _keep_recent(request: HttpRequest, default: int) -> tuple[int, str | None]:
    """The "keep recent tokens" setting of a compaction request, validated."""
    raw = (request.POST.get("keep_recent") or request.GET.get("keep_recent") or "").strip()
    if not raw:
        return default, None
    try:
        value = int(raw)
    except ValueError:
        return default, f"Keep recent tokens must be a whole number, got {raw[:40]!r}."
    if not 0 <= value <= 10_000_000:
        return default, "Keep recent tokens must be between 0 and 10,000,000."
    return value, None


@editor_required
def compact_view(request: HttpRequest, pk: int) -> HttpResponse:
    """Dry run (cut point and summary preview) on GET; apply on POST.

    The "keep recent tokens" setting is the user's: Pi's default (20,000) keeps a small
    session whole, so the form lets a reviewer try a smaller tail before applying.
    """
    from dataclasses import replace

    from explorer.session import compaction, tokens
    from explorer.session.summarizers import summarizer_from_env

    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    errors: list[str] = []
    defaults = tokens.DEFAULT_COMPACTION_SETTINGS
    keep_recent, keep_error = _keep_recent(request, defaults.keep_recent_tokens)
    if keep_error:
        errors.append(keep_error)
    settings = replace(defaults, keep_recent_tokens=keep_recent)
    if request.method == "POST" and not keep_error:
        try:
            services.compact_now(session, request.user, leaf_id=cursor, settings=settings)
        except SessionError as exc:
            errors.append(str(exc))
        else:
            messages.success(request, "Compaction appended.")
            return _done(request, reverse("explorer:compactions", args=[session.pk]))
    light = queries.light_path(session, cursor)
    path, _ = queries.context_path(session, light)
    prep = compaction.prepare_compaction(path, settings)
    dry: dict[str, Any] | None = None
    already = bool(light) and light[-1].type == "compaction"
    if prep is None:
        errors.append(
            "Already compacted"
            if already
            else f"Nothing to compact (session too small) while keeping the newest "
            f"{keep_recent:,} tokens: try a smaller value."
        )
    elif request.GET.get("preview") == "1" or request.method == "POST":
        try:
            result = compaction.compact(prep, summarizer_from_env())
            dry = {"summary": result.summary, "tokens_before": result.tokens_before}
        except SessionError as exc:
            errors.append(str(exc))
    first = (
        queries.load_entries(session, [prep.first_kept_entry_id]).get(prep.first_kept_entry_id, {})
        if prep
        else {}
    )
    ctx = session_frame(request, session, "compactions", cursor)
    ctx.update(
        {
            "prep": prep,
            "dry": dry,
            "errors": errors,
            "first_kept_title": entry_title(first, 120),
            "keep_recent": keep_recent,
            "already_compacted": already,
        }
    )
    return render_panel(
        request,
        "explorer/compact.html",
        "compact-form",
        ctx,
        status=400 if errors and request.method == "POST" else 200,
    )
