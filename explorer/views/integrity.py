"""Integrity panel: what in this session's tree cannot be trusted, and where."""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from explorer import treedata
from explorer.models import Entry, ImportProblem
from explorer.permissions import get_session_for_user, viewer_required
from explorer.views.common import render_panel, resolve_cursor, session_frame

TEMPLATE = "explorer/integrity.html"
LIMIT = 200


def check_integrity(session) -> dict[str, list[dict[str, Any]]]:
    """Dangling parents, cycles, compactions keeping an off-path entry, edits whose target
    cannot be edited, tool results without a call. Cached until the session changes."""
    key = "explorer:integrity:" + treedata.content_key(session)
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
        k: [] for k in ("dangling", "cycles", "compactions", "edits", "orphan_results")
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
    data = treedata.load_entries(
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
    # Tool results: the call must be in an assistant message above them (near: same turn).
    results = [r[0] for r in rows if r[3] == "toolResult"]
    for k in range(0, len(results), 2000):
        chunk = results[k : k + 2000]
        parents = {}
        for rid in chunk:
            anc = []
            for a in ancestors(rid, 64):
                if kind[a][1] == "assistant":
                    anc.append(a)
                    break
            parents[rid] = anc[0] if anc else None
        rdata = treedata.load_entries(session, chunk + [p for p in parents.values() if p])
        for rid in chunk:
            m = rdata.get(rid, {}).get("message") or {}
            cid = m.get("toolCallId") if isinstance(m, dict) else None
            a = parents[rid]
            am = (rdata.get(a, {}).get("message") or {}) if a else {}
            calls = (
                {
                    b.get("id")
                    for b in am.get("content") or []
                    if isinstance(b, dict) and b.get("type") == "toolCall"
                }
                if isinstance(am.get("content"), list)
                else set()
            )
            if cid not in calls and len(out["orphan_results"]) < LIMIT:
                out["orphan_results"].append(
                    {"id": rid, "line": line[rid], "detail": f"no assistant call {cid} above it"}
                )
    cache.set(key, out, 3600)
    return out


def integrity_panel(session) -> dict[str, Any]:
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
        (
            "orphan_results",
            "Tool results without calls",
            "No assistant tool call with that id above the result.",
        ),
    ]
    problems = list(ImportProblem.objects.filter(session=session)[:200])
    return {
        "sections": [{"key": k, "title": t, "help": h, "items": found[k]} for k, t, h in sections],
        "total": sum(len(v) for v in found.values()),
        "import_problems": problems,
    }


@viewer_required
@require_GET
def integrity_view(request: HttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "integrity", cursor)
    ctx.update(integrity_panel(session))
    return render_panel(request, TEMPLATE, "integrity-panel", ctx)
