"""The session tree: folded graphviz graph, indented keyboard tree, entry side panel."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from explorer import treedata
from explorer.explore import entry_title
from explorer.permissions import get_session_for_user, viewer_required
from explorer.rendering import GraphRenderError, dot_to_svg
from explorer.session.graph import FoldedItem, to_dot
from explorer.views.common import render_panel, resolve_cursor, session_frame
from explorer.views.entry import entry_panel_context

TEMPLATE = "explorer/session_detail.html"
FILTERS = (("all", "All"), ("notools", "No tools"), ("user", "User only"), ("labelled", "Labelled"))


def _params(request: HttpRequest) -> dict[str, Any]:
    expanded = [e for e in request.GET.getlist("expand") if e][:20]
    return {
        "root": request.GET.get("root") or None,
        "expanded": expanded,
        "selected": request.GET.get("entry") or None,
        "filter": request.GET.get("filter")
        if request.GET.get("filter") in dict(FILTERS)
        else "all",
    }


def _href_builder(session, cursor: str | None, params: dict[str, Any], explicit_leaf: bool):
    base = reverse("explorer:session_detail", args=[session.pk])

    def href(item: FoldedItem) -> str:
        q: list[tuple[str, str]] = []
        if explicit_leaf and cursor:
            q.append(("leaf", cursor))
        if params["root"]:
            q.append(("root", params["root"]))
        expanded = list(params["expanded"])
        if item.kind == "chain":
            expanded.append(item.entry_id)
        q.extend(("expand", e) for e in expanded)
        if item.kind == "subtree":
            q = [p for p in q if p[0] != "root"] + [("root", item.entry_id)]
        elif item.kind == "entry":
            q.append(("entry", item.entry_id))
        elif params["selected"]:
            q.append(("entry", params["selected"]))
        return base + "?" + urlencode(q) + "#graph"

    return href


def graph_context(request: HttpRequest, session, cursor: str | None) -> dict[str, Any]:
    """One builder for the page and its graph/tree partials."""
    params = _params(request)
    model = treedata.folded_tree(
        session,
        cursor=cursor,
        root=params["root"],
        expanded=params["expanded"],
        selected=params["selected"],
    )
    explicit_leaf = bool(request.GET.get("leaf"))
    dot = to_dot(
        model.graph,
        href=_href_builder(session, cursor, params, explicit_leaf),
        selected=params["selected"],
    )
    svg_error = None
    try:
        svg = mark_safe(dot_to_svg(dot))  # noqa: S308 - labels escaped, output checked
    except GraphRenderError as exc:
        svg, svg_error = "", str(exc)
    rows = []
    for item, indent in model.graph.rows():
        node = item.node
        rows.append(
            {
                "item": item,
                "indent": indent,
                "title": (node.title if node else model.titles.get(item.entry_id, "")),
                "role": (node.role or node.type) if node else item.kind,
                "labelled": bool(node and node.label),
                "tool": bool(node and (node.role == "toolResult" or "[" in (node.title or ""))),
                "leaf": item.kind == "entry" and not item.children,
                "branch": len(item.children) > 1,
            }
        )
    q_base = [("leaf", cursor)] if explicit_leaf and cursor else []
    return {
        "graph_svg": svg,
        "graph_error": svg_error,
        "graph": model.graph,
        "tree_rows": rows,
        "path_ids": model.path_ids,
        "filters": FILTERS,
        "params": params,
        "svg_url": reverse("explorer:graph_svg", args=[session.pk])
        + "?"
        + urlencode(
            q_base + [("root", params["root"] or "")] + [("expand", e) for e in params["expanded"]]
        ),
        "reset_url": reverse("explorer:session_detail", args=[session.pk])
        + ("?" + urlencode(q_base) if q_base else ""),
    }


@viewer_required
@require_GET
def session_detail(request: HttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "tree", cursor)
    ctx.update(graph_context(request, session, cursor))
    selected = ctx["params"]["selected"]
    panel_id = selected if selected and treedata.entry_exists(session, selected) else cursor
    ctx.update(
        entry_panel_context(request, session, panel_id, cursor) if panel_id else {"entry": None}
    )
    partial = request.GET.get("partial")
    if partial not in ("graph-panel", "tree-panel", "tree-and-graph"):
        partial = "tree-and-graph"
    return render_panel(request, TEMPLATE, partial, ctx)


@viewer_required
@require_GET
def graph_svg(request: HttpRequest, pk: int) -> HttpResponse:
    """The folded graph as a standalone SVG document (cached by content)."""
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = graph_context(request, session, cursor)
    if ctx["graph_error"]:
        return HttpResponse(ctx["graph_error"], status=500, content_type="text/plain")
    body = str(ctx["graph_svg"])
    response = HttpResponse(body, content_type="image/svg+xml")
    response["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@viewer_required
@require_GET
def chain_rows(request: HttpRequest, pk: int) -> HttpResponse:
    """The entries of one folded chain, as text-tree rows (unfolding on demand)."""
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    first = request.GET.get("first", "")
    limit = 200
    light = treedata.chain_entries(session, first, limit=limit + 1) if first else []
    more_from = light[limit].entry_id if len(light) > limit else None
    light = light[:limit]
    data = treedata.load_entries(session, [e.entry_id for e in light])
    path = {e.entry_id for e in treedata.light_path(session, cursor)} if cursor else set()
    labels = treedata.current_labels(session)
    rows = []
    for e in light:
        d = data.get(e.entry_id, {})
        title = entry_title(d, 90) if d else ""
        rows.append(
            {
                "id": e.entry_id,
                "role": e.role or e.type,
                "title": title,
                "active": e.entry_id in path,
                "labelled": e.entry_id in labels,
                "label": labels.get(e.entry_id),
                "tool": e.role == "toolResult" or "[" in title,
            }
        )
    ctx = session_frame(request, session, "tree", cursor)
    ctx.update(
        {
            "chain_rows": rows,
            "indent": int(request.GET.get("indent", "0") or 0)
            if (request.GET.get("indent") or "0").isdigit()
            else 0,
            "more_from": more_from,
        }
    )
    return render_panel(request, "explorer/tree_chain.html", None, ctx)
