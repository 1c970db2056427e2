"""The session tree: folded graphviz graph, indented keyboard tree, entry side panel."""

from __future__ import annotations

import functools
import html as htmllib
import itertools
import re
from typing import Any
from urllib.parse import urlencode

from django.http import HttpResponse
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString
from django.views.decorators.http import require_GET

from explorer import archives, html, params, queries, read_marks
from explorer.analysis.tree import PAGE_ROWS
from explorer.permissions import get_session_for_user, viewer_required
from explorer.queries import tree as tree_queries
from explorer.rendering import GraphRenderError, dot_to_svg
from explorer.session.graph import FoldedItem, to_dot
from explorer.views.common import (
    HtmxHttpRequest,
    render_panel,
    resolve_cursor,
    session_frame,
    shared_fragment,
    warn_missing_entry,
)
from explorer.views.entry import shared_entry_panel
from explorer.views.jsonapi import json_page

TEMPLATE = "explorer/session_detail.html"
FILTERS = (("all", "All"), ("notools", "No tools"), ("user", "User only"), ("labelled", "Labelled"))


def _params(request: HtmxHttpRequest) -> dict[str, Any]:
    expanded = [e for e in request.GET.getlist("expand") if e][:20]
    return {
        "root": request.GET.get("root") or None,
        "expanded": expanded,
        "selected": request.GET.get("entry") or None,
        # One page of the active route in the text tree: ending before / starting after.
        "before": request.GET.get("before") or None,
        "after": request.GET.get("after") or None,
        "filter": request.GET.get("filter")
        if request.GET.get("filter") in dict(FILTERS)
        else "all",
        "archived": archives.wants_shown(request.GET),
    }


def _href_builder(session, cursor: str | None, params: dict[str, Any], explicit_leaf: bool):
    base = reverse("explorer:session_detail", args=[session.pk])

    def href(item: FoldedItem) -> str:
        q: list[tuple[str, str]] = []
        if explicit_leaf and cursor:
            q.append(("leaf", cursor))
        if params.get("archived"):
            q.append((archives.SHOW_PARAM, archives.SHOW_VALUE))
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


def _keep_params(
    params: dict[str, Any], cursor: str | None, explicit_leaf: bool
) -> list[tuple[str, str]]:
    """The page's own query (cursor, view, selection) that paging links carry along."""
    q: list[tuple[str, str]] = [("leaf", cursor)] if explicit_leaf and cursor else []
    if params["archived"]:
        q.append((archives.SHOW_PARAM, archives.SHOW_VALUE))
    if params["root"]:
        q.append(("root", params["root"]))
    q.extend(("expand", e) for e in params["expanded"])
    if params["selected"]:
        q.append(("entry", params["selected"]))
    if params["filter"] != "all":
        q.append(("filter", params["filter"]))
    return q


def graph_context(
    request: HtmxHttpRequest, session, cursor: str | None, *, svg: bool = True, rows: bool = True
) -> dict[str, Any]:
    """One builder for the page and its graph/tree partials.

    ``svg`` / ``rows``: whether the drawn graph and the text tree are wanted (the SVG
    document needs no rows; the Live tab draws the graph from the SVG URL), so a request
    never pays for a layout or rows it does not show."""
    params = _params(request)
    explicit_leaf = bool(request.GET.get("leaf"))
    found = archives.archived(session)
    if found.ids & {cursor, params["root"]}:
        params["archived"] = True  # a route or subtree inside an archived branch: shown
    hide = frozenset() if params["archived"] else found.ids
    marked = frozenset(found.roots) if params["archived"] else frozenset()
    # The drawn graph and the text tree depend only on the session version, its masking
    # and these parameters, so each is kept under them (``queries.cached``): a repeated
    # request costs two cache reads, and the fold is built once for whichever is missing.
    name = "\x1f".join(
        [cursor or "", params["root"] or "", ",".join(params["expanded"]),
         params["selected"] or "", "1" if explicit_leaf else "", params["before"] or "",
         params["after"] or "", "archived" if params["archived"] else ""]
    )  # fmt: skip
    model = functools.cache(
        lambda: queries.folded_tree(
            session,
            cursor=cursor,
            root=params["root"],
            expanded=params["expanded"],
            selected=params["selected"],
            hide=hide,
            archived=marked,
        )
    )
    built = queries.cached(
        session,
        f"treepage5:graph:{'svg' if svg else 'nosvg'}:{name}",
        lambda: _graph_part(session, cursor, params, explicit_leaf, model(), svg),
    )
    rows_built = (
        queries.cached(
            session,
            f"treepage5:rows:{name}",
            lambda: str(
                html.render_tree_rows(
                    session,
                    model(),
                    params["selected"],
                    cursor,
                    before=params["before"],
                    after=params["after"],
                    keep=_keep_params(params, cursor, explicit_leaf),
                    viewing=explicit_leaf,
                )
            ),  # fmt: skip
        )
        if rows
        else ""
    )
    q_base = [("leaf", cursor)] if explicit_leaf and cursor else []
    shown_q = [(archives.SHOW_PARAM, archives.SHOW_VALUE)] if params["archived"] else []
    toggle_q = q_base + ([("entry", params["selected"])] if params["selected"] else [])
    detail = reverse("explorer:session_detail", args=[session.pk])
    ctx = {
        # "N archived · show": the archived branches this view leaves out (or shows marked).
        "archived_count": found.count,
        "archived_shown": params["archived"],
        "archived_toggle_url": detail
        + "?"
        + urlencode(
            toggle_q + ([] if params["archived"] else [(archives.SHOW_PARAM, archives.SHOW_VALUE)])
        ),
        "graph_svg": html.trusted(built["svg"] or ""),
        "graph_error": built["error"],
        "graph": built["graph"],
        "tree_rows": html.trusted(rows_built),
        "path_ids": built["path_ids"],
        "filters": FILTERS,
        "params": params,
        "svg_url": reverse("explorer:graph_svg", args=[session.pk])
        + "?"
        + urlencode(
            q_base
            + shown_q
            + [("root", params["root"] or "")]
            + [("expand", e) for e in params["expanded"]]
        ),  # fmt: skip
        # The Labelled filter covers labels on rows the tree does not draw (folded, other
        # routes): the list of every label comes from the session, not from the loaded rows.
        "all_labels": [
            (eid, text) for eid, text in queries.current_labels(session).items() if eid not in hide
        ],
        "reset_url": reverse("explorer:session_detail", args=[session.pk])
        + ("?" + urlencode(q_base) if q_base else ""),
    }
    if rows:  # the text tree's panel, the same for every reader of these parameters

        def panel() -> dict[str, Any]:
            # The list of every label changes only with a label entry: kept by its content.
            labels = ctx["all_labels"]
            listed = queries.kept_by(session, "all-labels", labels, lambda: str(render_to_string(
                "explorer/session_detail.html#all-labels", {"all_labels": labels})))  # fmt: skip
            return {**ctx, "session": session, "labels_html": html.trusted(listed)}

        ctx["tree_panel_html"] = shared_fragment(
            session,
            f"treepage5:{name}:{params['filter']}",
            "explorer/session_detail.html#tree-panel",
            panel,
        )
    return ctx


def _graph_part(session, cursor, params, explicit_leaf, model, svg: bool) -> dict[str, Any]:
    """The drawn graph (laid out only when ``svg``; None stands for "not drawn yet") and
    the figures the page shows beside it."""
    drawn, error = None, None
    if svg:
        dot = to_dot(
            model.graph,
            href=_href_builder(session, cursor, params, explicit_leaf),
            selected=params["selected"],
        )
        try:
            drawn = queries.by_content("svg-layout", dot, lambda: dot_to_svg(dot))
        except GraphRenderError as exc:
            drawn, error = "", str(exc)
    return {
        "svg": drawn,
        "error": error,
        "graph": {"nodes": len(model.graph.items), "total_entries": model.graph.total_entries,
                  "truncated": model.graph.truncated},
        "path_ids": model.path_ids,
    }  # fmt: skip


def tree_row_ids(rows_html: str) -> list[str]:
    """The entry ids of the text tree's rows (``data-id``), as drawn."""
    return [htmllib.unescape(eid) for eid in re.findall(r'data-id="([^"]*)"', str(rows_html))]


def _tree_json(request: HtmxHttpRequest, session: Any, cursor: str | None) -> dict:
    """One page of nodes (``after``, ``limit``) and the address of the next (``next``):
    the JSON of a 150,000-entry session stays as small as a 500-entry one's."""
    data = tree_queries.tree_nodes(
        session,
        cursor,
        after=params.int_param(request.GET.get("after"), 0, 0, 2**31 - 1),
        limit=params.int_param(
            request.GET.get("limit"),
            tree_queries.TREE_JSON_PAGE,
            1,
            tree_queries.TREE_JSON_PAGE_MAX,
        ),
    )
    following = None
    if data["next_after"] is not None:
        query = request.GET.copy()
        query["after"] = str(data["next_after"])
        query["format"] = "json"
        following = request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
    # Every node stays listed (a tool decides what to hide); the archives say which.
    return {**data, "next": following, "archived": archives.listed(session)}


@viewer_required
@require_GET
def session_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    if "arrivals" in request.GET:
        return _arrivals(request, session)
    cursor = resolve_cursor(request, session)
    if request.GET.get("format") == "json":  # the JSON API (README "JSON API")
        return json_page(_tree_json(request, session, cursor))
    ctx = session_frame(request, session, "tree", cursor)
    ctx["tip_id"] = queries.default_leaf_id(session) or ""
    ctx.update(graph_context(request, session, cursor))
    ctx["new_ids"] = read_marks.new_ids(session, ctx["seen"].mark, tree_row_ids(ctx["tree_rows"]))
    selected = ctx["params"]["selected"]
    selected_exists = bool(selected) and queries.entry_exists(session, selected)
    if selected and not selected_exists:
        warn_missing_entry(request, selected, "the cursor's entry")
    panel_id = selected if selected_exists else cursor
    ctx.update(
        shared_entry_panel(request, session, panel_id, cursor, ctx["path_ids"])
        if panel_id
        else {"entry": None}
    )
    partial = request.GET.get("partial")
    if partial not in ("graph-panel", "tree-panel", "tree-and-graph"):
        partial = "tree-and-graph"
    return render_panel(request, TEMPLATE, partial, ctx)


def _arrivals(request: HtmxHttpRequest, session) -> HttpResponse:
    """Entries written since the page was drawn (``arrivals=`` the tip it drew): the Tree
    tab says so and offers to redraw, rather than going stale without a word."""
    since = request.GET.get("arrivals") or ""
    count, _tip = queries.newer_than(session, since) if since else (0, None)
    if not count:
        return HttpResponse(status=204)
    ctx = session_frame(request, session, "tree", None)
    ctx.update({"arrived": count, "tip_id": since})
    return render_panel(request, TEMPLATE, "arrivals", ctx)


@viewer_required
@require_GET
def graph_svg(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The folded graph as a standalone SVG document (cached by content)."""
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = graph_context(request, session, cursor, rows=False)
    if ctx["graph_error"]:
        return HttpResponse(ctx["graph_error"], status=500, content_type="text/plain")
    body = str(ctx["graph_svg"])
    response = HttpResponse(body, content_type="image/svg+xml; charset=utf-8")
    response["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@viewer_required
@require_GET
def chain_rows(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Text-tree rows loaded on demand: the entries of one folded chain (`first=`), or the
    next page of the active route (`before=` / `after=` an entry, down to `stop=`, `n=`
    entries left in that direction)."""
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    raw_indent = request.GET.get("indent") or "0"
    indent = params.int_param(raw_indent, 0, 0, 500)
    before, after = request.GET.get("before"), request.GET.get("after")
    if before or after:
        rows_html = _route_page(request, session, cursor, before, after, indent)
    else:
        rows_html = _chain_page(request, session, cursor, indent)
    ctx = session_frame(request, session, "tree", cursor)
    ctx["rows_html"] = rows_html
    return render_panel(request, "explorer/tree_chain.html", None, ctx)


def _route_page(request, session, cursor, before, after, indent) -> SafeString:
    stop = request.GET.get("stop") or ""
    raw_n = request.GET.get("n") or ""
    left = params.int_param(raw_n, PAGE_ROWS, 0, 10_000_000) if raw_n else PAGE_ROWS
    take = min(left, PAGE_ROWS)
    if before:
        light = queries.path_before(session, before, stop, take) if take else []
    else:
        light = queries.path_after(session, after, stop, take, cursor) if take else []
    data = queries.load_entries(session, [e.entry_id for e in light])
    explicit_leaf = bool(request.GET.get("leaf"))
    keep: list[tuple[str, str]] = [("leaf", cursor)] if explicit_leaf and cursor else []
    selected = request.GET.get("entry") or None
    if selected:
        keep.append(("entry", selected))
    rows = html.route_entry_rows(
        session, [(e.entry_id, data.get(e.entry_id, {})) for e in light], indent=indent,
        selected=selected, cursor=cursor, flags=queries.path_flags(session, cursor),
        viewing=explicit_leaf,
    )  # fmt: skip
    remaining = left - len(light)
    reached = bool(light) and (light[0] if before else light[-1]).entry_id == stop
    if light and remaining > 0 and not reached:
        if before:
            rows.insert(0, html.page_row(session, direction="earlier", count=remaining,
                                    anchor=light[0].entry_id, stop=stop, indent=indent, keep=keep))  # fmt: skip
        else:
            rows.append(html.page_row(session, direction="later", count=remaining,
                                 anchor=light[-1].entry_id, stop=stop, indent=indent, keep=keep))  # fmt: skip
    return html.join(rows)


def _chain_page(request, session, cursor, indent) -> SafeString:
    first = request.GET.get("first", "")
    limit = PAGE_ROWS
    light = queries.chain_entries(session, first, limit=limit + 1) if first else []
    more_from = light[limit].entry_id if len(light) > limit else None
    light = light[:limit]
    # A chain that runs into an archived branch stops there (one inside a shown archived
    # branch starts in it, and is listed whole).
    hidden = archives.archived(session).ids
    if first not in hidden:
        light = list(itertools.takewhile(lambda e: e.entry_id not in hidden, light))
        more_from = more_from if len(light) == limit else None
    data = queries.load_entries(session, [e.entry_id for e in light])
    path = {e.entry_id for e in queries.light_path(session, cursor)} if cursor else set()
    labels = queries.current_labels(session)
    rows = []
    for e in light:
        rows += html.route_entry_rows(
            session, [(e.entry_id, data.get(e.entry_id, {}))], indent=indent, selected=None,
            cursor=cursor, flags={}, labels=labels, active=e.entry_id in path,
        )  # fmt: skip
    if more_from:
        rows.append(html.more_chain_row(session, more_from, indent))
    return html.join(rows)
