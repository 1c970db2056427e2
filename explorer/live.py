"""Live broadcasting: every committed write reaches every viewer of its session.

``explorer.services`` sends ``entries_appended`` / ``cursor_moved`` after each write has
committed; the receivers here render each new entry ONCE (a text-tree node and a transcript
item) and ``group_send`` the fragments to the session's group. Each websocket consumer then
only assembles the out-of-band swaps for its own viewer (``compose_*``), so 100 viewers cost
one render, not 100.

Element ids shared with the explorer pages (so the same messages update them too):
``tree-children-<id>`` (the ``<ul>`` under a tree node; ``tree-children-root`` for roots),
``transcript``, ``projection-panel``, ``live-state``. Entry ids are arbitrary strings in
imported files, so :func:`dom_id` maps an id that is not a safe CSS identifier to a hash.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.dispatch import receiver
from django.utils.html import escape

from explorer import signals
from explorer.session.describe import transcript_text

logger = logging.getLogger(__name__)

# Above this many entries in one write (an import), viewers get a "reload" notice instead of
# every fragment: rendering 100k nodes into a websocket helps nobody.
MAX_LIVE_BATCH = 500
# Longest text shown for one entry in the live transcript; the explorer has the full entry.
ITEM_TEXT_LIMIT = 4000
SNIPPET_LIMIT = 80
# The projection panel costs a path walk; a viewer refreshes it at most this often.
PROJECTION_INTERVAL = 0.5

_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,100}$")


def dom_id(entry_id: str | None) -> str:
    """A CSS-safe id suffix for an entry id (``root`` for no entry)."""
    if entry_id is None:
        return "root"
    if _SAFE_ID.match(entry_id):
        return entry_id
    return "h" + hashlib.sha1(entry_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Rendering one entry


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"… ({len(text) - limit} more characters)"


def _entry_data(entry) -> dict[str, Any]:
    try:
        data = entry.data()
    except (ValueError, TypeError):
        return {}
    return data if isinstance(data, dict) else {}


def _usage_line(message: dict[str, Any]) -> str:
    usage = message.get("usage") if isinstance(message.get("usage"), dict) else None
    parts = []
    if message.get("stopReason"):
        parts.append(f"stop: {message['stopReason']}")
    if usage:
        parts.append(
            f"tokens: {usage.get('input', 0)} in · {usage.get('output', 0)} out"
            f" · {usage.get('totalTokens', 0)} total"
        )
    if message.get("errorMessage"):
        parts.append(f"error: {message['errorMessage']}")
    return " · ".join(str(p) for p in parts)


def render_tree_node(entry, data: dict[str, Any]) -> str:
    role = entry.role or ""
    label = entry.type + (f" · {role}" if role else "")
    snippet = _clip(" ".join(transcript_text(data).split()), SNIPPET_LIMIT)
    did = dom_id(entry.entry_id)
    return (
        f'<li id="tree-node-{did}" class="live-node type-{escape(entry.type)}" '
        f'data-entry-id="{escape(entry.entry_id)}" data-position="{entry.position}">'
        f'<span class="node-label"><span class="node-kind">{escape(label)}</span> '
        f'<code class="node-id">{escape(entry.entry_id)}</code> '
        f'<span class="node-snippet">{escape(snippet)}</span></span>'
        f'<ul id="tree-children-{did}" class="tree-children"></ul></li>'
    )


def render_transcript_item(entry, data: dict[str, Any]) -> str:
    from explorer.rendering import render_markdown, render_plain

    role = entry.role or ""
    text = _clip(transcript_text(data), ITEM_TEXT_LIMIT)
    if role == "assistant" or entry.type in ("compaction", "branch_summary"):
        body = f'<div class="item-body markdown">{render_markdown(text)}</div>'
    else:
        body = f'<div class="item-body plain">{render_plain(text)}</div>'
    meta = ""
    message = data.get("message") if isinstance(data.get("message"), dict) else None
    if message and role == "assistant":
        line = _usage_line(message)
        if line:
            meta = f'<div class="item-meta">{escape(line)}</div>'
    who = role or entry.type
    return (
        f'<article id="item-{dom_id(entry.entry_id)}" class="live-item type-{escape(entry.type)} '
        f'role-{escape(role or "none")}" data-entry-id="{escape(entry.entry_id)}" '
        f'data-parent-id="{escape(entry.parent_id or "")}" data-position="{entry.position}">'
        f'<header class="item-head"><span class="item-who">{escape(who)}</span> '
        f'<code class="item-id">{escape(entry.entry_id)}</code> '
        f'<time class="item-time">{escape(entry.timestamp)}</time></header>'
        f"{body}{meta}</article>"
    )


def entry_fragment(entry) -> dict[str, Any]:
    """Everything a viewer needs about one new entry, rendered once for all viewers."""
    data = _entry_data(entry)
    return {
        "id": entry.entry_id,
        "parent_id": entry.parent_id,
        "position": entry.position,
        "type": entry.type,
        "role": entry.role or "",
        "tree": render_tree_node(entry, data),
        "item": render_transcript_item(entry, data),
    }


def entry_fragments(entries) -> list[dict[str, Any]]:
    return [entry_fragment(e) for e in sorted(entries, key=lambda e: e.position)]


# ---------------------------------------------------------------------------------------------
# The projection panel (what the model would see at the tip) and its token meter


def context_window() -> int:
    """The model's context window for the meter and auto-compaction: the setting
    ``SESSIONS_CONTEXT_WINDOW`` when the site defines it, else the environment variable."""
    value = getattr(settings, "SESSIONS_CONTEXT_WINDOW", None)
    if value is None:
        from sessions_site.env import envint

        value = envint("SESSIONS_CONTEXT_WINDOW", 128000, minimum=1)
    return int(value)


def compaction_settings():
    """``SESSIONS_COMPACTION_SETTINGS`` when the site defines it, else the engine defaults
    overridden by ``SESSIONS_COMPACTION_ENABLED`` / ``_RESERVE_TOKENS`` /
    ``_KEEP_RECENT_TOKENS`` from the environment."""
    configured = getattr(settings, "SESSIONS_COMPACTION_SETTINGS", None)
    if configured is not None:
        return configured
    from explorer.session.tokens import DEFAULT_COMPACTION_SETTINGS, CompactionSettings
    from sessions_site.env import envbool, envint

    d = DEFAULT_COMPACTION_SETTINGS
    return CompactionSettings(
        enabled=envbool("SESSIONS_COMPACTION_ENABLED", d.enabled),
        reserve_tokens=envint("SESSIONS_COMPACTION_RESERVE_TOKENS", d.reserve_tokens, minimum=0),
        keep_recent_tokens=envint(
            "SESSIONS_COMPACTION_KEEP_RECENT_TOKENS", d.keep_recent_tokens, minimum=0
        ),
    )


def projection_summary(session, leaf_id: str | None) -> dict[str, Any]:
    """Message count and estimated context tokens of the projection at ``leaf_id``."""
    from explorer import store
    from explorer.session.context import context_from_path
    from explorer.session.tokens import estimate_context_tokens

    path = store.path_to(session, leaf_id) if leaf_id else []
    ctx = context_from_path(path)
    estimate = estimate_context_tokens(ctx.messages)
    tokens = estimate.tokens
    tokens = 0 if tokens != tokens else int(tokens)  # NaN (malformed content) shows as 0
    window = context_window()
    reserve = compaction_settings().reserve_tokens
    return {
        "leaf_id": leaf_id,
        "messages": len(ctx.messages),
        "tokens": tokens,
        "window": window,
        "threshold": max(window - reserve, 0),
        "percent": min(100, round(100 * tokens / window)) if window else 0,
    }


def render_projection_panel(summary: dict[str, Any]) -> str:
    over = summary["tokens"] > summary["threshold"]
    return (
        f'<section id="projection-panel" class="projection-panel{" over" if over else ""}" '
        f'data-tokens="{summary["tokens"]}" data-messages="{summary["messages"]}">'
        f"<h2>Context at the tip</h2>"
        f'<p><span class="proj-messages">{summary["messages"]}</span> messages · '
        f'<span class="proj-tokens">~{summary["tokens"]}</span> tokens of '
        f"{summary['window']} ({summary['percent']}%)</p>"
        f'<meter class="token-meter" min="0" max="{summary["window"]}" '
        f'high="{summary["threshold"]}" value="{summary["tokens"]}">'
        f"{summary['percent']}%</meter>"
        f'<p class="hint">Auto-compaction above {summary["threshold"]} tokens.</p></section>'
    )


_projection_cache: dict[tuple[int, str | None, int], tuple[dict, str]] = {}
_projection_lock = threading.Lock()


def cached_projection(session_pk: int, leaf_id: str | None, position: int) -> tuple[dict, str]:
    """The projection panel at ``leaf_id`` (summary, html), computed once for all viewers of
    this process: the first consumer to ask pays, the other 99 reuse it."""
    from explorer.models import Session

    key = (session_pk, leaf_id, position)
    with _projection_lock:
        hit = _projection_cache.get(key)
    if hit is not None:
        return hit
    session = Session.objects.get(pk=session_pk)
    summary = projection_summary(session, leaf_id)
    value = (summary, render_projection_panel(summary))
    with _projection_lock:
        if len(_projection_cache) > 64:
            _projection_cache.clear()
        _projection_cache[key] = value
    return value


# ---------------------------------------------------------------------------------------------
# Sending


_main_loop: asyncio.AbstractEventLoop | None = None


def remember_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Note the event loop the websocket consumers run on (called when one connects).

    The in-memory channel layer's queues belong to that loop; a plain thread (the turn
    runner, the follower) must hand its ``group_send`` to it rather than run it on a loop of
    its own, where a waiting consumer would not be woken.
    """
    global _main_loop
    _main_loop = loop


def broadcast(session, message: dict[str, Any]) -> None:
    """``group_send`` from synchronous code (signal receivers, the turn runner's thread)."""
    layer = get_channel_layer()
    if layer is None:
        return
    group = session.group_name if hasattr(session, "group_name") else f"session-{session}"
    loop = _main_loop
    if loop is not None and loop.is_running() and not loop.is_closed():
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is None:
            future = asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop)
            future.result(timeout=30)
            return
        if running is loop:  # synchronous code on the loop itself: cannot block here
            loop.create_task(layer.group_send(group, message))
            return
    async_to_sync(layer.group_send)(group, message)


def _projection_target(entries) -> list:
    """Where the projection panel should be recomputed: at the newest entry."""
    newest = max(entries, key=lambda e: e.position)
    return [newest.entry_id, newest.position]


def broadcast_entries(session, entries, *, source: str = "") -> None:
    entries = list(entries)
    if not entries:
        return
    if len(entries) <= MAX_LIVE_BATCH and any("raw" in e.get_deferred_fields() for e in entries):
        from explorer.models import Entry

        entries = list(Entry.objects.filter(pk__in=[e.pk for e in entries]))
    if len(entries) > MAX_LIVE_BATCH:
        broadcast(
            session,
            {
                "type": "live.reset",
                "count": len(entries),
                "last_position": max(e.position for e in entries),
                "source": source,
                "projection": _projection_target(entries),
            },
        )
    else:
        broadcast(
            session,
            {
                "type": "live.entries",
                "entries": entry_fragments(entries),
                "source": source,
                "projection": _projection_target(entries),
            },
        )


@receiver(signals.entries_appended, dispatch_uid="explorer.live.entries_appended")
def on_entries_appended(sender, session, entries, source: str = "", **kwargs) -> None:
    entries = list(entries)
    transaction.on_commit(lambda: _safe(broadcast_entries, session, entries, source=source))


@receiver(signals.cursor_moved, dispatch_uid="explorer.live.cursor_moved")
def on_cursor_moved(sender, session, leaf, user=None, **kwargs) -> None:
    message = {
        "type": "live.cursor",
        "leaf_name": leaf.name,
        "entry_id": leaf.entry_id,
        "user_id": getattr(user, "pk", None) or leaf.user_id,
        "user_name": user.get_username() if user is not None else "",
    }
    transaction.on_commit(lambda: _safe(broadcast, session, message))


def _safe(fn, *args, **kwargs) -> None:
    # A broken channel layer must never turn a committed write into a failed request.
    try:
        fn(*args, **kwargs)
    except Exception:
        logger.exception("live broadcast failed")


def send_turn_event(session, event: str, **fields: Any) -> None:
    """Tell viewers about the running turn (``start``, ``delta``, ``end``, ``error``)."""
    _safe(broadcast, session, {"type": "live.turn", "event": event, **fields})


# ---------------------------------------------------------------------------------------------
# Assembling out-of-band swaps for one htmx viewer


def oob_append(target_id: str, html: str) -> str:
    return f'<div hx-swap-oob="beforeend:#{target_id}">{html}</div>'


def compose_state(last_position: int | None, tip: str | None, follow: bool) -> str:
    return (
        f'<div id="live-state" hx-swap-oob="true" hidden '
        f'data-last-position="{"" if last_position is None else last_position}" '
        f'data-tip="{escape(tip or "")}" data-follow="{"1" if follow else "0"}"></div>'
    )


def compose_transcript(items: list[str]) -> str:
    return f'<div id="transcript" class="transcript" hx-swap-oob="true">{"".join(items)}</div>'


def compose_cursor(message: dict[str, Any], *, mine: bool) -> str:
    """The latest cursor move (a branch switch when the cursor jumps to another branch)."""
    who = (
        "Your cursor"
        if mine
        else (message.get("user_name") or message.get("leaf_name") or "A cursor")
    )
    entry = message.get("entry_id")
    where = f"<code>{escape(entry)}</code>" if entry else "the start (before the first entry)"
    return (
        f'<p id="cursor-status" class="cursor-status" hx-swap-oob="true" '
        f'data-entry-id="{escape(entry or "")}" data-mine="{"1" if mine else "0"}">'
        f"{escape(who)} moved to {where}</p>"
    )


# ---------------------------------------------------------------------------------------------
# The whole text tree for the live page


def render_tree(rows) -> str:
    """Nested ``<li>`` nodes for ``rows`` (Entry rows in file order). A row whose parent is
    not among them hangs at the top level, so a partial tree still shows every row.

    Built with an explicit stack: real sessions nest thousands of levels deep.
    """
    rows = list(rows)
    present = {r.entry_id for r in rows}
    children: dict[str | None, list] = {}
    for r in rows:
        parent = r.parent_id if r.parent_id in present else None
        children.setdefault(parent, []).append(r)
    out: list[str] = []
    # Each stack item: ("open", row) renders a node and schedules its children, or
    # ("close", html) emits closing markup.
    stack: list[tuple[str, Any]] = [("open", r) for r in reversed(children.get(None, []))]
    while stack:
        kind, item = stack.pop()
        if kind == "close":
            out.append(item)
            continue
        html = render_tree_node(item, _entry_data(item))
        head, tail = html[: -len("</ul></li>")], "</ul></li>"
        out.append(head)
        stack.append(("close", tail))
        for child in reversed(children.get(item.entry_id, [])):
            stack.append(("open", child))
    return "".join(out)
