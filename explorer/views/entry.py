"""One entry, readable: rendered markdown, folded thinking, tool calls paired with results."""

from __future__ import annotations

import json
from typing import Any

from django.http import Http404, HttpResponse
from django.middleware.csrf import get_token
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET

from explorer import archives, html, queries
from explorer.analysis.tool_pairs import MAX_STEPS
from explorer.items import (
    RAW_PREVIEW_CHARS,
    call_files,
    content_blocks,
    own_usage,
    pretty_json,
    text_part,
)
from explorer.models import Entry
from explorer.permissions import can_edit, get_session_for_user, viewer_required
from explorer.queries.tool_pairs import call_of, result_call
from explorer.rendering import fill_token_slots, with_token_slots
from explorer.session import jsonfmt
from explorer.session.describe import (
    cost_of,
    entry_message,
    entry_title,
    error_in_words,
    kind_name,
    provider_context_tokens,
    tokens_of,
)
from explorer.session.message_meta import message_facts
from explorer.session.messages import session_entry_to_context_messages
from explorer.views.common import HtmxHttpRequest, render_panel, resolve_cursor, session_frame
from explorer.views.jsonapi import json_page, plain

TEMPLATE = "explorer/entry.html"


def _find_results(
    session, entry_id: str, data: dict, call_ids: set[str], full: bool
) -> dict[str, dict]:
    """Tool results answering this entry's calls, looked for below it: down its chain of
    single children (of any role but a user message, which starts the next turn: a
    Claude Code reply's second call and the first call's result lie between a call and
    its own result) for at most ``MAX_STEPS`` entries; at a branch point the children
    are looked at, not descended into. A result counts only when the pairing rule
    (``tool_pairs.call_of``, the entry panel's "Result of") names this entry, so a
    call's panel and its result's never disagree (an id reused by a nearer call is that
    call's)."""
    found: dict[str, dict] = {}
    chain: list[tuple[str, str]] = [(entry_id, "assistant")]
    loaded: dict[str, dict] = {entry_id: data}
    for _ in range(MAX_STEPS):
        if len(found) == len(call_ids):
            break
        kids = queries.children_roles(session, [chain[-1][0]])[:50]
        loaded |= queries.load_entries(session, [k for k, role in kids if role == "toolResult"])
        for k, role in kids:
            m = (entry_message(loaded.get(k, {})) or {}) if role == "toolResult" else {}
            cid = m.get("toolCallId")
            if not isinstance(cid, str) or cid not in call_ids or cid in found:
                continue
            call = call_of(session, cid, reversed(chain), loaded)
            if call is not None and call.entry_id == entry_id:
                found[cid] = {
                    "entry_id": k,
                    "is_error": bool(m.get("isError")),
                    "blocks": content_blocks(m.get("content"), full=full, markdown=False),
                }
        if len(kids) != 1 or kids[0][1] == "user":
            break
        chain.append(kids[0])
    return found


def entry_panel_context(
    request: HtmxHttpRequest,
    session,
    entry_id: str,
    cursor: str | None,
    path_ids: list[str] | None = None,
) -> dict[str, Any]:
    row = Entry.objects.filter(session=session, entry_id=entry_id).first()
    if row is None:
        return {"entry": None, "missing_id": entry_id}
    full = request.GET.get("full") == "1"
    allow = queries.allowed_fingerprints(session)
    try:
        data = queries.shown_row(row, allow)
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    m = entry_message(data)
    role = (m or {}).get("role") if m else None
    blocks: list[dict] = []
    call_for: dict | None = None
    if m is not None:
        if role == "bashExecution":
            blocks = [
                {"kind": "bash", "command": str(m.get("command", "")), **text_part(str(m.get("output", "")), full, False),
                 "exit": m.get("exitCode")}
            ]  # fmt: skip
        else:
            blocks = content_blocks(
                m.get("content"),
                full=full,
                markdown=role in ("user", "assistant", "custom", "system"),
            )
        calls = {b["call_id"] for b in blocks if b["kind"] == "toolCall" and b["call_id"]}
        if calls:
            results = _find_results(session, entry_id, data, calls, full)
            for b in blocks:
                if b["kind"] == "toolCall":
                    b["result"] = results.get(b["call_id"])
        if role == "toolResult":
            call = result_call(session, row.parent_id, m.get("toolCallId"))
            if call is not None:
                call_for = {
                    "entry_id": call.entry_id,
                    "name": str(call.block.get("name", "")),
                    "arguments": pretty_json(call.block.get("arguments")),
                    "files": call_files(call.block.get("name"), call.block.get("arguments")),
                }
    elif data.get("type") in ("compaction", "branch_summary"):
        blocks = [text_part(str(data.get("summary") or ""), full, True)]
    elif data.get("type") == "custom_message":
        blocks = content_blocks(data.get("content"), full=full, markdown=True)
    # The Transcript row's and Raw vs projected's raw column's figure, by the same function.
    tokens = tokens_of(session_entry_to_context_messages(data)) if data else 0
    usage, usage_on = own_usage(session, data)
    labels = queries.current_labels(session)
    raw_text = queries.shown_raw(row.raw, allow)
    raw_cut = not full and len(raw_text) > RAW_PREVIEW_CHARS
    raw_pretty = ""
    if request.GET.get("raw") == "1":  # the raw JSON loads when its toggle is opened
        try:
            raw_pretty = (
                json.dumps(jsonfmt.loads(raw_text), indent=2, ensure_ascii=False)
                if not raw_cut
                else raw_text[:RAW_PREVIEW_CHARS]
            )
        except (ValueError, RecursionError):  # too deep to indent: shown as stored
            raw_pretty = raw_text[:RAW_PREVIEW_CHARS]
    if path_ids is None:
        path_ids = [e.entry_id for e in queries.light_path(session, cursor)] if cursor else []
    on_path = entry_id in path_ids
    edit = queries.route_map(session, cursor).edits.get(entry_id) if on_path and cursor else None
    return {
        "entry": data,
        "entry_row": row,
        "entry_id": entry_id,
        "entry_type": data.get("type", row.type),
        "entry_role": role,
        # As the tree and the Transcript name it ("tool result", not "toolResult").
        "entry_role_name": kind_name(role or data.get("type", row.type)),
        "entry_title": entry_title(data, 120) if data else "",
        "blocks": blocks,
        "call_for": call_for,
        "message": m,
        "model_name": (m or {}).get("model") if role == "assistant" else None,
        "provider": (m or {}).get("provider") if role == "assistant" else None,
        "stop_reason": (m or {}).get("stopReason") if role == "assistant" else None,
        "error_message": (m or {}).get("errorMessage") if m else None,
        "error_words": error_in_words((m or {}).get("errorMessage")) if m else "",
        "token_estimate": tokens,
        "reported_context": provider_context_tokens(data) if data else None,
        "usage": usage,
        "usage_on": usage_on,
        "cost": cost_of(data),
        "facts": message_facts(m),
        "label": labels.get(entry_id),
        "raw_pretty": raw_pretty,
        "raw_truncated": raw_cut,
        "raw_size": len(raw_text),
        "full": full,
        "on_path": on_path,
        "is_cursor": entry_id == cursor,
        "context_edit": {"state": edit[0], "by": edit[1]} if edit else None,
        "viewing": bool(request.GET.get("leaf")),
        "editable_target": data.get("type") == "custom_message"
        or role in ("user", "assistant", "toolResult"),
        "children": [
            row[:3]
            for row in Entry.objects.filter(session=session, parent_id=entry_id)
            .order_by("position")
            .values_list("entry_id", "type", "role", *queries.BY_PARENT_COLS)[:20]
        ],
    }


PANEL = "explorer/partials/entry_panel.html"


def shared_entry_panel(
    request: HtmxHttpRequest,
    session,
    entry_id: str,
    cursor: str | None,
    path_ids: list[str] | None = None,
) -> dict[str, Any]:
    """The entry panel drawn once per session version for every reader of this entry,
    cursor, role and view (the name holds them all), from :func:`entry_panel_context`, the
    builder the JSON answer reads too. The reader's CSRF token goes into the slots the kept
    panel holds for it; nothing else in it differs from one reader to the next."""
    if path_ids is None:
        path_ids = [e.entry_id for e in queries.light_path(session, cursor)] if cursor else []
    editable = can_edit(request.user)
    q = request.GET
    name = ":".join(
        ["entry-panel", entry_id, cursor or "", str(entry_id in path_ids), str(bool(q.get("leaf"))),
         str(q.get("full") == "1"), str(q.get("raw") == "1"), str(editable)]
    )  # fmt: skip

    def build() -> list[str]:
        ctx = entry_panel_context(request, session, entry_id, cursor, path_ids)
        model_editable = editable and session.agent == "pi"  # what the model saw: Pi only
        ctx |= {"session": session, "editable": editable, "model_editable": model_editable,
                "cursor": cursor}  # fmt: skip
        ctx |= archive_facts(session, entry_id)
        return with_token_slots(lambda slot: render_to_string(PANEL, {**ctx, "csrf_token": slot}))

    parts = queries.cached(session, name, build)
    panel = fill_token_slots(parts, get_token(request))
    return {"entry_id": entry_id, "entry_panel_html": html.trusted(panel)}


def archive_facts(session, entry_id: str) -> dict[str, Any]:
    """The entry's archive (when a branch starts here) and whether it lies in an archived
    branch, for the panel's note and its Archive / Unarchive forms."""
    from explorer.models import ArchivedBranch

    found = archives.archived(session)
    row = ArchivedBranch.objects.filter(session=session, entry_id=entry_id).first()
    tip_route = {e.entry_id for e in queries.light_path(session, queries.default_leaf_id(session))}
    # The route to the session's own leaf cannot be archived: no form offered there.
    return {
        "archive": row,
        "in_archived": entry_id in found.ids,
        "can_archive": entry_id not in tip_route,
    }


ENTRY_JSON_KEYS = (
    "entry_id", "entry", "entry_type", "entry_role", "entry_title", "token_estimate",
    "reported_context", "usage",
    "cost", "label", "on_path", "is_cursor", "children", "cursor",
)  # fmt: skip


@viewer_required
@require_GET
def entry_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    entry_id = request.GET.get("id", "")
    if not queries.entry_exists(session, entry_id):
        raise Http404("No such entry")
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "tree", cursor)
    if request.GET.get("format") == "json":  # the JSON API (README "JSON API")
        ctx.update(entry_panel_context(request, session, entry_id, cursor))
        return json_page(plain({k: ctx.get(k) for k in ENTRY_JSON_KEYS}))
    if request.GET.get("raw") == "1":
        ctx.update(entry_panel_context(request, session, entry_id, cursor))
        return render_panel(request, TEMPLATE, "raw-json", ctx)
    ctx.update(shared_entry_panel(request, session, entry_id, cursor))
    return render_panel(request, TEMPLATE, "entry-panel", ctx)
