"""A route, or the whole tree, as one self-contained HTML file that opens offline.

The file carries every entry once (its card rendered server-side by the export's templates
from the same transcript items the Transcript tab shows: tokens, cost, masking and the
sanitised markdown all come from there), and per route only what differs between routes:
the compaction marks and the context-edit marks, taken from the Transcript tab's
:class:`explorer.queries.RouteMap`. The file's own small script walks the parent links to
show the chosen route; it never builds HTML from the data except the sanitised cards.

The data is embedded as JSON in a ``<script type="application/json">`` block with ``<``,
``>`` and ``&`` escaped, and a Content-Security-Policy meta tag allows only the inline
script whose hash it names, inline styles and ``data:`` images, so nothing in a session
(hostile markdown, an ``onerror`` attribute that slipped through) can run or fetch.

The response is streamed: entries are read, rendered and written in chunks, so memory
stays bounded by the chunk, not by the session.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from django.template.loader import get_template, render_to_string

from explorer import queries
from explorer.models import Entry, Session
from explorer.session import jsonfmt

CHUNK = 200  # entries rendered per database read
MAX_ROUTES = 400  # routes whose marks a whole-tree export carries (the newest first)
WARN_ENTRIES = 20_000  # the export menu warns above this many entries
MAX_ENTRIES = 250_000  # refused above this (the file would be hundreds of megabytes)

_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def script_json(value: Any) -> str:
    """JSON that is inert inside a ``<script type="application/json">`` block: no ``<``,
    ``>`` or ``&`` survives, so no ``</script>`` or comment opener can end the block.

    orjson (a third of the export's time went to the exact Pi encoder, which this data,
    read only by the export's script, does not need); text with a lone surrogate, which
    orjson refuses, takes the project's encoder."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = jsonfmt.dumps(value)
    return text.translate(_ESCAPES)


@functools.cache
def script_source() -> str:
    """The export's own script, byte for byte as written (static: it reads the data from
    the JSON blocks), so its hash in the CSP is computed once."""
    return get_template("explorer/export/export.js").template.source


@functools.cache
def style_source() -> str:
    return get_template("explorer/export/export.css").template.source


def script_hash(source: str) -> str:
    """The CSP source expression allowing exactly this inline script."""
    return "sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode()


def csp() -> str:
    return (
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        f"script-src '{script_hash(script_source())}'; base-uri 'none'; form-action 'none'"
    )


@dataclass(frozen=True)
class Plan:
    """What one export holds: the leaves of its routes (newest first), how many entries,
    and whether it is the whole tree."""

    whole: bool
    leaves: list[str]
    entry_count: int
    leaf: str | None
    comments: bool = False


def plan(session: Session, *, leaf: str | None, whole: bool, comments: bool = False) -> Plan:
    """The routes an export carries: every leaf of the tree (capped at
    :data:`MAX_ROUTES`, newest first) or the one route to ``leaf``; ``comments`` adds the
    review threads and statuses."""
    if not whole:
        n = len(queries.light_path(session, leaf))
        return Plan(False, [leaf] if leaf else [], n, leaf, comments)
    leaves = list(
        Entry.objects.filter(session=session, child_count=0)
        .order_by("-position")
        .values_list("entry_id", flat=True)[:MAX_ROUTES]
    )
    if leaf and leaf not in leaves and queries.entry_exists(session, leaf):
        leaves.append(leaf)  # kept last: the order newest first is what the switchers use
    start = leaf or (leaves[0] if leaves else None)
    return Plan(True, leaves, session.entry_count, start, comments)


def _runs(marks: dict[int, tuple[str, str]], index: dict[str, int]) -> list[list[Any]]:
    """The Transcript's per-entry compaction marks as runs [start, end, kind, compaction]."""
    runs: list[list[Any]] = []
    for i in sorted(marks):
        kind, comp = marks[i]
        if runs and runs[-1][1] == i and runs[-1][2] == kind and runs[-1][3] == index[comp]:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1, kind, index[comp]])
    return runs


def stream(session: Session, the_plan: Plan, *, title: str) -> Iterator[str]:
    """The export file, piece by piece (see the module docstring)."""
    from explorer.items import route_marks as _marks
    from explorer.items import window_items

    yield render_to_string(
        "explorer/export/head.html",
        {
            "session": session,
            "title": title,
            "csp": csp(),
            "style": style_source(),
            "whole": the_plan.whole,
            "entry_count": the_plan.entry_count,
            "route_count": len(the_plan.leaves),
            "capped": the_plan.whole and len(the_plan.leaves) >= MAX_ROUTES,
            "comments": the_plan.comments,
        },
    )
    yield '<script type="application/json" id="export-entries">['
    index: dict[str, int] = {}
    threads: dict[str, list[dict[str, Any]]] = {}
    statuses: dict[str, dict] = {}
    if the_plan.comments:  # masked and rendered by the same reads as the Review tab
        for t in queries.review_threads(session):
            threads.setdefault(t["entry_id"], []).append(t)
        statuses = queries.entry_reviews(session)
    routes: list[dict[str, Any]] = []
    first = True
    for leaf in the_plan.leaves:
        rmap = queries.route_map(session, leaf)
        n = len(rmap.ids)
        start = 0
        while start < n and rmap.ids[start] in index:  # shared with a route already written
            start += 1
        for lo in range(start, n, CHUNK):
            hi = min(n, lo + CHUNK)
            items = window_items(session, rmap, lo, hi, target=None, leaf_q=None)
            parents = [rmap.ids[i - 1] if i > 0 else None for i in range(lo, hi)]
            siblings = queries.siblings_of(session, parents) if the_plan.whole else {}
            for it in items:
                if it["id"] in index:
                    continue
                i = rmap.ids.index(it["id"], lo, hi)
                parent = index.get(rmap.ids[i - 1]) if i > 0 else None
                index[it["id"]] = len(index)
                row = {
                    "id": it["id"],
                    "p": -1 if parent is None else parent,
                    "t": it["title"],
                    "r": it["role_name"],
                    "k": it["type"],
                    "h": render_to_string(
                        "explorer/export/_entry.html",
                        {
                            "it": it,
                            "threads": threads.get(it["id"]),
                            "review": statuses.get(it["id"]),
                        },
                    ),
                }
                kids = siblings.get(parents[i - lo])
                if kids and it["id"] in kids:  # a branch point: the switcher's routes
                    row["sib"] = kids
                    # Routes are written newest leaf first, so the route an entry is first
                    # written on ends at the newest leaf under it: the route its switcher
                    # opens, as the Transcript's (``queries.newest_leaf_under``).
                    row["nl"] = leaf
                yield ("" if first else ",") + script_json(row)
                first = False
        routes.append(
            {
                "leaf": index[rmap.ids[-1]] if n else -1,
                "marks": _runs(_marks(rmap, 0, n), index),
                "edits": {str(index[t]): [s, index[by]] for t, (s, by) in rmap.edits.items() if t in index and by in index},
            }
        )  # fmt: skip
    yield "]</script>\n"
    meta = {"routes": routes, "start": 0}
    if the_plan.leaf and the_plan.leaf in index:
        start_leaf = index[the_plan.leaf]
        meta["start"] = next((k for k, r in enumerate(routes) if r["leaf"] == start_leaf), 0)
    yield f'<script type="application/json" id="export-routes">{script_json(meta)}</script>\n'
    yield render_to_string("explorer/export/tail.html", {"script": script_source()})
