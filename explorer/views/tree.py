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
from explorer.permissions import get_session_for_user, viewer_required
from explorer.rendering import GraphRenderError, dot_to_svg
from explorer.session.describe import entry_role, entry_title
from explorer.session.graph import FoldedItem, chain_caption, to_dot
from explorer.views.common import render_panel, resolve_cursor, session_frame, warn_missing_entry
from explorer.views.entry import entry_panel_context

TEMPLATE = "explorer/session_detail.html"
FILTERS = (("all", "All"), ("notools", "No tools"), ("user", "User only"), ("labelled", "Labelled"))


def _params(request: HttpRequest) -> dict[str, Any]:
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


def _keep_params(
    params: dict[str, Any], cursor: str | None, explicit_leaf: bool
) -> list[tuple[str, str]]:
    """The page's own query (cursor, view, selection) that paging links carry along."""
    q: list[tuple[str, str]] = [("leaf", cursor)] if explicit_leaf and cursor else []
    if params["root"]:
        q.append(("root", params["root"]))
    q.extend(("expand", e) for e in params["expanded"])
    if params["selected"]:
        q.append(("entry", params["selected"]))
    if params["filter"] != "all":
        q.append(("filter", params["filter"]))
    return q


def graph_context(request: HttpRequest, session, cursor: str | None) -> dict[str, Any]:
    """One builder for the page and its graph/tree partials."""
    params = _params(request)
    explicit_leaf = bool(request.GET.get("leaf"))
    # The drawn graph and the text tree depend only on the session version and these
    # parameters, so both are cached together: repeated requests cost two cache reads.
    key = "explorer:treepage2:" + hashlib.sha256(
        "|".join(
            [treedata.content_key(session), cursor or "", params["root"] or "", ",".join(params["expanded"]),
             params["selected"] or "", "1" if explicit_leaf else "", params["before"] or "",
             params["after"] or ""]
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
            "rows": str(render_tree_rows(
                session, model, params["selected"], cursor, before=params["before"],
                after=params["after"], keep=_keep_params(params, cursor, explicit_leaf),
            )),
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


PAGE_ROWS = 200  # entries of the active route drawn unfolded at once in the text tree


def path_window(
    path_ids: list[str], *, selected: str | None, before: str | None, after: str | None
) -> tuple[int, int]:
    """The stretch [lo, hi) of the route shown entry by entry: the page ending just before
    `before`, starting just after `after`, centred on the selected entry, or ending at the
    cursor (the route's end)."""
    n = len(path_ids)
    index = {eid: i for i, eid in enumerate(path_ids)}
    if before in index:
        hi = index[before]
        return max(0, hi - PAGE_ROWS), hi
    if after in index:
        lo = index[after] + 1
        return lo, min(n, lo + PAGE_ROWS)
    if selected in index:
        hi = min(n, max(0, index[selected] - PAGE_ROWS // 2) + PAGE_ROWS)
        return max(0, hi - PAGE_ROWS), hi
    return max(0, n - PAGE_ROWS), n


def _li(
    classes: list[str], eid: str, kind: str, role: str, indent: int, body: Any, *,
    labelled: bool = False, tool: bool = False, extra: str = "",
) -> SafeString:  # fmt: skip
    return format_html(
        '<li role="treeitem" tabindex="-1" class="{}" data-id="{}" data-kind="{}" data-role="{}" '
        'data-indent="{}" data-labelled="{}" data-tool="{}" aria-level="{}" style="--indent: {}"{}>{}</li>',
        " ".join(classes), eid, kind, role, indent, "1" if labelled else "0", "1" if tool else "0",
        indent + 1, indent, mark_safe(extra), body,  # noqa: S308 - fixed attribute text
    )  # fmt: skip


def _entry_body(
    detail: str, entry_url: str, eid: str, role: str, title: str, tags: list
) -> SafeString:
    return format_html(
        '<a class="tr-entry" href="{}?{}" hx-get="{}?{}" hx-target="#entry-panel-wrap" hx-swap="innerHTML">'
        '<span class="tr-role">{}</span><span class="tr-title">{}</span>{}</a>',
        detail, urlencode({"entry": eid}), entry_url, urlencode({"id": eid}), role, title or "—",
        mark_safe("".join(str(t) for t in tags)),  # noqa: S308 - tags built with format_html
    )  # fmt: skip


def _flag_tags(flag: str | None) -> list:
    if flag == "hidden":
        return [mark_safe('<span class="tag tag-hidden">hidden</span>')]
    if flag == "replaced":
        return [mark_safe('<span class="tag tag-replaced">replaced</span>')]
    return []


def route_entry_rows(
    session, entries: list[tuple[str, dict]], *, indent: int, selected: str | None,
    cursor: str | None, flags: dict[str, str], labels: dict[str, str] | None = None,
    active: bool = True,
) -> list[SafeString]:  # fmt: skip
    """Rows for single entries of an unfolded stretch (given as (id, parsed entry) pairs)."""
    detail = reverse("explorer:session_detail", args=[session.pk])
    entry_url = reverse("explorer:entry", args=[session.pk])
    out = []
    for eid, d in entries:
        role = entry_role(d) or str(d.get("type") or "entry")
        title = entry_title(d, 60) if d else ""
        classes = ["tr", "tr-entry", f"role-{role}"] + (["active"] if active else [])
        if selected and eid == selected:
            classes.append("selected")
        tags = _flag_tags(flags.get(eid))
        label = (labels or {}).get(eid)
        if label:
            tags.insert(0, format_html('<span class="tag">⚑ {}</span>', label))
        if eid == cursor:
            tags.append(mark_safe('<span class="tag tag-cursor">cursor</span>'))
        tool = role == "toolResult" or "[" in title
        body = _entry_body(detail, entry_url, eid, role, title, tags)
        out.append(_li(classes, eid, "entry", role, indent, body, labelled=bool(label), tool=tool))
    return out


def page_row(
    session, *, direction: str, count: int, anchor: str, stop: str, indent: int,
    keep: list[tuple[str, str]],
) -> SafeString:  # fmt: skip
    """ "Show N earlier/later": loads the next page of the route in place (htmx), or opens the
    session page at that page (a plain link). `anchor` is the entry the page starts after
    (later) or ends before (earlier); `stop` the last entry of the folded stretch."""
    side = "before" if direction == "earlier" else "after"
    detail = reverse("explorer:session_detail", args=[session.pk])
    chain_url = reverse("explorer:tree_chain", args=[session.pk])
    href = f"{detail}?{urlencode([*keep, (side, anchor)])}#text-tree"
    leaf = [p for p in keep if p[0] in ("leaf", "entry")]
    hx = f"{chain_url}?{urlencode([*leaf, (side, anchor), ('stop', stop), ('n', count), ('indent', indent)])}"
    arrow = "↑" if direction == "earlier" else "↓"
    body = format_html(
        '<a class="tr-page-link" href="{}" hx-get="{}" hx-target="closest li" hx-swap="outerHTML">'
        '{} show {} {}</a>',
        href, hx, arrow, min(count, PAGE_ROWS) if count > PAGE_ROWS else count, direction,
    )  # fmt: skip
    if count > PAGE_ROWS:
        body = format_html('{}<span class="muted small"> of {}</span>', body, count)
    return _li(
        ["tr", "tr-page", "active", f"tr-page-{direction}"], anchor, "page", "page", indent, body
    )


def render_tree_rows(
    session, model, selected: str | None, cursor: str | None, *,
    before: str | None = None, after: str | None = None, keep: list[tuple[str, str]] = (),
) -> SafeString:  # fmt: skip
    """The indented text tree as HTML. Built here rather than with a template include per
    row: a folded tree has up to a few hundred rows and this keeps the page's cost flat.

    Folded chains on the active route are unfolded inside one page of the route (at most
    PAGE_ROWS entries around the selected entry or the cursor), with "show earlier/later"
    rows at the page's edges; everything else stays as the folded graph draws it."""
    detail = reverse("explorer:session_detail", args=[session.pk])
    chain_url = reverse("explorer:tree_chain", args=[session.pk])
    out: list[str] = []
    rows = model.graph.rows()
    collapsed, hidden = _default_folds(rows, selected)
    path = model.path_ids
    lo, hi = path_window(path, selected=selected, before=before, after=after)
    index = {eid: i for i, eid in enumerate(path)}
    spans: dict[str, tuple[int, int]] = {}  # chain key -> its [a, b] on the route
    wanted: list[str] = []
    for item, _ in rows:
        if item.kind != "chain" or not item.active or not item.last_id:
            continue
        a = index.get(item.entry_id)
        b = a + item.count - 1 if a is not None else -1
        if a is None or b >= len(path) or path[b] != item.last_id:
            continue  # not one stretch of the route: leave it folded
        if b < lo or a >= hi:
            continue
        spans[item.key] = (a, b)
        wanted.extend(path[max(a, lo) : min(b, hi - 1) + 1])
    data = treedata.load_entries(session, wanted) if wanted else {}
    keep = list(keep)
    for n, (item, indent) in enumerate(rows):
        span = spans.get(item.key)
        if span is not None and n not in hidden:
            a, b = span
            if a < lo:
                out.append(page_row(session, direction="earlier", count=lo - a, anchor=path[lo],
                                    stop=path[a], indent=indent, keep=keep))  # fmt: skip
            ids = path[max(a, lo) : min(b, hi - 1) + 1]
            out.extend(
                route_entry_rows(
                    session,
                    [(i, data.get(i, {})) for i in ids],
                    indent=indent,
                    selected=selected,
                    cursor=cursor,
                    flags=model.flags,
                )  # fmt: skip
            )
            if b >= hi:
                out.append(page_row(session, direction="later", count=b - hi + 1,
                                    anchor=path[hi - 1], stop=path[b], indent=indent, keep=keep))  # fmt: skip
            continue
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
        if item.kind == "chain":
            hx = f"{chain_url}?{urlencode({'first': item.entry_id, 'indent': indent})}"
            href = hx
            at = index.get(item.entry_id) if item.active else None
            if at:  # without script: the session page at the route's page starting here
                href = f"{detail}?{urlencode([*keep, ('after', path[at - 1])])}#text-tree"
            body = format_html(
                '<a class="tr-chain" href="{}" hx-get="{}" hx-target="closest li" hx-swap="outerHTML">{} '
                '<span class="muted">(unfold)</span></a>',
                href, hx, chain_caption(item),
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
                tags += _flag_tags("hidden")
            elif node and "replaced" in node.flags:
                tags += _flag_tags("replaced")
            if leaf:
                tags.append(mark_safe('<span class="tag tag-leaf">leaf</span>'))
            if item.entry_id == cursor:
                tags.append(mark_safe('<span class="tag tag-cursor">cursor</span>'))
            body = _entry_body(detail, reverse("explorer:entry", args=[session.pk]),
                               item.entry_id, role, title, tags)  # fmt: skip
        extra = (
            ' aria-expanded="{}"'.format("false" if n in collapsed else "true") if branch else ""
        )
        if n in hidden:
            extra += " hidden"
        out.append(
            _li(
                classes,
                item.entry_id,
                item.kind,
                role,
                indent,
                body,
                labelled=labelled,
                tool=tool,
                extra=extra,
            )  # fmt: skip
        )
    return mark_safe("".join(str(x) for x in out))  # noqa: S308 - every piece built with format_html


@viewer_required
@require_GET
def session_detail(request: HttpRequest, pk: int) -> HttpResponse:
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    ctx = session_frame(request, session, "tree", cursor)
    ctx.update(graph_context(request, session, cursor))
    selected = ctx["params"]["selected"]
    selected_exists = bool(selected) and treedata.entry_exists(session, selected)
    if selected and not selected_exists:
        warn_missing_entry(request, selected, "the cursor's entry")
    panel_id = selected if selected_exists else cursor
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
    response = HttpResponse(body, content_type="image/svg+xml; charset=utf-8")
    response["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@viewer_required
@require_GET
def chain_rows(request: HttpRequest, pk: int) -> HttpResponse:
    """Text-tree rows loaded on demand: the entries of one folded chain (`first=`), or the
    next page of the active route (`before=` / `after=` an entry, down to `stop=`, `n=`
    entries left in that direction)."""
    session = get_session_for_user(request, pk)
    cursor = resolve_cursor(request, session)
    raw_indent = request.GET.get("indent") or "0"
    indent = min(int(raw_indent), 500) if raw_indent.isdigit() else 0
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
    left = min(int(raw_n), 10_000_000) if raw_n.isdigit() else PAGE_ROWS
    take = min(left, PAGE_ROWS)
    if before:
        light = treedata.path_before(session, before, stop, take) if take else []
    else:
        light = treedata.path_after(session, after, stop, take, cursor) if take else []
    data = treedata.load_entries(session, [e.entry_id for e in light])
    explicit_leaf = bool(request.GET.get("leaf"))
    keep: list[tuple[str, str]] = [("leaf", cursor)] if explicit_leaf and cursor else []
    selected = request.GET.get("entry") or None
    if selected:
        keep.append(("entry", selected))
    rows = route_entry_rows(
        session, [(e.entry_id, data.get(e.entry_id, {})) for e in light], indent=indent,
        selected=selected, cursor=cursor, flags=treedata.path_flags(session, cursor),
    )  # fmt: skip
    remaining = left - len(light)
    reached = bool(light) and (light[0] if before else light[-1]).entry_id == stop
    if light and remaining > 0 and not reached:
        if before:
            rows.insert(0, page_row(session, direction="earlier", count=remaining,
                                    anchor=light[0].entry_id, stop=stop, indent=indent, keep=keep))  # fmt: skip
        else:
            rows.append(page_row(session, direction="later", count=remaining,
                                 anchor=light[-1].entry_id, stop=stop, indent=indent, keep=keep))  # fmt: skip
    return mark_safe("".join(str(r) for r in rows))  # noqa: S308 - built with format_html


def _chain_page(request, session, cursor, indent) -> SafeString:
    first = request.GET.get("first", "")
    limit = PAGE_ROWS
    light = treedata.chain_entries(session, first, limit=limit + 1) if first else []
    more_from = light[limit].entry_id if len(light) > limit else None
    light = light[:limit]
    data = treedata.load_entries(session, [e.entry_id for e in light])
    path = {e.entry_id for e in treedata.light_path(session, cursor)} if cursor else set()
    labels = treedata.current_labels(session)
    rows = []
    for e in light:
        rows += route_entry_rows(
            session, [(e.entry_id, data.get(e.entry_id, {}))], indent=indent, selected=None,
            cursor=cursor, flags={}, labels=labels, active=e.entry_id in path,
        )  # fmt: skip
    if more_from:
        url = reverse("explorer:tree_chain", args=[session.pk])
        url += "?" + urlencode({"first": more_from, "indent": indent})
        body = format_html(
            '<a class="tr-chain" href="{}" hx-get="{}" hx-target="closest li" hx-swap="outerHTML">'
            "⋯ more (unfold)</a>",
            url, url,
        )  # fmt: skip
        rows.append(_li(["tr", "tr-chain"], more_from, "chain", "chain", indent, body))
    return mark_safe("".join(str(r) for r in rows))  # noqa: S308 - built with format_html
