"""What an entry shows as: the blocks, the transcript items and the rendered rows that the
Transcript tab, the Live tab, the entry panel, the broadcast and the HTML export share.

One builder, so a message reads the same wherever it appears (and a live row is the very
row the Transcript tab draws). It sits below the views and the broadcast: reads come from
``queries``, HTML ids from ``html``; nothing here writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import pickle
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from django.utils.safestring import SafeString

from explorer import archives, html, live_frames, queries
from explorer.queries.tool_pairs import call_of, stored_ancestors
from explorer.rendering import fill_token_slots, image_data_uri, render_markdown, with_token_slots
from explorer.session import jsonfmt
from explorer.session.describe import (
    cost_of,
    entry_message,
    entry_title,
    error_in_words,
    finite,
    kind_name,
    tokens_of,
    total_tokens_of,
    transcript_text,
    usage_of,
)
from explorer.session.messages import session_entry_to_context_messages
from explorer.session.tool_files import call_uses

# Text beyond this is sent only on request ("load full output").
PREVIEW_CHARS = 6000
RAW_PREVIEW_CHARS = 20000
MESSAGE_KINDS = ("message", "custom_message")


def text_part(text: str, full: bool, markdown: bool) -> dict[str, Any]:
    """A text block for a template; long text is cut so a page stays small (the rest loads
    on request)."""
    cut = not full and len(text) > PREVIEW_CHARS
    shown = text[:PREVIEW_CHARS] if cut else text
    return {
        "kind": "text",
        "html": render_markdown(shown) if markdown else None,
        "plain": shown,
        "truncated": cut,
        "chars": len(text),
    }


def call_files(name: Any, arguments: Any) -> list[dict[str, str]]:
    """The files a tool call reads or modifies (``tool_files.call_uses``, Compare's rule),
    shown beside its name: a Codex patch's files are otherwise lost in its escaped text,
    and a Claude Code Edit's path in a page of arguments."""
    return [{"kind": kind, "path": path} for kind, path in call_uses(name, arguments)]


def own_usage(session, data: dict[str, Any]) -> tuple[dict | None, str | None]:
    """(the usage an entry's row shows, the entry its response's usage is counted on).

    Claude Code writes one record per content block and repeats the response's usage on
    each; the import counts it once, on the response's last record, and marks the others
    with ``usageOnEntry``. Codex's token counts land on the entry that was the tip when they
    arrived, so a reasoning item or a call before it carries zeros. Such a row showed
    "0 reported · $0.0000" as if the reply had cost nothing: it shows no usage instead (and,
    for Claude Code, which entry holds it). A Pi entry shows its usage as recorded."""
    usage = usage_of(data)
    m = entry_message(data) or {}
    if usage is None or m.get("role") != "assistant" or session.agent == "pi":
        return usage, None
    counted_on = m.get("usageOnEntry")
    if isinstance(counted_on, str) and counted_on:
        return None, counted_on
    if not any(finite(usage.get(k)) for k in ("input", "output", "cacheRead", "cacheWrite")):
        return None, None
    return usage, None


def content_blocks(content: Any, *, full: bool, markdown: bool) -> list[dict[str, Any]]:
    """Message content as template blocks (text, thinking, tool calls, images): shared by
    the entry panel and the transcript so a message reads the same in both."""
    if isinstance(content, str):
        return [text_part(content, full, markdown)] if content else []
    out: list[dict[str, Any]] = []
    if not isinstance(content, list):
        return out
    for block in content:
        if not isinstance(block, dict):
            continue
        t = block.get("type")
        if t == "text":
            text = block.get("text") if isinstance(block.get("text"), str) else ""
            out.append(text_part(text, full, markdown))
        elif t == "thinking":
            text = block.get("thinking") if isinstance(block.get("thinking"), str) else ""
            part = text_part(text, full, markdown)
            part["kind"] = "thinking"
            part["redacted"] = bool(block.get("redacted"))
            out.append(part)
        elif t == "toolCall":
            args = block.get("arguments")
            out.append(
                {
                    "kind": "toolCall",
                    "name": str(block.get("name", "")),
                    "call_id": str(block.get("id", "")),
                    "arguments": pretty_json(args),
                    "files": call_files(block.get("name"), args),
                    "result": None,
                }
            )
        elif t == "image":
            out.append(
                {
                    "kind": "image",
                    "src": image_data_uri(block.get("data"), block.get("mimeType")),
                    "mime": str(block.get("mimeType", "")),
                }
            )
        else:
            out.append({"kind": "other", "type": str(t), "json": pretty_json(block)})
    return out


def pretty_json(value: Any, limit: int = RAW_PREVIEW_CHARS) -> str:
    try:
        text = jsonfmt.dumps(value)
    except (TypeError, ValueError, RecursionError):  # nesting too deep: the raw line shows it
        return ""
    if len(text) > 200:
        with contextlib.suppress(ValueError, RecursionError):  # too deep: left unindented
            text = json.dumps(jsonfmt.loads(text), indent=2, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "\n… (truncated)"


def transcript_url(session, **q: str | None) -> str:
    base = reverse("explorer:transcript", args=[session.pk])
    query = urlencode({k: v for k, v in q.items() if v})
    return base + ("?" + query if query else "")


def route_marks(rmap: queries.RouteMap, start: int, end: int) -> dict[int, tuple[str, str]]:
    """Route index → ("replaced" | "kept", compaction id) for the window [start, end) of a
    whole route's map (``queries.window_marks``)."""
    ranges = [(rng, rmap.ids[rng[0]]) for rng in rmap.compactions]
    return queries.window_marks(ranges, rmap.types, start, end)


def _item(session, win: queries.RouteWindow, i: int, data: dict[str, Any]) -> dict[str, Any]:
    """One entry of the window as the transcript template shows it."""
    eid = win.ids[i - win.start]
    kind = data.get("type", win.types[i - win.start])
    m = entry_message(data)
    role = (m or {}).get("role") if m else ""
    blocks: list[dict[str, Any]] = []
    if m is not None:
        if role == "bashExecution":
            blocks = [{"kind": "bash", "command": str(m.get("command", "")),
                       **text_part(str(m.get("output", "")), False, False), "exit": m.get("exitCode")}]  # fmt: skip
        else:
            markdown = role in ("user", "assistant", "custom", "system")
            blocks = content_blocks(m.get("content"), full=False, markdown=markdown)
    elif kind == "custom_message":
        blocks = content_blocks(data.get("content"), full=False, markdown=True)
    elif kind in ("compaction", "branch_summary"):
        blocks = [text_part(str(data.get("summary") or ""), False, True)]
    tools = []
    if role == "system" and isinstance((m or {}).get("toolsAdded"), list):
        tools = [t for t in m["toolsAdded"] if isinstance(t, dict)]
    usage, usage_on = own_usage(session, data)
    edit = win.edits.get(eid)
    return {
        "id": eid,
        "dom": html.dom_id(eid),
        "index": i,
        "kind": "card" if kind in ("message", "custom_message", "compaction", "branch_summary") else "meta",
        "type": kind,
        "role": role or kind,
        "role_name": kind_name(role or kind),
        "title": entry_title(data, 120),
        "meta_text": transcript_text(data) if kind not in MESSAGE_KINDS else "",
        "blocks": blocks,
        "tools": [{"name": str(t.get("name", "")), "description": str(t.get("description", ""))} for t in tools],
        "tokens": tokens_of(session_entry_to_context_messages(data)),
        "usage_tokens": int(total_tokens_of(data)) if usage else 0,
        "cost": cost_of(data) if usage else None,
        "usage_on": usage_on,
        "usage_on_dom": html.dom_id(usage_on) if usage_on else "",
        "usage_parts": [int(finite(usage.get(k))) for k in ("input", "output", "cacheRead", "cacheWrite")] if usage else None,
        "model": f"{m.get('provider', '')}/{m.get('model', '')}" if role == "assistant" else "",
        "error": error_in_words((m or {}).get("errorMessage")) if m else None,
        "error_raw": str((m or {}).get("errorMessage") or "") if m else "",
        "is_error": bool((m or {}).get("isError")),
        "timestamp": data.get("timestamp", ""),
        "edit": {"state": edit[0], "by": edit[1]} if edit else None,
        "tokens_before": data.get("tokensBefore") if kind == "compaction" else None,
        "first_kept": data.get("firstKeptEntryId") if kind == "compaction" else None,
    }  # fmt: skip


def _pair_results(
    session, win: queries.RouteWindow, items: list[dict[str, Any]], data: dict
) -> dict[tuple[str, str], dict[str, Any]]:
    """The window's tool results by the call each answers, (call's entry, call id), by the
    pairing rule every page follows (``queries.tool_pairs.call_of``: the nearest assistant
    above holding the id, within the turn): the window's own entries first, then the stored
    rows above it, read only for a result whose walk reaches the window's top. A result
    whose call lies above the window (the previous page, an earlier export chunk, an entry
    the live view already showed), or whose call another result of the window already
    answers, keeps its own card with a "Result of" line (``result_of``)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    in_window = {it["id"] for it in items}
    above = stored_ancestors(session, win.above)
    for k, it in enumerate(items):
        if it["role"] != "toolResult":
            continue
        call_id = (entry_message(data.get(it["id"], {})) or {}).get("toolCallId")
        # The walk above the window is shared: each step is read once, by the first
        # result that needs it, and replayed for the next.
        window_part = ((items[j]["id"], items[j]["role"]) for j in range(k - 1, -1, -1))
        call = call_of(session, call_id, itertools.chain(window_part, above), data)
        if call is None:
            continue
        key = (call.entry_id, str(call_id))
        if call.entry_id in in_window and key not in out:
            out[key] = it
        else:
            block = call.block
            it["result_of"] = {
                "entry_id": call.entry_id,
                "name": str(block.get("name", "")),
                "files": call_files(block.get("name"), block.get("arguments")),
            }
    return out


def window_items(
    session,
    rmap: queries.RouteMap,
    start: int,
    end: int,
    *,
    target: str | None,
    leaf_q: str | None,
    comments: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """The entries of the route between ``start`` and ``end`` as transcript items
    (:func:`route_window_items` of the map's window)."""
    window = queries.window_of_map(rmap, start, end)
    return route_window_items(session, window, target=target, leaf_q=leaf_q, comments=comments)


def route_window_items(
    session,
    win: queries.RouteWindow,
    *,
    target: str | None,
    leaf_q: str | None,
    comments: dict[str, int] | None = None,
) -> list[dict[str, Any]]:
    """The entries of a route's window as transcript items: tool results paired with their
    calls, branch switchers, compaction marks and ranges. The window comes from a whole
    route's map (the Transcript tab) or from the route's tail alone (the Live tab): the same
    items either way. ``comments``: the window's review comment counts when the caller read
    them already."""
    start, end = win.start, win.end
    ids = list(win.ids)
    data = queries.load_entries(session, ids)
    parents = [win.parent(i) for i in range(start, end)]
    siblings = queries.siblings_of(session, parents)
    hide = archives.archived(session).ids
    if comments is None:
        comments = queries.comment_counts(session, ids)
    items = [_item(session, win, i, data.get(ids[i - start], {})) for i in range(start, end)]
    results = _pair_results(session, win, items, data)
    for k, it in enumerate(items):
        i = start + k
        it["mark"] = win.marks.get(i)
        it["comments"] = comments.get(it["id"], 0)
        it["is_target"] = it["id"] == target
        it["permalink"] = transcript_url(session, leaf=leaf_q, entry=it["id"]) + f"#e-{it['dom']}"
        if it.get("result_of"):
            call_entry = it["result_of"]["entry_id"]
            it["result_of"]["url"] = (
                transcript_url(session, leaf=leaf_q, entry=call_entry)
                + f"#e-{html.dom_id(call_entry)}"
            )
        kids = siblings.get(parents[k])
        if kids and it["id"] in kids:
            # Archived sibling branches leave the switcher ("N archived · show" opens the
            # first of them); the route being read keeps its place even when archived.
            set_aside = [c for c in kids if c in hide and c != it["id"]]
            kids = [c for c in kids if c not in set_aside]
            pos = kids.index(it["id"])
            it["switch"] = {
                "pos": pos + 1,
                "count": len(kids),
                "prev": transcript_url(session, via=kids[pos - 1]) if pos > 0 else "",
                "next": transcript_url(session, via=kids[pos + 1]) if pos + 1 < len(kids) else "",
                "archived": len(set_aside),
                "archived_url": transcript_url(session, via=set_aside[0]) if set_aside else "",
                "is_archived": it["id"] in hide,
            }
        for b in it["blocks"]:
            if b["kind"] == "toolCall":
                res = results.get((it["id"], b["call_id"]))
                b["paired"] = res
                if res is not None:
                    res["paired_to"] = it["id"]
        if it["type"] == "compaction":
            counted = win.counts.get(i)
            if counted is not None:
                it["replaced_count"], it["kept_count"] = counted
                it["replaced_url"] = transcript_url(session, leaf=win.leaf, replaced=it["id"])
    return items


TRANSCRIPT_ROW = "explorer/partials/transcript_item.html"


@dataclass(frozen=True)
class Reader:
    """Who reads a transcript window: what its rows show differently from one reader to
    the next. The role (``editable``) picks the rows' variant, each cached on its own; the
    reader's cursor row, and an editor's rows with an Undo form (it carries the cursor),
    are drawn for the reader; the CSRF token goes into the slots the shared rows keep."""

    editable: bool
    cursor_entry: str | None
    csrf_token: str
    move_url: str


def _has_undo(it: dict[str, Any]) -> bool:
    """The row holds an Undo form for an editor (its own edit, or its paired result's)."""
    paired = [b.get("paired") or {} for b in it["blocks"] if b["kind"] == "toolCall"]
    return bool(it["edit"]) or any(p.get("edit") for p in paired)


def _row(session, reader: Reader, it: dict[str, Any], token: str, cursor: str | None) -> str:
    from django.template.loader import render_to_string

    ctx = {"session": session, "editable": reader.editable, "cursor_entry": cursor,
           "move_url": reader.move_url, "csrf_token": token, "it": it}  # fmt: skip
    return render_to_string(TRANSCRIPT_ROW, ctx)


def window_html(
    session,
    rmap: queries.RouteMap,
    start: int,
    end: int,
    *,
    target: str | None,
    leaf_q: str | None,
    reader: Reader,
) -> SafeString:
    """The Transcript tab's rows of the window [start, end): the bytes of rendering each
    item for this reader, rendered once per session version for every reader.

    A row depends on the session version and the masking (both in the cache key), the
    window, its target and permalinks, the review comment counts (read each time: a comment
    does not change the session version, so their digest is in the name) and the role (in
    the name too). Per reader, and never kept: the CSRF token, put into each shared row's
    slots, the reader's cursor row and an editor's Undo rows, drawn from the kept items."""
    ids = rmap.ids[start:end]
    comments = queries.comment_counts(session, ids)
    counted = ",".join(f"{k}={v}" for k, v in sorted(comments.items()))
    name = (f"transcript-window:{rmap.leaf or ''}:{start}:{end}:{target or ''}:{leaf_q or ''}:"
            f"{int(reader.editable)}:{hashlib.sha256(counted.encode()).hexdigest()[:16]}")  # fmt: skip

    def build_items() -> list[dict[str, Any]]:
        return window_items(
            session, rmap, start, end, target=target, leaf_q=leaf_q, comments=comments
        )

    def build_rows() -> list[list[str] | None]:
        return [
            None if reader.editable and _has_undo(it)
            else with_token_slots(lambda slot, it=it: _row(session, reader, it, slot, None))
            for it in queries.cached(session, name + ":items", build_items)
        ]  # fmt: skip

    rows = queries.cached(session, name + ":rows", build_rows)
    items: list[dict[str, Any]] | None = None
    out: list[str] = []
    for k, parts in enumerate(rows):
        if parts is not None and ids[k] != reader.cursor_entry:
            out.append(fill_token_slots(parts, reader.csrf_token))
            continue
        if items is None:
            items = queries.cached(session, name + ":items", build_items)
        out.append(_row(session, reader, items[k], reader.csrf_token, reader.cursor_entry))
    return html.trusted("".join(out))


def transcript_rows(session, entries) -> dict[str, str]:
    """The Transcript tab's row (``partials/transcript_item.html``) for each new entry,
    rendered once per write for every viewer: on the route to the newest of them, with no
    per-viewer parts (no CSRF token, which the page's script fills in, no "your cursor").
    An entry on another branch is rendered on its own route. The item builder is the
    Transcript tab's, so a live row and a tab row never differ."""
    entries = sorted(entries, key=lambda e: e.position)
    if not entries:
        return {}
    out: dict[str, str] = {}
    for entry in reversed(entries):
        if entry.entry_id in out:
            continue
        rmap = queries.route_map(session, entry.entry_id)
        wanted = [i for i in (rmap.index(e.entry_id) for e in entries) if i is not None]
        lo = min(i for i in wanted if rmap.ids[i] not in out)
        for eid, row in route_rows(session, rmap, lo).items():
            out.setdefault(eid, row)
    return out


def route_rows(session, rmap: queries.RouteMap, lo: int) -> dict[str, str]:
    """The Transcript tab's rows of the route ``rmap`` from index ``lo`` to its leaf, shared
    by every viewer (no CSRF token, which the page's script fills in, no "your cursor").
    The live broadcast calls it with a route it extended itself, so a burst of appends at a
    tip costs no route walk."""
    items = window_items(session, rmap, lo, len(rmap.ids), target=None, leaf_q=None)
    return {it["id"]: row for it, row in zip(items, shared_rows(session, items), strict=True)}


# The shared rows kept per session (the newest first): a Live tab's window and the rows the
# broadcast rendered beside it, a few times over; older rows only while the store stays
# under SHARED_ROWS_BYTES (a row holds its images), since every kept window reads it whole.
SHARED_ROWS_KEPT = 240
SHARED_ROWS_BYTES = 4 * 1024 * 1024
# Part of the kept rows' key: a new name whenever the row template or what its context
# means changes, so no worker serves a row rendered under the old meaning.
_SHARED_ROWS = "shared-rows-2"


def _item_digest(it: dict[str, Any]) -> str:
    """What a shared row depends on, as a digest: its item, whole (pickled, so a type such
    as the rendered markdown's SafeString counts too). Equal digests are equal items; an
    item built another way may pickle differently, which costs a render, never a wrong row."""
    return hashlib.sha256(pickle.dumps(it, protocol=pickle.HIGHEST_PROTOCOL)).hexdigest()


def shared_rows(session, items: list[dict[str, Any]]) -> list[str]:
    """The shared row (``partials/transcript_item.html`` with no CSRF token, no "your
    cursor", not editable) of each of ``items``, a row rendered only when no row of an equal
    item is kept.

    A row is kept under a digest of its item rather than per session version: after an
    append at a tip of a big session the Live tab's window differs from the one before by
    the new entry's row (and the rows the entry changed: a tool call paired with the new
    result, a mark of a new compaction or edit, a new branch's switcher), so only those are
    rendered. Everything else a row shows is the session's pk (in the store's key) and the
    fixed context below. One cache read, and one write after the answer when a row was
    rendered."""
    from django.template.loader import render_to_string

    key = queries.identity_key(session, _SHARED_ROWS)
    kept = queries.kept_read(key)
    kept = kept if isinstance(kept, dict) else {}
    ctx = {"session": session, "cursor_entry": None, "editable": False,
           "move_url": reverse("explorer:transcript_cursor", args=[session.pk]),
           # Shared by every viewer: no token in the row (the page's script adds the viewer's).
           "shared_row": True}  # fmt: skip
    used: dict[str, str] = {}
    out: list[str] = []
    rendered = False
    for it in items:
        digest = _item_digest(it)
        row = used.get(digest) or kept.get(digest)
        if row is None:
            row = str(render_to_string(TRANSCRIPT_ROW, {**ctx, "it": it}))
            rendered = True
        used[digest] = row
        out.append(row)
    if rendered:
        size = sum(len(row) for row in used.values())
        for digest, row in kept.items():
            if len(used) >= SHARED_ROWS_KEPT or size + len(row) > SHARED_ROWS_BYTES:
                break
            if digest not in used:
                used[digest] = row
                size += len(row)
        queries.keep_later(key, used)
    return out


def entry_fragment(entry, row: str = "") -> dict[str, Any]:
    """What a viewer needs about one new entry: where it hangs and its transcript row
    (bounded for a live frame: ``live_frames.bounded_row``)."""
    row = live_frames.bounded_row(
        entry.session_id, entry.entry_id, html.dom_id(entry.entry_id), row
    )
    return {
        "id": entry.entry_id,
        "parent_id": entry.parent_id,
        "position": entry.position,
        "type": entry.type,
        "role": entry.role or "",
        "item": row,
    }


def entry_fragments(entries, session=None) -> list[dict[str, Any]]:
    """:func:`entry_fragment` of each entry in file order, rows rendered once for all."""
    entries = sorted(entries, key=lambda e: e.position)
    if entries and not hasattr(session, "group_name"):  # given a pk, or nothing
        session = entries[0].session
    rows = transcript_rows(session, entries) if entries else {}
    return [entry_fragment(e, rows.get(e.entry_id, "")) for e in entries]
