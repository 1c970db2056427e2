"""A route, or the whole tree, as one self-contained HTML file that opens offline.

The file carries every entry once (its card rendered server-side by the export's templates
from the same transcript items the Transcript tab shows: tokens, cost, masking and the
sanitised markdown all come from there), and per route only what differs between routes:
the compaction marks and the context-edit marks, taken from the Transcript tab's
:class:`explorer.queries.RouteMap`. The file's own small script walks the parent links to
show the chosen route; it never builds HTML from the data except the sanitised cards.

The data is embedded as JSON in ``<script type="application/json">`` blocks (one per
chunk of entries, and one per distinct image, so an image repeated in a session is carried
once) with ``<``, ``>`` and ``&`` escaped, and a Content-Security-Policy meta tag allows only the inline
script whose hash it names, inline styles and ``data:`` images, so nothing in a session
(hostile markdown, an ``onerror`` attribute that slipped through) can run or fetch.

The response is streamed: entries are read, rendered and written in chunks, so memory
stays bounded by the chunk, not by the session. Under ASGI it is an async iterator
(:func:`astream`): Django collects a sync iterator whole before sending anything there, so
a big export would otherwise send its first byte only at its end.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from django.template import engines
from django.template.loader import get_template, render_to_string

from explorer import queries
from explorer.models import Entry, Session
from explorer.session import jsonfmt

CHUNK = 200  # entries rendered per database read
MAX_ROUTES = 400  # routes whose marks a whole-tree export carries (the newest first)
WARN_ENTRIES = 20_000  # the export menu warns above this many entries
MAX_ENTRIES = 250_000  # refused above this (the file would be hundreds of megabytes)

FOLD_LINES = 12  # a tool output longer than this shows its first lines and a button
FOLD_CHARS = 1500  # ... and so does one with fewer, very long lines
ARGS_CHARS = 6000  # a tool call's arguments beyond this are cut, as long text is (PREVIEW_CHARS)
PIECE_BYTES = 256 * 1024  # what the streaming response sends at a time (after the head)


def script_json(value: Any) -> str:
    """JSON that is inert inside a ``<script type="application/json">`` block: no ``<``,
    ``>`` or ``&`` survives, so no ``</script>`` or comment opener can end the block.

    orjson (a third of the export's time went to the exact Pi encoder, which this data,
    read only by the export's script, does not need); text with a lone surrogate, which
    orjson refuses, takes the project's encoder."""
    try:
        raw = orjson.dumps(value)
    except TypeError:
        raw = jsonfmt.dumps(value).encode()  # lone surrogates escaped
    # bytes.replace is a single C pass each; str.translate with a dict was a quarter of a
    # big export's time
    raw = raw.replace(b"<", b"\\u003c").replace(b">", b"\\u003e").replace(b"&", b"\\u0026")
    return raw.decode()


@functools.cache
def script_source() -> str:
    """The export's own script, byte for byte as written (static: it reads the data from
    the JSON blocks), so its hash in the CSP is computed once."""
    return get_template("explorer/export/export.js").template.source


@functools.cache
def style_source() -> str:
    return get_template("explorer/export/export.css").template.source


@functools.cache
def card_template() -> Any:
    """The card template with the line breaks and indentation of its source left out: every
    line of it starts with a tag, and a card's markup is repeated for every entry of a file
    that can hold 250,000 (the blocks' own text, ``<pre>`` included, is not touched)."""
    source = get_template("explorer/export/_entry.html").template.source
    return engines["django"].from_string(re.sub(r"\n\s*", "", source))


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


def _fold(text: str) -> dict[str, Any] | None:
    """A long output's first lines and the rest (shown by the file's button), or None when
    it is short enough to show whole."""
    lines = text.count("\n") + 1
    if lines <= FOLD_LINES + 3 and len(text) <= FOLD_CHARS + 500:
        return None
    cut = 0
    for _ in range(FOLD_LINES):
        nl = text.find("\n", cut)
        if nl < 0:
            break
        cut = nl + 1
    cut = min(cut or len(text), FOLD_CHARS)
    if cut >= len(text):
        return None
    return {"head": text[:cut], "rest": text[cut:], "lines": lines, "chars": len(text)}


_ARG_KEYS = ("command", "path", "file_path", "pattern", "url", "query", "description")


def _args_hint(arguments: str) -> str:
    """The one argument that says what a tool call does (a command, a path), for its
    folded header."""
    if not arguments.startswith("{") or arguments.endswith("(truncated)"):
        return ""
    try:
        args = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return ""
    if not isinstance(args, dict):
        return ""
    for key in _ARG_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            line = value.strip().splitlines()[0]
            return line[:157] + "…" if len(line) > 160 else line
    return ""


def _prepare(blocks: list[dict[str, Any]], images: dict[str, str]) -> None:
    """Fold long outputs and give each image a key into the file's image blocks (an image
    shown on several entries is carried once); new images are added to ``images``."""
    for b in blocks:
        if b["kind"] == "image" and b.get("src"):
            key = hashlib.sha1(b["src"].encode()).hexdigest()[:16]
            images.setdefault(key, b["src"])
            b["img"], b["src"] = key, None
        elif b["kind"] == "bash" or (b["kind"] == "text" and b.get("html") is None):
            b["fold"] = _fold(b.get("plain", ""))
        elif b["kind"] == "toolCall":
            args = b.get("arguments", "")
            # A call with no such argument (a Codex patch) says which files it touches.
            b["hint"] = _args_hint(args) or ", ".join(f["path"] for f in b.get("files", ()))
            if len(args) > ARGS_CHARS:  # an edit's whole file, say: the file stays bounded
                b["arguments"] = (
                    args[:ARGS_CHARS]
                    + f"\n… cut at {ARGS_CHARS} of {len(args)} characters in this export"
                )


def _row(it: dict[str, Any], parent: int | None, html: str) -> dict[str, Any]:
    """One entry of the file's data: what the tree, the filters and the totals read."""
    row: dict[str, Any] = {
        "id": it["id"],
        "p": -1 if parent is None else parent,
        "t": it["title"],
        "r": it["role_name"],
        "ro": it["role"],
        "k": it["type"],
        "h": html,
    }
    if it["kind"] == "meta":
        row["m"] = 1
    if it.get("paired_to"):  # a tool result shown in its call's card: a link goes there
        row["pt"] = it["paired_to"]
    if it["usage_parts"]:
        row["u"] = it["usage_parts"]
        row["c"] = it["cost"] or 0
    calls = sum(1 for b in it["blocks"] if b["kind"] == "toolCall")
    if calls:
        row["tc"] = calls
        if all(b["kind"] == "toolCall" for b in it["blocks"]):
            row["ot"] = 1  # only tool calls: hidden with the tools
    if it["model"]:
        row["mo"] = it["model"]
    return row


def stream(session: Session, the_plan: Plan, *, title: str) -> Iterator[str]:
    """The export file, piece by piece (see the module docstring): the head, then per
    chunk of entries the images it shows first and its rows, then the routes and the
    script."""
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
            "fold_lines": FOLD_LINES,
        },
    )
    index: dict[str, int] = {}
    seen_images: set[str] = set()
    threads: dict[str, list[dict[str, Any]]] = {}
    statuses: dict[str, dict] = {}
    if the_plan.comments:  # masked and rendered by the same reads as the Review tab
        for t in queries.review_threads(session):
            threads.setdefault(t["entry_id"], []).append(t)
        statuses = queries.entry_reviews(session)
    entry_template = card_template()
    routes: list[dict[str, Any]] = []
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
            images: dict[str, str] = {}
            rows: list[str] = []
            for it in items:
                if it["id"] in index:
                    continue
                _prepare(it["blocks"], images)
            for key, src in images.items():
                if key not in seen_images:
                    seen_images.add(key)
                    yield (
                        f'<script type="application/json" class="x-img" data-k="{key}">'
                        f"{script_json(src)}</script>\n"
                    )
            for it in items:
                if it["id"] in index:
                    continue
                i = rmap.ids.index(it["id"], lo, hi)
                parent = index.get(rmap.ids[i - 1]) if i > 0 else None
                index[it["id"]] = len(index)
                html = entry_template.render(
                    {"it": it, "threads": threads.get(it["id"]), "review": statuses.get(it["id"])}
                )
                row = _row(it, parent, html)
                kids = siblings.get(parents[i - lo])
                if kids and it["id"] in kids:  # a branch point: the switcher's routes
                    row["sib"] = kids
                    # Routes are written newest leaf first, so the route an entry is first
                    # written on ends at the newest leaf under it: the route its switcher
                    # opens, as the Transcript's (``queries.newest_leaf_under``).
                    row["nl"] = leaf
                if it["id"] in threads:
                    row["rv"] = len(threads[it["id"]])
                rows.append(script_json(row))
            if rows:
                yield (
                    '<script type="application/json" class="x-rows">['
                    + ",".join(rows)
                    + "]</script>\n"
                )
        routes.append(
            {
                "leaf": index[rmap.ids[-1]] if n else -1,
                "marks": _runs(_marks(rmap, 0, n), index),
                "edits": {str(index[t]): [s, index[by]] for t, (s, by) in rmap.edits.items() if t in index and by in index},
            }
        )  # fmt: skip
    meta: dict[str, Any] = {"routes": routes, "start": 0, "whole": the_plan.whole}
    if the_plan.leaf and the_plan.leaf in index:
        start_leaf = index[the_plan.leaf]
        meta["start"] = next((k for k, r in enumerate(routes) if r["leaf"] == start_leaf), 0)
    yield f'<script type="application/json" id="export-routes">{script_json(meta)}</script>\n'
    yield render_to_string("explorer/export/tail.html", {"script": script_source()})


def pieces(parts: Iterator[str], size: int = PIECE_BYTES) -> Iterator[bytes]:
    """``parts`` joined into pieces of about ``size`` bytes, the first (the head) alone so
    the browser shows the download at once; fewer, larger writes than one per entry."""
    buf: list[bytes] = []
    held = 0
    first = True
    for part in parts:
        data = part.encode()
        buf.append(data)
        held += len(data)
        if first or held >= size:
            yield b"".join(buf)
            buf, held, first = [], 0, False
    if buf:
        yield b"".join(buf)


async def astream(parts: Iterator[bytes]) -> AsyncIterator[bytes]:
    """The same pieces for an ASGI server, one at a time as they are made: each is made in
    the request's database thread (``thread_sensitive``), so the reads keep their
    connection, and sent before the next is made."""
    from asgiref.sync import sync_to_async

    done = object()
    step = sync_to_async(lambda: next(parts, done), thread_sensitive=True)
    try:
        while True:
            piece = await step()
            if piece is done:
                break
            yield piece  # type: ignore[misc]
    finally:
        close = getattr(parts, "close", None)
        if close is not None:
            await sync_to_async(close, thread_sensitive=True)()


# Calibrated on Pi's real files and the demo sessions (within 10 % of the file): an entry's
# card and data take about its stored line, up to the cut of long text, plus its markup.
_EST_CAP = 14_000
_EST_SHARE = 0.93
_EST_PER_ENTRY = 620


def estimate(session: Session, the_plan: Plan) -> int:
    """About how many bytes the export will have, shown before the download."""
    sizes = Entry.objects.filter(session=session).order_by()
    if not the_plan.whole:
        ids = [e.entry_id for e in queries.light_path(session, the_plan.leaf)]
        total = 0
        for k in range(0, len(ids), 500):
            chunk = sizes.filter(entry_id__in=ids[k : k + 500]).values_list("size", flat=True)
            total += sum(min(s, _EST_CAP) for s in chunk)
        n = len(ids)
    else:
        from django.db.models import Case, Count, IntegerField, Sum, Value, When

        agg = sizes.aggregate(
            n=Count("id"),
            total=Sum(
                Case(
                    When(size__gt=_EST_CAP, then=Value(_EST_CAP)),
                    default="size",
                    output_field=IntegerField(),
                )
            ),
        )
        n, total = agg["n"], agg["total"] or 0
    fixed = len(script_source()) + len(style_source()) + 6_000  # the head and the tail
    return int(total * _EST_SHARE) + n * _EST_PER_ENTRY + fixed


def expected_sizes(session: Session, leaf: str | None) -> dict[str, Any]:
    """The export menu's figures (its partial and its JSON): the route to ``leaf`` and the
    whole tree, in entries and expected bytes (``tree_bytes`` None when the tree is over
    :data:`MAX_ENTRIES` and would be refused)."""
    route = plan(session, leaf=leaf, whole=False)
    tree = Plan(True, [], session.entry_count, leaf)  # the estimate reads no routes
    refused = session.entry_count > MAX_ENTRIES
    return {
        "route_entries": route.entry_count,
        "route_bytes": estimate(session, route),
        "tree_entries": session.entry_count,
        "tree_bytes": None if refused else estimate(session, tree),
    }
