"""Live updates: the only module that talks to the channel layer.

``explorer.services`` calls these functions inside a write's transaction. Each hands its
message over after the commit, so a viewer never sees an entry that was rolled back and a
broken channel layer never fails a committed write.

New entries are not rendered in the writer's request: the commit hook only queues them for
this process's broadcast worker (one thread), and the write returns. The worker takes every
queued write at once (a burst becomes one frame), renders each new entry's Transcript row
ONCE for every viewer of the session, and does the one ``group_send``. It keeps the route
map of the session's recent tips in memory and lengthens it by each entry appended there
(``queries.extend_route_map``), so a stream of appends at a tip, or on another branch, costs
no route walk per entry; each viewer then only appends the rows that continue its own tip
and counts the rest as "new entries on other branches" (``explorer.consumers``). With the
Redis layer the frame is rendered in the writer's process, once, and every worker's
consumers receive it. The live meter (the projection panel) is computed by a second thread
at most every ``PROJECTION_INTERVAL``, also once for all viewers.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connections, transaction

from explorer import conf, html, items, live_frames, queries
from explorer.models import Entry
from explorer.session import jsonfmt

logger = logging.getLogger(__name__)

# Above this many entries in one round (an import), viewers get a "reload" notice instead of
# every fragment: rendering 100k nodes into a websocket helps nobody. Below it (a follower
# that fell behind, a burst of writes) every entry is delivered, in messages of at most
# LIVE_CHUNK entries. A viewer that far behind reloads anyway (``consumers.MAX_GAP``).
MAX_LIVE_BATCH = 5000
LIVE_CHUNK = 500
# Rows (by their lines' sizes) per group message: a message carries each row twice (the
# entry's fragment and its chain's frame), so this keeps one well under a megabyte.
MESSAGE_ROW_BYTES = 384 * 1024
# The live meter is recomputed at most this often per session, and for at most a quarter of
# the time: a burst of a thousand lines then sends viewers one meter, not a thousand. It
# reads one stored row (a Codex route with a recorded history after its compaction parses
# its live range, which must not starve the follower and the event loop sharing the
# interpreter).
PROJECTION_INTERVAL = 0.5
PROJECTION_SHARE = 0.25
# Route maps kept per session (its recent tips) and sessions kept, by the broadcast worker.
TIPS_PER_SESSION = 8
SESSIONS_KEPT = 64

_main_loop: asyncio.AbstractEventLoop | None = None


def remember_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Note the event loop the websocket consumers run on (called when one connects).

    The in-memory channel layer's queues belong to that loop; a plain thread (the broadcast
    worker, the turn runner, the follower) must hand its ``group_send`` to it rather than run
    it on a loop of its own, where a waiting consumer would not be woken.
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


# ---------------------------------------------------------------------------------------------
# The worker: one thread per process, fed by commit hooks


@dataclass
class _Job:
    session: Any
    entries: list = field(default_factory=list)  # new rows (an "entries" job)
    source: str = ""
    message: dict[str, Any] | None = None  # a ready message (sent in its turn, in order)


class _Worker:
    """A queue drained by one daemon thread; ``run(jobs)`` gets everything queued so far."""

    def __init__(self, name: str, run, gate: threading.Lock | None = None) -> None:
        self.name = name
        self.run = run
        # Held while a round runs; the jobs are taken once it is acquired, so everything
        # queued while someone else held it goes out together.
        self.gate = gate or threading.Lock()
        self.cond = threading.Condition()
        self.jobs: list = []
        self.busy = False
        self.thread: threading.Thread | None = None

    def put(self, job) -> None:
        with self.cond:
            self.jobs.append(job)
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self.thread.start()
            self.cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.jobs:
                    self.cond.wait()
                self.busy = True
            with self.gate:
                with self.cond:
                    jobs, self.jobs = self.jobs, []
                try:
                    _prepare_connection()
                    self.run(jobs)
                except Exception:
                    logger.exception("%s failed", self.name)
                finally:
                    _close_connections()
                    with self.cond:
                        self.busy = False
                        self.cond.notify_all()

    def idle(self, deadline: float) -> bool:
        with self.cond:
            return self.cond.wait_for(
                lambda: not self.jobs and not self.busy, max(0.0, deadline - time.monotonic())
            )


def _prepare_connection() -> None:
    """An in-memory SQLite database (shared cache, as the test suite's) locks whole tables
    against other connections' readers, so the worker's reads would make a concurrent write
    fail; reading without those locks is safe here, as the worker only reads rows whose
    commit it was told about. File databases (WAL) and PostgreSQL never block like this."""
    conn = connections["default"]
    if conn.vendor == "sqlite" and conn.is_in_memory_db():
        with conn.cursor() as cursor:
            cursor.execute("PRAGMA read_uncommitted = 1")


def _close_connections() -> None:
    # The worker's own database connections: closed after each round, so a test database
    # can be dropped and a pooled PostgreSQL connection goes back to the pool.
    for conn in connections.all(initialized_only=True):
        try:
            conn.close()
        except Exception:
            logger.exception("closing the broadcast worker's connection failed")


# Rendering shares the route maps: the worker thread and an inline render take turns (and a
# test holds it to keep writes queued).
_render_lock = threading.Lock()
_routes: OrderedDict[int, tuple[tuple, OrderedDict[str, queries.RouteMap]]] = OrderedDict()
# How many route maps the worker had to build (a walk of the route): for tests and benchmarks.
route_walks = 0


def _tips(session) -> OrderedDict[str, queries.RouteMap]:
    """The route maps of the session's recent tips, as this process last broadcast them."""
    identity = (session.session_id, session.created)
    known = _routes.get(session.pk)
    if known is None or known[0] != identity:
        known = (identity, OrderedDict())
    _routes[session.pk] = known
    _routes.move_to_end(session.pk)
    while len(_routes) > SESSIONS_KEPT:
        _routes.popitem(last=False)
    return known[1]


def _route_of(session, tips: OrderedDict[str, queries.RouteMap], entry) -> queries.RouteMap:
    """The route root → ``entry``: its parent's map lengthened when the parent is a known
    tip (no database read), else built once."""
    global route_walks
    parent = tips.pop(entry.parent_id, None) if entry.parent_id else None
    rmap = queries.extend_route_map(parent, entry.entry_id, entry.type) if parent else None
    if rmap is None:
        route_walks += 1
        rmap = queries.route_map(session, entry.entry_id)
    tips[entry.entry_id] = rmap
    while len(tips) > TIPS_PER_SESSION:
        tips.popitem(last=False)
    return rmap


def _projection_target(entries) -> list:
    """Where the projection panel should be recomputed: at the newest entry."""
    newest = max(entries, key=lambda e: e.position)
    return [newest.entry_id, newest.position]


def render_entries(session, entries) -> dict[str, Any]:
    """The one ``live.entries`` message for new rows of a session (in file order).

    ``entries``: each entry's fragment with its Transcript row. ``chains``: runs of new
    entries each continuing the one before, from ``from`` (the entry they hang on), with
    their rows already joined into the out-of-band swap a viewer at that tip receives as it
    is. A viewer whose tip is none of them appends nothing and counts the entries as "on
    other branches"; nobody walks or rebuilds a route for them.
    """
    entries = sorted({e.position: e for e in entries}.values(), key=lambda e: e.position)
    tips = _tips(session)
    maps = {e.entry_id: _route_of(session, tips, e) for e in entries}
    by_id = {e.entry_id: e for e in entries}
    rows: dict[str, str] = {}
    chains: list[dict[str, Any]] = []
    for entry in reversed(entries):
        if entry.entry_id in rows:
            continue
        rmap = maps[entry.entry_id]
        lo = len(rmap.ids) - 1
        parent = entry.parent_id
        while parent in by_id and parent not in rows and lo > 0 and rmap.ids[lo - 1] == parent:
            lo -= 1
            parent = by_id[parent].parent_id
        chain_rows = {
            eid: live_frames.bounded_row(session.pk, eid, html.dom_id(eid), row)
            for eid, row in items.route_rows(session, rmap, lo).items()
        }
        rows.update(chain_rows)
        ids = list(rmap.ids[lo:])
        # The chain's rows in frames a viewer can take (``live_frames``), each one append.
        frames = live_frames.pack(
            (chain_rows[i] for i in ids), live_frames.FRAME_BYTES - live_frames.NOTICE_BYTES
        )
        chains.append(
            {
                "from": rmap.ids[lo - 1] if lo > 0 else None,
                "ids": ids,
                "first": by_id[ids[0]].position,
                "frames": [
                    str(html.oob_append("transcript", html.trusted(frame))) for frame in frames
                ],
            }
        )
    return {
        "type": "live.entries",
        "entries": [items.entry_fragment(e, rows.get(e.entry_id, "")) for e in entries],
        "chains": chains,
        "projection": _projection_target(entries),
    }


def _reset_message(entries, source: str) -> dict[str, Any]:
    return {
        "type": "live.reset",
        "count": len(entries),
        "last_position": max(e.position for e in entries),
        "source": source,
        "projection": _projection_target(entries),
    }


def _fresh(session):
    """The session as stored now: the writer's copy was read before its append (its entry
    count and version would make a route walk stop short or a cache key stale)."""
    from explorer.models import Session

    return Session.objects.filter(pk=session.pk).first()


def _chunks(entries: list) -> list[list]:
    """``entries`` (in file order) in runs of at most ``LIVE_CHUNK`` entries and about
    ``MESSAGE_ROW_BYTES`` of rows (each line's size, a row counted at most at its bound),
    so a burst of big lines is several group messages, never one huge one."""
    chunks: list[list] = []
    current: list = []
    used = 0
    for entry in entries:
        weight = min(entry.size or 0, live_frames.ROW_BYTES)
        if current and (len(current) >= LIVE_CHUNK or used + weight > MESSAGE_ROW_BYTES):
            chunks.append(current)
            current, used = [], 0
        current.append(entry)
        used += weight
    if current:
        chunks.append(current)
    return chunks


def _send_entries(session, entries, source: str, *, inline: bool = False) -> None:
    session = _fresh(session)
    if session is None:  # deleted meanwhile: nobody is left to tell
        return
    entries = sorted({e.position: e for e in entries}.values(), key=lambda e: e.position)
    if len(entries) > MAX_LIVE_BATCH:
        message = _reset_message(entries, source)
        send(session, message)
    else:
        if any("raw" in e.get_deferred_fields() for e in entries):
            entries = list(
                Entry.objects.filter(pk__in=[e.pk for e in entries]).order_by("position")
            )
        for chunk in _chunks(entries):
            message = render_entries(session, chunk)
            send(session, message | {"source": source})
    if not inline:  # inline only inside an outer transaction (tests): the meter waits
        _projections.put((session, message["projection"]))


def _run_jobs(jobs: list[_Job], *, inline: bool = False) -> None:
    """Send what was queued: per session, the new entries of every queued write in one
    message (a burst is rendered once), then the other messages in their order. Those only
    ever refer to entries already written (a cursor moved there, a turn ended), so none of
    them has to go before the entries."""
    pending: OrderedDict[int, tuple[Any, list, list[str], list[dict]]] = OrderedDict()
    for job in jobs:
        pk = job.session.pk
        if pk not in pending:
            pending[pk] = (job.session, [], [], [])
        _, entries, sources, messages = pending[pk]
        if job.message is None:
            entries.extend(job.entries)
            sources.append(job.source)
        else:
            messages.append(job.message)
    for session, entries, sources, messages in pending.values():
        if entries:
            source = ",".join(dict.fromkeys(sources))
            _safe(_send_entries, session, entries, source, inline=inline)
        for message in messages:
            _safe(send, session, message)


def _run_projections(jobs: list[tuple[Any, list]]) -> None:
    """The live meter at the newest target of each session, once for all viewers."""
    newest: dict[int, tuple[Any, list]] = {}
    for session, target in jobs:
        known = newest.get(session.pk)
        if known is None or target[1] >= known[1][1]:
            newest[session.pk] = (session, target)
    # At most every PROJECTION_INTERVAL (and PROJECTION_SHARE of the time when a meter is
    # slow): bursts coalesce meanwhile, the next round taking every target queued since.
    global _projection_due
    time.sleep(max(0.0, _projection_due - time.monotonic()))
    started = time.monotonic()
    for session, target in newest.values():
        session = _fresh(session)
        if session is not None:
            _safe(_send_projection, session, target)
    took = time.monotonic() - started
    _projection_due = time.monotonic() + max(PROJECTION_INTERVAL, took / PROJECTION_SHARE - took)


_projection_due = 0.0


def _send_projection(session, target: list) -> None:
    try:
        window, reserve = conf.window_and_reserve()
        summary = queries.projection_summary(session, target[0], window=window, reserve=reserve)
    except Exception as exc:  # a malformed or deleted session: viewers keep the old panel
        logger.warning("projection of session %s failed: %s", session.pk, exc)
        return
    send(
        session,
        {
            "type": "live.projection",
            "summary": summary,
            "html": str(html.projection_panel(summary)),
        },
    )


_worker = _Worker("live-broadcast", _run_jobs, _render_lock)
_projections = _Worker("live-projection", _run_projections)
# A command that writes and exits (an import, a script) still tells the viewers: the worker
# is a daemon thread, so the interpreter would not wait for it otherwise. Registered with
# threading's own exit hooks, which run (last registered first) before the thread pools that
# ``async_to_sync`` needs are shut down; ``atexit`` would run after them.
_register_exit = getattr(threading, "_register_atexit", atexit.register)
_register_exit(lambda: drain(30))


def _queue(job: _Job) -> None:
    """Hand a committed write's message to the worker; run it here instead when the commit
    hook fires inside an outer transaction (a test capturing commit hooks): the worker's own
    connection could not see those rows yet."""
    if transaction.get_connection().in_atomic_block:
        with _render_lock:
            _run_jobs([job], inline=True)
        return
    _worker.put(job)


def _after_commit(job: _Job) -> None:
    transaction.on_commit(lambda: _safe(_queue, job))


def drain(timeout: float = 30.0) -> bool:
    """Wait until every queued broadcast was sent (and the meter recomputed): for tests and
    benchmarks, which must not sleep. True when both workers are idle in time."""
    deadline = time.monotonic() + timeout
    return _worker.idle(deadline) and _projections.idle(deadline) and _worker.idle(deadline)


# ---------------------------------------------------------------------------------------------
# What services call


def entries_appended(session, entries, *, source: str = "") -> None:
    """New rows exist (``source``: import, edit, compaction, turn, follow, ...)."""
    entries = list(entries)
    if entries:
        _after_commit(_Job(session, entries, source))


def cursor_moved(session, leaf, user=None) -> None:
    """A named cursor points somewhere else; nothing was appended. Queued behind the
    write's entries, so a viewer sees the entries before the cursor that points at them."""
    message = {
        "type": "live.cursor",
        "leaf_name": leaf.name,
        "entry_id": leaf.entry_id,
        "user_id": getattr(user, "pk", None) or leaf.user_id,
        "user_name": user.get_username() if user is not None else "",
    }
    _after_commit(_Job(session, message=message))


def follow_stopped(session, message: str) -> None:
    """Following the session's file stopped (truncated or rewritten): viewers must not be
    told "live" while nothing more will arrive. Sent at once (no transaction)."""
    _safe(send, session, {"type": "live.follow_stopped", "message": message})


def turn_event(session, event: str, **fields: Any) -> None:
    """Tell viewers about the running turn (``start``, ``delta``, ``end``, ``error``, ...).

    Every event goes through the worker's queue, behind the entries already committed: the
    first delta must not overtake the user message the turn appended before asking the
    provider, nor the end the answer. Sent at once, a delta could (the entries wait in the
    queue while the worker renders). The queue keeps the events' own order, and entries
    queued with them go first, so nothing refers to an entry a viewer has not seen."""
    message = {"type": "live.turn", "event": event, **fields}
    _safe(_queue_now, session, message)


def _queue_now(session, message: dict[str, Any]) -> None:
    if not hasattr(session, "pk"):  # given a pk: a stand-in that names the group
        session = _SessionRef(session)
    _worker.put(_Job(session, message=message))


@dataclass
class _SessionRef:
    pk: int

    @property
    def group_name(self) -> str:
        return f"session-{self.pk}"
