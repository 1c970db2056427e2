"""The only HTML built in Python.

Everything else is templates. What lives here is markup built per row or per live message,
where a template include per row would cost more than the rest of the page (text-tree rows,
raw-versus-projected rows) or where one fragment is rendered once and sent to every viewer
(transcript rows, out-of-band swaps). Every piece is built with
``format_html`` / ``format_html_join``, so every interpolated value is escaped.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode as _urlencode

from django.http import HttpRequest
from django.middleware.csrf import get_token
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from explorer import queries
from explorer.analysis.line_texts import row_facts
from explorer.analysis.tree import PAGE_ROWS, default_folds, path_window
from explorer.line_text_store import row_facts_of
from explorer.session.describe import (
    error_in_words,
    kind_name,
)
from explorer.session.graph import chain_caption
from explorer.session.jsonfmt import visible


def urlencode(query: Any) -> str:
    """A query string of the visible form of each value: an id holding a lone surrogate or
    NUL links as the U+FFFD form its column stores (``explorer.dbtext``)."""
    pairs = query.items() if isinstance(query, dict) else query
    return _urlencode([(k, visible(v) if isinstance(v, str) else v) for k, v in pairs])


def join(pieces: Iterable[Any]) -> SafeString:
    """Concatenate pieces that were each built here (so each is already escaped)."""
    return mark_safe("".join(str(p) for p in pieces))  # noqa: S308 - pieces from format_html


def trusted(markup: str) -> SafeString:
    """Markup this module or ``rendering`` built earlier and a cache handed back as text."""
    return mark_safe(markup)  # noqa: S308 - built here or checked by rendering


# ---------------------------------------------------------------------------------------------
# The text tree


def _li(
    classes: list[str], eid: str, kind: str, role: str, indent: int, body: Any, *,
    labelled: bool = False, tool: bool = False, extra: str = "", glyph: str = "",
) -> SafeString:  # fmt: skip
    """One text-tree row; ``glyph`` is its branch mark (``├─`` a side branch starts here,
    ``└─`` the route continues after a branch point), as in Pi's ``/tree``."""
    mark = (
        format_html('<span class="tr-glyph" aria-hidden="true">{}</span>', glyph) if glyph else ""
    )
    return format_html(
        '<li role="treeitem" tabindex="-1" class="{}" data-id="{}" data-kind="{}" data-role="{}" '
        'data-indent="{}" data-labelled="{}" data-tool="{}" aria-level="{}"{}>{}{}</li>',
        " ".join([*classes[:2], f"ind-{min(indent, 10)}", *classes[2:]]), eid, kind, role, indent,
        "1" if labelled else "0", "1" if tool else "0",
        indent + 1, mark_safe(extra), mark, body,  # noqa: S308 - fixed attribute text
    )  # fmt: skip


def _entry_body(
    detail: str, entry_url: str, eid: str, role: str, title: str, tags: list
) -> SafeString:
    return format_html(
        '<a class="tr-entry" href="{}?{}" hx-get="{}?{}" hx-target="#entry-panel-wrap" hx-swap="innerHTML">'
        '<span class="tr-role" title="{}">{}</span><span class="tr-title">{}</span>{}</a>',
        detail, urlencode({"entry": eid}), entry_url, urlencode({"id": eid}), role, kind_name(role),
        title or "—",
        mark_safe("".join(str(t) for t in tags)),  # noqa: S308 - tags built with format_html
    )  # fmt: skip


def _flag_tags(flag: str | None) -> list:
    if flag == "hidden":
        return [mark_safe('<span class="tag tag-hidden">hidden</span>')]
    if flag == "replaced":
        return [mark_safe('<span class="tag tag-replaced">replaced</span>')]
    return []


def cursor_tag(viewing: bool) -> SafeString:
    """The mark of the route's end: "viewing" for a route opened by a link (``?leaf=``,
    a search hit, a branch switcher), "cursor" for the user's own cursor, which is where
    their next append goes; mixing the two up made readers think a link had moved it."""
    if viewing:
        return mark_safe(
            '<span class="tag tag-viewing" title="The route you are looking at; your cursor '
            'has not moved">viewing</span>'
        )
    return mark_safe('<span class="tag tag-cursor">cursor</span>')


def route_entry_rows(
    session, entries: list[tuple[str, dict]], *, indent: int, selected: str | None,
    cursor: str | None, flags: dict[str, str], labels: dict[str, str] | None = None,
    active: bool = True, viewing: bool = False, first_glyph: str = "",
) -> list[SafeString]:  # fmt: skip
    """Rows for single entries of an unfolded stretch (given as (id, parsed entry) pairs)."""
    detail = reverse("explorer:session_detail", args=[session.pk])
    entry_url = reverse("explorer:entry", args=[session.pk])
    return [
        _route_entry_row(
            detail,
            entry_url,
            eid,
            *row_facts(d)[1:],
            indent=indent,
            selected=selected,
            cursor=cursor,
            flag=flags.get(eid),
            label=(labels or {}).get(eid),
            active=active,
            viewing=viewing,
            glyph=first_glyph if k == 0 else "",
        )  # fmt: skip
        for k, (eid, d) in enumerate(entries)
    ]


def _route_entry_row(
    detail: str, entry_url: str, eid: str, role: str, title: str, *, indent: int,
    selected: str | None, cursor: str | None, flag: str | None, label: str | None,
    active: bool, viewing: bool, glyph: str,
) -> SafeString:  # fmt: skip
    classes = ["tr", "tr-entry", f"role-{role}"] + (["active"] if active else [])
    if selected and eid == selected:
        classes.append("selected")
    tags = _flag_tags(flag)
    if label:
        tags.insert(0, format_html('<span class="tag">⚑ {}</span>', label))
    if eid == cursor:
        tags.append(cursor_tag(viewing))
    tool = role == "toolResult" or "[" in title
    body = _entry_body(detail, entry_url, eid, role, title, tags)
    return _li(
        classes, eid, "entry", role, indent, body, labelled=bool(label), tool=tool, glyph=glyph
    )


# The text tree's route rows kept per session and masking (``_KeptRouteRows``); a new name
# whenever a row's markup or what its key means changes.
_TREE_ROWS = "tree-route-rows-1"
TREE_ROWS_KEPT = 1200  # rows kept, and entries' facts, per session and masking


def _route_row_key(eid: str, role: str, title: str, args: dict[str, Any]) -> str:
    """Everything a route row shows (:func:`_route_entry_row`'s arguments, the selection and
    the cursor as whether they are this entry) but the session's pk, which is in the store's
    key."""
    shown = (eid, role, title, args["indent"], eid == args["selected"], eid == args["cursor"],
             args["viewing"], args["flag"], args["label"], args["active"], args["glyph"])  # fmt: skip
    return repr(shown)


class _KeptRouteRows:
    """The text tree's unfolded route rows kept across appends, keyed by what each shows.

    A row is its entry's facts (role and title: the entry never changes, and the masking is
    in the store's key) and the row's place: indent, branch glyph, whether it is the
    selected entry, the cursor's (and how that is named), its hidden/replaced flag. Per
    session version the whole text tree was rendered again after each append, though the
    route page around the cursor differs by a row or two: the new entry's, and the cursor's
    old row. Kept rows also spare reading and parsing the page's entries (the facts)."""

    def __init__(self, session) -> None:
        self.key = queries.identity_key(session, f"{_TREE_ROWS}|{queries.mask_key(session)}")
        kept = queries.kept_read(self.key)
        ok = isinstance(kept, tuple) and len(kept) == 2
        self.facts: dict[str, tuple[str | None, str, str]] = dict(kept[0]) if ok else {}
        self.rows: dict[str, str] = kept[1] if ok else {}
        self.used: dict[str, str] = {}
        self.changed = False
        self.detail = reverse("explorer:session_detail", args=[session.pk])
        self.entry_url = reverse("explorer:entry", args=[session.pk])

    def learn(self, session, ids: list[str]) -> None:
        """Read the facts of the ``ids`` not known yet (one query for them all)."""
        missing = [i for i in dict.fromkeys(ids) if i not in self.facts]
        if missing:
            self.facts.update(row_facts_of(session, missing))
            self.changed = True

    def role(self, eid: str) -> str | None:
        return self.facts[eid][0]

    def rows_for(self, ids: list[str], **place: Any) -> list[str]:
        out = []
        for k, eid in enumerate(ids):
            _msg_role, role, title = self.facts[eid]
            flags = place["flags"]
            args = {"indent": place["indent"], "selected": place["selected"],
                    "cursor": place["cursor"], "flag": flags.get(eid), "label": None,
                    "active": True, "viewing": place["viewing"],
                    "glyph": place["first_glyph"] if k == 0 else ""}  # fmt: skip
            key = _route_row_key(eid, role, title, args)
            row = self.used.get(key) or self.rows.get(key)
            if row is None:
                row = str(_route_entry_row(self.detail, self.entry_url, eid, role, title, **args))
                self.changed = True
            self.used[key] = row
            out.append(row)
        return out

    def keep(self) -> None:
        """Keep this page's rows (and as many older ones as fit) when any was new."""
        if not self.changed:
            return
        rows = dict(self.used)
        for key, row in self.rows.items():
            if len(rows) >= TREE_ROWS_KEPT:
                break
            rows.setdefault(key, row)
        facts = self.facts
        if len(facts) > TREE_ROWS_KEPT:
            facts = dict(list(facts.items())[-TREE_ROWS_KEPT:])
        queries.keep_later(self.key, (facts, rows))


def page_row(
    session, *, direction: str, count: int, anchor: str, stop: str, indent: int,
    keep: list[tuple[str, str]], users: int = 0,
) -> SafeString:  # fmt: skip
    """ "Show N earlier/later": loads the next page of the route in place (htmx), or opens the
    session page at that page (a plain link). `anchor` is the entry the page starts after
    (later) or ends before (earlier); `stop` the last entry of the folded stretch; `users`
    the user messages in it when known, said on the row as a folded chain says them."""
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
    if users:
        body = format_html(
            '{}<span class="muted small"> · {} user msg{} folded</span>',
            body, users, "" if users == 1 else "s",
        )  # fmt: skip
    return _li(
        ["tr", "tr-page", "active", f"tr-page-{direction}"], anchor, "page", "page", indent, body
    )


def render_tree_rows(
    session, model, selected: str | None, cursor: str | None, *,
    before: str | None = None, after: str | None = None, keep: list[tuple[str, str]] = (),
    viewing: bool = False,
) -> SafeString:  # fmt: skip
    """The indented text tree as HTML. Built here rather than with a template include per
    row: a folded tree has up to a few hundred rows and this keeps the page's cost flat.

    Folded chains on the active route are unfolded inside one page of the route (at most
    PAGE_ROWS entries around the selected entry or the cursor), with "show earlier/later"
    rows at the page's edges; everything else stays as the folded graph draws it."""
    detail = reverse("explorer:session_detail", args=[session.pk])
    chain_url = reverse("explorer:tree_chain", args=[session.pk])
    entry_url = reverse("explorer:entry", args=[session.pk])
    out: list[str] = []
    rows = model.graph.rows()
    collapsed, hidden = default_folds(rows, selected)
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
    kept = _KeptRouteRows(session)
    kept.learn(session, wanted)
    keep = list(keep)
    glyphs: dict[str, str] = {}
    for item, _ in rows:
        if len(item.children) > 1:
            main, *sides = sorted(item.children, key=lambda c: not c.active)
            glyphs[main.key] = "└─"
            glyphs.update((c.key, "├─") for c in sides)
    for n, (item, indent) in enumerate(rows):
        span = spans.get(item.key)
        if span is not None and n not in hidden:
            a, b = span
            ids = path[max(a, lo) : min(b, hi - 1) + 1]
            # The chain's user messages outside the page, when they lie on one side of it.
            outside = item.user_turns - sum(kept.role(i) == "user" for i in ids)
            if a < lo:
                out.append(page_row(session, direction="earlier", count=lo - a, anchor=path[lo],
                                    stop=path[a], indent=indent, keep=keep,
                                    users=outside if b < hi else 0))  # fmt: skip
            out.extend(
                kept.rows_for(
                    ids,
                    indent=indent,
                    selected=selected,
                    cursor=cursor,
                    flags=model.flags,
                    viewing=viewing,
                    first_glyph=glyphs.get(item.key, "") if ids and ids[0] == path[a] else "",
                )
            )
            if b >= hi:
                out.append(page_row(session, direction="later", count=b - hi + 1,
                                    anchor=path[hi - 1], stop=path[b], indent=indent, keep=keep,
                                    users=outside if a >= lo else 0))  # fmt: skip
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
            if node and "archived" in node.flags:
                tags.append(mark_safe('<span class="tag tag-archived">archived</span>'))
            if node and "hidden" in node.flags:
                tags += _flag_tags("hidden")
            elif node and "replaced" in node.flags:
                tags += _flag_tags("replaced")
            if leaf:
                tags.append(mark_safe('<span class="tag tag-leaf">leaf</span>'))
            if item.entry_id == cursor:
                tags.append(cursor_tag(viewing))
            body = _entry_body(detail, entry_url,
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
                glyph=glyphs.get(item.key, ""),
            )  # fmt: skip
        )
    kept.keep()
    return mark_safe("".join(str(x) for x in out))  # noqa: S308 - every piece built with format_html


def more_chain_row(session, more_from: str, indent: int) -> SafeString:
    """The "more" row at the end of a long folded chain loaded on demand."""
    url = reverse("explorer:tree_chain", args=[session.pk])
    url += "?" + urlencode({"first": more_from, "indent": indent})
    body = format_html(
        '<a class="tr-chain" href="{}" hx-get="{}" hx-target="closest li" hx-swap="outerHTML">'
        "⋯ more (unfold)</a>",
        url,
        url,
    )
    return _li(["tr", "tr-chain"], more_from, "chain", "chain", indent, body)


# ---------------------------------------------------------------------------------------------
# Raw versus projected


def context_rows(request: HttpRequest, session, rows: list[dict], editable: bool) -> SafeString:
    """Table rows as HTML, built directly (hundreds of rows; a template loop per cell costs more
    than everything else on the page)."""
    detail = reverse("explorer:session_detail", args=[session.pk])
    undo = reverse("explorer:undo", args=[session.pk])
    edit = reverse("explorer:edit", args=[session.pk])
    leaf = request.GET.get("leaf")
    token = get_token(request) if editable else ""
    leaf_input = format_html('<input type="hidden" name="leaf" value="{}">', leaf) if leaf else ""
    out: list[str] = []
    for r in rows:
        rid = r["id"]
        head = format_html(
            '<div class="ar-head"><a class="mono small" href="{}?{}">{}</a> <span class="pill pill-{}">{}</span>{}</div>'
            '<div class="ar-text raw-text">{}</div>',
            detail, urlencode({"entry": rid}), rid, r["kind"], r["kind"],
            format_html('<span class="muted small">{} tok</span>', r["raw_tokens"]) if r["raw_tokens"] else "",
            r["raw_text"],
        )  # fmt: skip
        if r["status"] == "same":
            status = format_html(
                '<span class="muted small">=</span>{}',
                format_html('<div class="small muted">{}</div>', r["reason"])
                if r["reason"]
                else "",
            )
        else:
            status = format_html(
                '<span class="badge st-{}">{}</span><div class="small">{}</div>',
                r["status"],
                r["status"],
                r["reason"],
            )
        action: str = ""
        if editable and r["status"] in ("hidden", "replaced"):
            action = format_html(
                '<form method="post" action="{}" class="inline-form"><input type="hidden" name="csrfmiddlewaretoken" value="{}">'
                '<input type="hidden" name="target" value="{}">{}<button class="button small" type="submit">Undo (restore)</button></form>',
                undo, token, rid, leaf_input,
            )  # fmt: skip
        elif editable and r["status"] == "same" and r["projected"] and r["editable"]:
            action = format_html(
                '<a class="button small subtle" href="{}?{}">Hide / replace</a>',
                edit,
                urlencode({"target": rid, **({"leaf": leaf} if leaf else {})}),
            )
        if r["projected"]:
            msgs = "".join(
                format_html(
                    '<div class="proj-msg"><span class="order">#{}</span> <span class="pill pill-{}">{}</span> '
                    '<span class="msg-snippet">{}</span></div>',
                    o,
                    role,
                    role,
                    text,
                )  # fmt: skip
                for o, role, text in r["projected"]
            )
            proj = format_html(
                '{}<div class="muted small">{} tok</div>', mark_safe(msgs), r["projected_tokens"]
            )
        else:
            proj = mark_safe('<span class="muted small">—</span>')
        out.append(
            format_html(
                '<tr id="row-{}" class="ar ar-{}" data-entry="{}" data-status="{}"><td class="col-raw">{}</td>'
                '<td class="col-status">{}{}</td><td class="col-proj">{}</td></tr>',
                rid,
                r["status"],
                rid,
                r["status"],
                head,
                status,
                action,
                proj,
            )  # fmt: skip
        )
    return mark_safe("".join(out))  # noqa: S308 - built with format_html


# ---------------------------------------------------------------------------------------------
# Search snippets


def highlight(text: str, query: str, width: int = 90) -> SafeString:
    """An escaped snippet around the first match with every match wrapped in <mark>."""
    flat = " ".join(text.split())
    m = re.search(re.escape(query), flat, re.I)
    if m is None:
        snippet = flat[: width * 2]
        return mark_safe(escape(snippet) + ("…" if len(flat) > len(snippet) else ""))
    lo = max(0, m.start() - width)
    hi = min(len(flat), m.end() + width)
    snippet = flat[lo:hi]
    parts = re.split("(" + re.escape(query) + ")", snippet, flags=re.I)
    html = "".join(f"<mark>{escape(p)}</mark>" if i % 2 else escape(p) for i, p in enumerate(parts))
    return mark_safe(("…" if lo else "") + html + ("…" if hi < len(flat) else ""))


# ---------------------------------------------------------------------------------------------
# Live fragments: rendered once per write, sent to every viewer

# Element ids of the Live tab the out-of-band swaps target: ``transcript`` (the Transcript
# tab's ``<ol>``), ``tree-arrivals``, ``projection-panel``, ``live-state``. Entry ids are arbitrary strings in
# imported files, so :func:`dom_id` maps an id that is not a safe CSS identifier to a hash.

_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")


def dom_id(entry_id: str | None) -> str:
    """A CSS-safe id suffix for an entry id (``root`` for no entry)."""
    if entry_id is None:
        return "root"
    if _SAFE_ID.match(entry_id):
        return entry_id
    return "h" + hashlib.sha1(entry_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit} more characters)"


def _entry_data(entry) -> dict[str, Any]:
    try:
        data = queries.shown_row(entry)
    except (ValueError, TypeError):
        return {}
    return data if isinstance(data, dict) else {}


def projection_panel(summary: dict[str, Any]) -> SafeString:
    """The token meter of the live page: what the model would see at the tip."""
    over = summary["tokens"] > summary["threshold"]
    return format_html(
        '<section id="projection-panel" class="projection-panel{}" data-tokens="{}" '
        'data-messages="{}"><h2>Context at the tip</h2>'
        '<p><span class="proj-messages">{}</span> messages · '
        '<span class="proj-tokens">~{}</span> tokens of {} ({}%)</p>'
        '<meter class="token-meter" min="0" max="{}" high="{}" value="{}">{}%</meter>'
        '<p class="hint">Auto-compaction above {} tokens.</p></section>',
        " over" if over else "", summary["tokens"], summary["messages"], summary["messages"],
        summary["tokens"], summary["window"], summary["percent"], summary["window"],
        summary["threshold"], summary["tokens"], summary["percent"], summary["threshold"],
    )  # fmt: skip


def oob_append(target_id: str, markup: Any) -> SafeString:
    """An out-of-band swap appending ``markup`` (built here) inside ``#target_id``."""
    return format_html('<div hx-swap-oob="beforeend:#{}">{}</div>', target_id, markup)


def live_state(last_position: int | None, tip: str | None, follow: bool) -> SafeString:
    return format_html(
        '<div id="live-state" hx-swap-oob="true" hidden data-last-position="{}" data-tip="{}" '
        'data-follow="{}"></div>',
        "" if last_position is None else last_position, tip or "", "1" if follow else "0",
    )  # fmt: skip


def cursor_status(message: dict[str, Any], *, mine: bool) -> SafeString:
    """The latest cursor move (a branch switch when the cursor jumps to another branch)."""
    who = (
        "Your cursor"
        if mine
        else (message.get("user_name") or message.get("leaf_name") or "A cursor")
    )
    entry = message.get("entry_id")
    where = format_html("<code>{}</code>", entry) if entry else "the start (before the first entry)"
    return format_html(
        '<p id="cursor-status" class="cursor-status" hx-swap-oob="true" data-entry-id="{}" '
        'data-mine="{}">{} moved to {}</p>',
        entry or "", "1" if mine else "0", who, where,
    )  # fmt: skip


def turn_status(message: str, *, css: str = "") -> SafeString:
    """The turn form's answer (htmx swaps it into the status line)."""
    return format_html(
        '<div id="turn-status" class="turn-status {}" role="status">{}</div>', css, message
    )


def reset_notice(count: int) -> SafeString:
    """Too many entries arrived at once to stream them (a big import)."""
    return format_html(
        '<div id="live-notice" class="live-notice" hx-swap-oob="true" role="status">'
        '{} entries were added at once. <a href="">Reload the page</a> to see them.</div>',
        count,
    )


def tree_arrivals(count: int, refresh_url: str) -> SafeString:
    """The text tree's notice that ``count`` entries arrived since it was drawn, with a
    button that redraws it (the tree is paged and folded: rows are not patched in)."""
    return format_html(
        '<div id="tree-arrivals" class="arrivals-note small" hx-swap-oob="true" role="status">'
        "<strong>{} new entr{}</strong> in the tree — "
        '<button type="button" class="link-button" hx-get="{}" hx-target="#tree-panel" '
        'hx-swap="outerHTML" data-tree-refresh="1">refresh</button></div>',
        count, "y" if count == 1 else "ies", refresh_url,
    )  # fmt: skip


def branch_arrivals(count: int, newest: str) -> SafeString:
    """The Live tab's notice that ``count`` entries arrived on branches other than the one
    it shows (the newest is ``newest``), with a button that shows that branch. They are
    counted, not drawn: drawing them would rebuild the transcript for every viewer."""
    if not count:
        return format_html(
            '<div id="branch-arrivals" class="arrivals-note small" hx-swap-oob="true" '
            'role="status">{}</div>',
            "",
        )
    return format_html(
        '<div id="branch-arrivals" class="arrivals-note small" hx-swap-oob="true" role="status">'
        "<strong>{} new entr{}</strong> on other branches (newest <code>{}</code>) — "
        '<button type="button" class="link-button" data-switch-branch="{}">show that branch'
        "</button></div>",
        count, "y" if count == 1 else "ies", newest, newest,
    )  # fmt: skip


def follow_stopped(message: str) -> SafeString:
    """Following this session's file stopped: the notice, and the connection badge no
    longer says "live" (the socket is open, but the file will bring nothing more)."""
    return format_html(
        '<div id="live-notice" class="live-notice warn" hx-swap-oob="true" role="alert">'
        "Following the file stopped: {} Nothing more arrives from it; re-import it to "
        "keep the new content.</div>"
        '<span id="live-connection" class="live-connection closed" hx-swap-oob="true" '
        'data-stopped="1" role="status">follow stopped</span>',
        message,
    )


def _failure_words(message: str) -> str:
    """``The turn failed: <exception>`` with the exception said in words when known."""
    head, sep, rest = message.partition(": ")
    words = error_in_words(rest if sep else message)
    return f"{head}{sep}{words}" if sep else words


def turn_swap(event: dict) -> SafeString:
    """Out-of-band swaps for one event of a running turn."""
    kind = event["event"]
    hidden_stream = mark_safe(
        '<div id="turn-stream" class="turn-stream" hx-swap-oob="true" hidden></div>'
    )
    if kind == "delta":
        return oob_append("turn-stream-text", event.get("text", ""))
    if kind == "start":
        who = event.get("user_name") or "someone"
        return format_html(
            '<div id="turn-stream" class="turn-stream active" hx-swap-oob="true" data-turn="{}">'
            '<header class="item-head"><span class="item-who">assistant</span> '
            '<span class="streaming-note">answering {}…</span></header>'
            '<div id="turn-stream-text" class="stream-text"></div></div>'
            '<div id="turn-status" class="turn-status busy" hx-swap-oob="true" role="status">'
            "The model is answering {}.</div>",
            event.get("turn_id", ""), who, who,
        )  # fmt: skip
    if kind == "end":
        reason = str(event.get("stop_reason", ""))
        note = f"Last turn ended: {reason}." if reason else "Ready."
        if event.get("compacted"):
            note += " The session was compacted."
        raw = str(event.get("error_message") or "")
        words = error_in_words(raw)
        detail = (
            format_html(' <span class="muted small" title="As stored">({})</span>', raw)
            if words != raw
            else ""
        )
        css = " error" if reason == "error" else ""
        return format_html(
            '{}<div id="turn-status" class="turn-status{}" hx-swap-oob="true" role="status">{}{}{}</div>',
            hidden_stream, css, note, format_html(" {}", words) if words else "", detail,
        )  # fmt: skip
    if kind == "compacting":
        return mark_safe(
            '<div id="turn-status" class="turn-status busy" hx-swap-oob="true" role="status">'
            "Compacting the session…</div>"
        )
    # "error" and anything else: a plain status line.
    return format_html(
        '{}<div id="turn-status" class="turn-status error" hx-swap-oob="true" role="alert">'
        "{}</div>",
        hidden_stream,
        _failure_words(str(event.get("message", "The turn failed."))),
    )
