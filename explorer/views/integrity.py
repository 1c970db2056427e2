"""Integrity panel: what in this session's tree cannot be trusted, and where."""

from __future__ import annotations

import re
from typing import Any

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from explorer import queries
from explorer.models import Entry, ImportProblem
from explorer.permissions import get_session_for_user, viewer_required
from explorer.session import jsonfmt
from explorer.views.common import render_panel, resolve_cursor, session_frame

TEMPLATE = "explorer/integrity.html"
LIMIT = 200


def check_integrity(session) -> dict[str, list[dict[str, Any]]]:
    """Dangling parents, cycles, compactions keeping an off-path entry, edits whose target
    cannot be edited, tool results without a call. Cached until the session changes."""
    key = "explorer:integrity:" + queries.content_key(session)
    hit = cache.get(key)
    if hit is not None:
        return hit
    rows = list(
        Entry.objects.filter(session=session)
        .order_by("position")
        .values_list("entry_id", "parent_id", "type", "role", "line_no")
    )
    parent = {r[0]: r[1] for r in rows}
    line = {r[0]: r[4] for r in rows}
    kind = {r[0]: (r[2], r[3]) for r in rows}
    out: dict[str, list[dict[str, Any]]] = {
        k: [] for k in ("dangling", "cycles", "compactions", "edits")
    }
    for eid, pid, *_ in rows:
        if pid and pid not in parent and len(out["dangling"]) < LIMIT:
            out["dangling"].append(
                {"id": eid, "line": line[eid], "detail": f"parent {pid} does not exist"}
            )
    # Cycles: walk up with memo of nodes known to reach a root.
    ok: set[str] = set()
    for eid in parent:
        seen: list[str] = []
        cur: str | None = eid
        while cur and cur in parent and cur not in ok:
            if cur in seen:
                if len(out["cycles"]) < LIMIT:
                    out["cycles"].append(
                        {
                            "id": cur,
                            "line": line[cur],
                            "detail": "parent links loop back to this entry",
                        }
                    )
                break
            seen.append(cur)
            cur = parent[cur]
        ok.update(seen)

    def ancestors(eid: str, limit: int = 100000):
        cur = parent.get(eid)
        n = 0
        while cur and cur in parent and n < limit:
            yield cur
            cur = parent[cur]
            n += 1

    special = {r[0] for r in rows if r[2] in ("compaction", "context_edit") or r[3] == "toolResult"}
    special |= {r[0] for r in rows if r[3] == "assistant"}
    data = queries.load_entries(
        session, [r[0] for r in rows if r[2] in ("compaction", "context_edit")]
    )
    for eid, d in data.items():
        if d.get("type") == "compaction":
            fk = d.get("firstKeptEntryId")
            if fk != eid and fk not in set(ancestors(eid)):
                out["compactions"].append(
                    {
                        "id": eid,
                        "line": line[eid],
                        "detail": f"firstKeptEntryId {fk} is not on its path",
                    }
                )
        elif d.get("type") == "context_edit":
            t = d.get("targetId")
            if t not in parent:
                problem = f"target {t} does not exist"
            elif t not in set(ancestors(eid)):
                problem = f"target {t} is not on the edit's path"
            else:
                ty, role = kind[t]
                problem = (
                    None
                    if ty == "custom_message"
                    or (ty == "message" and role in ("user", "assistant", "toolResult"))
                    else f"target {t} ({role or ty}) does not contribute editable model content"
                )
            if problem and len(out["edits"]) < LIMIT:
                out["edits"].append({"id": eid, "line": line[eid], "detail": problem})
    cache.set(key, out, 3600)
    return out


_CALL_ID = re.compile(r'"toolCallId":"((?:[^"\\]|\\.)*)"')
_CALL_BLOCK = re.compile(r'"type":"toolCall","id":"((?:[^"\\]|\\.)*)"')


def _call_ids(raw: str) -> set[str]:
    found = set(_CALL_BLOCK.findall(raw))
    if found or '"toolCall"' not in raw:
        return found
    try:  # unusual key order: parse properly
        m = jsonfmt.loads(raw).get("message") or {}
    except (ValueError, AttributeError):
        return set()
    content = m.get("content") if isinstance(m, dict) else None
    return {
        jsonfmt.dumps(b.get("id"))[1:-1]
        for b in content or []
        if isinstance(content, list) and isinstance(b, dict) and b.get("type") == "toolCall"
    }


def check_tool_results(session) -> list[dict[str, Any]]:
    """Tool results whose call id appears in no assistant message above them (within the
    turn). Reads every tool result and assistant line, so it runs on request and is cached;
    ids are matched on the JSON text (both sides spelled the same way)."""
    key = "explorer:integrity-tools:" + queries.content_key(session)
    hit = cache.get(key)
    if hit is not None:
        return hit
    rows = list(
        Entry.objects.filter(session=session)
        .order_by("position")
        .values_list("entry_id", "parent_id", "role", "line_no")
    )
    parent = {r[0]: r[1] for r in rows}
    role = {r[0]: r[2] for r in rows}
    line = {r[0]: r[3] for r in rows}
    out: list[dict[str, Any]] = []
    results = [r[0] for r in rows if r[2] == "toolResult"]
    for k in range(0, len(results), 2000):
        chunk = results[k : k + 2000]
        owner: dict[str, str | None] = {}
        for rid in chunk:
            cur, steps, found = parent.get(rid), 0, None
            while cur and cur in parent and steps < 64:
                if role.get(cur) == "assistant":
                    found = cur
                    break
                cur, steps = parent[cur], steps + 1
            owner[rid] = found
        raws = dict(
            Entry.objects.filter(
                session=session, entry_id__in=chunk + [a for a in owner.values() if a]
            ).values_list("entry_id", "raw")
        )
        calls: dict[str, set[str]] = {}
        for rid in chunk:
            m = _CALL_ID.search(raws.get(rid, ""))
            cid = m.group(1) if m else None
            a = owner[rid]
            if a is not None and a not in calls:
                calls[a] = _call_ids(raws.get(a, ""))
            if (a is None or cid not in calls[a]) and len(out) < LIMIT:
                out.append(
                    {"id": rid, "line": line[rid], "detail": f"no assistant call {cid} above it"}
                )
    cache.set(key, out, 3600)
    return out


def integrity_panel(session, *, with_tools: bool = False) -> dict[str, Any]:
    found = check_integrity(session)
    sections = [
        (
            "dangling",
            "Dangling parents",
            "Entries whose parent id names no entry; they become extra roots.",
        ),
        ("cycles", "Cycles", "Parent links that loop; a path walk stops at the repetition."),
        (
            "compactions",
            "Compactions keeping an off-path entry",
            "firstKeptEntryId is not an ancestor: nothing before the compaction is kept.",
        ),
        (
            "edits",
            "Edits whose target cannot be edited",
            "The edit has no effect (or hides a non-editable entry).",
        ),
    ]
    problems = list(ImportProblem.objects.filter(session=session)[:200])
    tools = check_tool_results(session) if with_tools else None
    return {
        "sections": [{"key": k, "title": t, "help": h, "items": found[k]} for k, t, h in sections],
        "tools": tools,
        "total": sum(len(v) for v in found.values()) + len(tools or []),
        "import_problems": problems,
    }


@viewer_required
@require_GET
def integrity_view(request: HttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "integrity", cursor)
    with_tools = request.GET.get("section") == "tools"
    ctx.update(integrity_panel(session, with_tools=with_tools))
    partial = "tool-results" if with_tools else "integrity-panel"
    return render_panel(request, TEMPLATE, partial, ctx)
