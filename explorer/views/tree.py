"""The session tree: folded graphviz graph, indented keyboard tree, entry side panel."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import urlencode

from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
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
    explicit_leaf = bool(request.GET.get("leaf"))
    # The drawn graph and the text tree depend only on the session version and these
    # parameters, so both are cached together: repeated requests cost two cache reads.
    key = "explorer:treepage:" + hashlib.sha256(
        "|".join(
            [treedata.content_key(session), cursor or "", params["root"] or "", ",".join(params["expanded"]),
             params["selected"] or "", "1" if explicit_leaf else ""]
        ).encode()
    ).hexdigest()  # fmt: skip
    built = cache.get(key)
    if built is None:
        model = treedata.folded_tree(
            session,
            cursor=cursor,
            root=params["root"],
            expanded=params["expanded"],
            selected=params["selected"],
        )
        dot = to_dot(
            model.graph,
            href=_href_builder(session, cursor, params, explicit_leaf),
            selected=params["selected"],
        )
        svg_error = None
        try:
            svg = dot_to_svg(dot)
        except GraphRenderError as exc:
            svg, svg_error = "", str(exc)
        built = {
            "svg": svg,
            "error": svg_error,
            "rows": str(render_tree_rows(session, model, params["selected"], cursor)),
            "graph": {"nodes": len(model.graph.items), "total_entries": model.graph.total_entries,
                      "truncated": model.graph.truncated},
            "path_ids": model.path_ids,
        }  # fmt: skip
        cache.set(key, built, treedata.TREE_CACHE_SECONDS)
    svg = mark_safe(built["svg"])  # noqa: S308 - labels escaped, output checked
    svg_error = built["error"]
    rows_html = mark_safe(built["rows"])  # noqa: S308 - built with format_html
    q_base = [("leaf", cursor)] if explicit_leaf and cursor else []
    return {
        "graph_svg": svg,
        "graph_error": svg_error,
        "graph": built["graph"],
        "tree_rows": rows_html,
        "path_ids": built["path_ids"],
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


def _default_folds(rows: list, selected: str | None) -> tuple[set[int], set[int]]:
    """Side branches of the active route start folded, so the route reads as one column;
    a branch holding the selected entry stays open. Returns (collapsed rows, hidden rows)."""
    collapsed: set[int] = set()
    hidden: set[int] = set()
    n = 0
    while n < len(rows):
        item, indent = rows[n]
        if item.active and len(item.children) > 1:
            end = n + 1
            while end < len(rows) and rows[end][1] > indent:
                end += 1
            inside = range(n + 1, end)
            if inside and not any(rows[k][0].entry_id == selected for k in inside):
                collapsed.add(n)
                hidden.update(inside)
        n += 1
    return collapsed, hidden


def render_tree_rows(session, model, selected: str | None, cursor: str | None) -> SafeString:
    """The indented text tree as HTML. Built here rather than with a template include per
    row: a folded tree has up to a few hundred rows and this keeps the page's cost flat."""
    detail = reverse("explorer:session_detail", args=[session.pk])
    entry_url = reverse("explorer:entry", args=[session.pk])
    chain_url = reverse("explorer:tree_chain", args=[session.pk])
    out: list[str] = []
    rows = model.graph.rows()
    collapsed, hidden = _default_folds(rows, selected)
    for n, (item, indent) in enumerate(rows):
        node = item.node
        role = (node.role or node.type) if node else item.kind
        title = node.title if node else model.titles.get(item.entry_id, "")
        leaf = item.kind == "entry" and not item.children
        branch = len(item.children) > 1
        classes = ["tr", f"tr-{item.kind}", f"role-{role}"]
        if item.active:
            classes.append("active")
        if leaf:
            classes.append("leaf")
        if branch:
            classes.append("branch")
        if selected and item.entry_id == selected and item.kind == "entry":
            classes.append("selected")
        if n in collapsed:
            classes.append("collapsed")
        labelled = bool(node and node.label)
        tool = bool(node and (node.role == "toolResult" or "[" in (node.title or "")))
        q = urlencode({"id": item.entry_id})
        if item.kind == "chain":
            href = f"{chain_url}?{urlencode({'first': item.entry_id, 'indent': indent})}"
            text = f"⋯ {item.count} entr{'y' if item.count == 1 else 'ies'}"
            if item.side_branches:
                text += f" · {item.side_branches} side branches"
            body = format_html(
                '<a class="tr-chain" href="{}" hx-get="{}" hx-target="closest li" hx-swap="outerHTML">{} '
                '<span class="muted">(unfold)</span></a>',
                href, href, text,
            )  # fmt: skip
        elif item.kind == "subtree":
            what = "subtree" if item.merged == 1 else f"{item.merged} subtrees"
            body = format_html(
                '<a class="tr-subtree" href="{}?{}">+ {}: {} entries, {} leaves</a>',
                detail, urlencode({"root": item.entry_id}), what, item.count, item.leaves,
            )  # fmt: skip
        else:
            tags = []
            if node and node.label:
                tags.append(format_html('<span class="tag">⚑ {}</span>', node.label))
            if node and "hidden" in node.flags:
                tags.append(mark_safe('<span class="tag tag-hidden">hidden</span>'))
            elif node and "replaced" in node.flags:
                tags.append(mark_safe('<span class="tag tag-replaced">replaced</span>'))
            if leaf:
                tags.append(mark_safe('<span class="tag tag-leaf">leaf</span>'))
            if item.entry_id == cursor:
                tags.append(mark_safe('<span class="tag tag-cursor">cursor</span>'))
            body = format_html(
                '<a class="tr-entry" href="{}?{}" hx-get="{}?{}" hx-target="#entry-panel-wrap" hx-swap="innerHTML">'
                '<span class="tr-role">{}</span><span class="tr-title">{}</span>{}</a>',
                detail, urlencode({"entry": item.entry_id}), entry_url, q, role, title or "—",
                mark_safe("".join(str(t) for t in tags)),
            )  # fmt: skip
        out.append(
            format_html(
                '<li role="treeitem" tabindex="-1" class="{}" data-id="{}" data-kind="{}" data-role="{}" '
                'data-indent="{}" data-labelled="{}" data-tool="{}" aria-level="{}" style="--indent: {}"{}{}>{}</li>',
                " ".join(classes),
                item.entry_id,
                item.kind,
                role,
                indent,
                "1" if labelled else "0",
                "1" if tool else "0",
                indent + 1,
                indent,
                mark_safe(' aria-expanded="{}"'.format("false" if n in collapsed else "true"))
                if branch
                else "",
                mark_safe(" hidden") if n in hidden else "",
                body,
            )  # fmt: skip
        )
    return mark_safe("".join(out))  # noqa: S308 - every piece built with format_html


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
        entry_panel_context(request, session, panel_id, cursor, ctx["path_ids"])
        if panel_id
        else {"entry": None}
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
