"""Live updates: the only module that talks to the channel layer.

``explorer.services`` calls these functions inside a write's transaction; each schedules its
``group_send`` for after the commit, so a viewer never sees an entry that was rolled back and
a broken channel layer never fails a committed write. New entries are rendered ONCE here
(``items.entry_fragments``: the Transcript tab's row of each) and the same fragments go to
every viewer of the session; each consumer only assembles its own out-of-band swaps.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from explorer import items
from explorer.models import Entry
from explorer.session import jsonfmt

logger = logging.getLogger(__name__)

# Above this many entries in one write (an import), viewers get a "reload" notice instead of
# every fragment: rendering 100k nodes into a websocket helps nobody.
MAX_LIVE_BATCH = 500

_main_loop: asyncio.AbstractEventLoop | None = None


def remember_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Note the event loop the websocket consumers run on (called when one connects).

    The in-memory channel layer's queues belong to that loop; a plain thread (the turn
    runner, the follower) must hand its ``group_send`` to it rather than run it on a loop of
    its own, where a waiting consumer would not be woken.
    """
    global _main_loop
    _main_loop = loop


def send(session, message: dict[str, Any]) -> None:
    """``group_send`` to the session's viewers, from synchronous code on any thread."""
    layer = get_channel_layer()
    if layer is None:
        return
    # Redis packs strings as UTF-8: a lone surrogate or NUL travels as U+FFFD.
    message = jsonfmt.visible_data(message)
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


def _safe(fn, *args, **kwargs) -> None:
    # A broken channel layer must never turn a committed write into a failed request.
    try:
        fn(*args, **kwargs)
    except Exception:
        logger.exception("live broadcast failed")


def _after_commit(fn, *args, **kwargs) -> None:
    transaction.on_commit(lambda: _safe(fn, *args, **kwargs))


def _projection_target(entries) -> list:
    """Where the projection panel should be recomputed: at the newest entry."""
    newest = max(entries, key=lambda e: e.position)
    return [newest.entry_id, newest.position]


def _send_entries(session, entries, source: str) -> None:
    if len(entries) <= MAX_LIVE_BATCH and any("raw" in e.get_deferred_fields() for e in entries):
        entries = list(Entry.objects.filter(pk__in=[e.pk for e in entries]))
    if len(entries) > MAX_LIVE_BATCH:
        message = {
            "type": "live.reset",
            "count": len(entries),
            "last_position": max(e.position for e in entries),
            "source": source,
            "projection": _projection_target(entries),
        }
    else:
        message = {
            "type": "live.entries",
            "entries": items.entry_fragments(entries, session),
            "source": source,
            "projection": _projection_target(entries),
        }
    send(session, message)


def entries_appended(session, entries, *, source: str = "") -> None:
    """New rows exist (``source``: import, edit, compaction, turn, follow, ...)."""
    entries = list(entries)
    if entries:
        _after_commit(_send_entries, session, entries, source)


def cursor_moved(session, leaf, user=None) -> None:
    """A named cursor points somewhere else; nothing was appended."""
    message = {
        "type": "live.cursor",
        "leaf_name": leaf.name,
        "entry_id": leaf.entry_id,
        "user_id": getattr(user, "pk", None) or leaf.user_id,
        "user_name": user.get_username() if user is not None else "",
    }
    _after_commit(send, session, message)


def follow_stopped(session, message: str) -> None:
    """Following the session's file stopped (truncated or rewritten): viewers must not be
    told "live" while nothing more will arrive. Sent at once (no transaction)."""
    _safe(send, session, {"type": "live.follow_stopped", "message": message})


def turn_event(session, event: str, **fields: Any) -> None:
    """Tell viewers about the running turn (``start``, ``delta``, ``end``, ``error``, ...).

    Sent at once: a turn's deltas are not part of a database transaction."""
    _safe(send, session, {"type": "live.turn", "event": event, **fields})
