"""Two routes from their common ancestor: side by side, projection difference, costs."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from explorer import queries
from explorer.analysis.compare import common_ancestor_index, projection_diff, route_stats
from explorer.models import Entry
from explorer.permissions import get_session_for_user, viewer_required
from explorer.session.describe import entry_title
from explorer.views.common import HtmxHttpRequest, render_panel, resolve_cursor, session_frame

TEMPLATE = "explorer/compare.html"
ROUTE_SHOWN = 300


def _resolve(session, value: str | None, labels: dict[str, str]) -> str | None:
    """A leaf id, or a label text naming an entry."""
    if not value:
        return None
    if queries.entry_exists(session, value):
        return value
    for target, text in labels.items():
        if text == value:
            return target
    return None


def leaf_choices(session, labels: dict[str, str], limit: int = 200) -> list[dict[str, str]]:
    rows = (
        Entry.objects.filter(session=session, child_count=0)
        .order_by("-position")
        .values_list("entry_id", "type", "role")[:limit]
    )
    data = queries.load_entries(session, [r[0] for r in rows])
    out = [
        {"id": r[0], "title": f"{r[0]} · {r[2] or r[1]} · {entry_title(data.get(r[0], {}), 50)}"}
        for r in rows
    ]
    out += [{"id": t, "title": f"⚑ {text} ({t})"} for t, text in labels.items()]
    return out


def _role(d: dict) -> str:
    m = d.get("message") if isinstance(d, dict) else None
    return str(m.get("role", "")) if isinstance(m, dict) else ""


def compare_panel(request: HtmxHttpRequest, session, cursor: str | None) -> dict[str, Any]:
    labels = queries.current_labels(session)
    asked_a = _resolve(session, request.GET.get("a"), labels)
    a = asked_a or cursor
    b = _resolve(session, request.GET.get("b"), labels)
    ctx: dict[str, Any] = {
        "a": a,
        "b": b,
        "choices": leaf_choices(session, labels),
        "result": None,
        "bad_a": bool(request.GET.get("a")) and asked_a is None,
        "bad_b": bool(request.GET.get("b")) and b is None,
    }
    if not (a and b):
        return ctx
    la, lb = queries.light_path(session, a), queries.light_path(session, b)
    k = common_ancestor_index([e.entry_id for e in la], [e.entry_id for e in lb])
    ra, rb = la[k + 1 :], lb[k + 1 :]
    data = queries.load_entries(
        session, [e.entry_id for e in ra[-ROUTE_SHOWN:]] + [e.entry_id for e in rb[-ROUTE_SHOWN:]]
    )
    stats_data = (
        queries.load_entries(session, [e.entry_id for e in ra] + [e.entry_id for e in rb])
        if len(ra) + len(rb) <= 4000
        else data
    )
    route_a = [stats_data[e.entry_id] for e in ra if e.entry_id in stats_data]
    route_b = [stats_data[e.entry_id] for e in rb if e.entry_id in stats_data]
    sa, sb = route_stats(route_a), route_stats(route_b)
    pa, _ = queries.context_path(session, la)
    pb, _ = queries.context_path(session, lb)
    diff = projection_diff(pa, pb)
    on_cursor = {e.entry_id for e in queries.light_path(session, cursor)} if cursor else set()
    ancestor = la[k].entry_id if k >= 0 else None

    def rows(route):
        return [
            {
                "id": e.entry_id,
                "role": _role(data.get(e.entry_id, {})) or e.type,
                "title": entry_title(data.get(e.entry_id, {}), 110),
            }
            for e in route[-ROUTE_SHOWN:]
        ]

    a_abandoned = a not in on_cursor and bool(ra)
    b_abandoned = b not in on_cursor and bool(rb)
    ctx["result"] = {
        "ancestor": ancestor,
        "ancestor_title": entry_title(
            queries.load_entries(session, [ancestor]).get(ancestor, {}), 100
        )
        if ancestor
        else "",
        "route_a": rows(ra),
        "route_b": rows(rb),
        "len_a": len(ra),
        "len_b": len(rb),
        "stats_a": sa,
        "stats_b": sb,
        "diff": diff,
        "diff_counts": {s: sum(1 for d in diff if d.side == s) for s in ("both", "a", "b")},
        "diff_tokens": {
            s: sum(d.tokens for d in diff if d.side in (s, "both")) for s in ("a", "b")
        },
        "a_abandoned": a_abandoned,
        "b_abandoned": b_abandoned,
        "wasted": (sa.cost if a_abandoned else 0) + (sb.cost if b_abandoned else 0),
        "same": a == b,
    }
    return ctx


@viewer_required
@require_GET
def compare_view(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "compare", cursor)
    ctx.update(compare_panel(request, session, cursor))
    return render_panel(request, TEMPLATE, "compare-result", ctx)
