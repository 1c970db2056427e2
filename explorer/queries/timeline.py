"""The Timeline tab: the sampled context-size figures of a route, kept per process and
stored with the session so a later visit extends rather than recomputes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from explorer import stored_figures
from explorer.analysis.timeline import (
    TimelineState,
    extend_timeline,
    now_point,
    peak_of,
    prime_timeline,
    sampled_points,
    settled,
    timeline_svg_data,
)
from explorer.models import Entry, Session
from explorer.queries.entries import context_path, full_path
from explorer.queries.keep import _identity_key, _last_position, _stamped_list, cached, mask_key
from explorer.queries.routes import (
    LightEntry,
    _remember_route,
    _session_routes,
    default_leaf_id,
    light_path,
)
from explorer.session.gcpause import gc_paused

# ---------------------------------------------------------------------------------------------
# The context-size timeline

TIMELINE_MAX_PATH = 6000  # newest entries of a route the timeline shows turns of
# The window's start moves in steps this long, so an append at the tip extends the kept
# figures instead of shifting every prefix by one entry.
TIMELINE_STEP = 1000
TIMELINES_KEPT = 4  # routes whose timeline a process keeps per session


@dataclass
class _KeptTimeline:
    start: int  # the window's first index on the route
    fed: int  # light entries of the window read so far
    last_id: str  # the last of them
    state: TimelineState
    stored: int = -1  # the position of the stored copy as far as this process knows
    lock: threading.Lock = field(default_factory=threading.Lock)


_TIMELINES: OrderedDict[str, tuple[str, list]] = OrderedDict()
_TIMELINES_LOCK = threading.Lock()


def timeline_window(route_length: int) -> int:
    """How many of a route's oldest entries the timeline leaves out: none up to
    :data:`TIMELINE_MAX_PATH`, then a multiple of :data:`TIMELINE_STEP`, so the start stays
    put while the route grows by up to a step."""
    over = route_length - TIMELINE_MAX_PATH
    return 0 if over <= 0 else (over // TIMELINE_STEP + 1) * TIMELINE_STEP


def timeline_figures(session: Session, cursor: str | None) -> dict[str, Any]:
    """The Timeline tab's figures (its page, htmx partial and JSON all use this).

    Cached per session version; after an append at the tip, the per-process copy of the
    route's turns (:func:`_timeline_state`) is extended by the appended entries only."""
    # "timeline-3": each turn has its estimate too, and a "now" point may end the chart
    return cached(session, f"timeline-3:{cursor or ''}", lambda: _timeline_figures(session, cursor))


# The stored tier of a big session's timeline (:mod:`explorer.stored_figures`): the kept
# turns of the default route with the route itself, written by the import and again by a
# reader of the tip once it is STORE_LAG positions ahead. A worker without a copy of its own
# adopts them and extends them by what was appended since, instead of building them.
_TIMELINE_STATE = "timeline-state"


def _timeline_figures(session: Session, cursor: str | None) -> dict[str, Any]:
    """The figures of the route to ``cursor``, from the turns kept in this process, or
    stored with a big session, or built.

    A cold reader of a 50,000-entry session's tip used to walk the whole route up, parse
    every entry of it and run the estimate along it: three costs proportional to the
    route, which made its first request twice a small session's. The stored turns are one
    row, loaded in about the time of one of those three; after an append they are extended
    in this process like its own, so the first request after it stays cheap too."""
    store = bool(cursor) and stored_figures.wanted(session)
    # The stored turns hold masked entries: named by what the masking showed in clear and
    # by the secret rules the findings were made with (a copy outlives a rescan).
    variant = f"{mask_key(session)}:{getattr(session, 'secrets_rules', '')}"
    if store:
        _adopt_stored_timeline(session, variant)
    light = light_path(session, cursor)
    kept = _timeline_state(session, light)
    if store and cursor == default_leaf_id(session):
        _store_timeline(session, light, kept, variant)
    with kept.lock:
        every = kept.state.points
        points = settled(kept.state, sampled_points(every))
        peak, turns = peak_of(every, points), len(every)
        now = now_point(kept.state, light[-1].entry_id) if light else None
        now_info = None
        if now is not None:  # a compaction or edit after the last reply: the context now
            kind = next(m.kind for m in reversed(kept.state.marks) if m.kind != "branch_summary")
            now_info = {
                "entry_id": now.entry_id, "projected": now.projected, "estimate": now.estimate,
                "kind": "compaction" if kind == "compaction" else "context edit",
            }  # fmt: skip
        marks = list(kept.state.marks)
        length = len(kept.state.run) - kept.state.base
    return {
        # The chart ends at the context now; ``points`` stay the turns (``now_point`` apart).
        "chart": timeline_svg_data([*points, now] if now else points, marks, length),
        "points": points,
        "marks": marks,
        "clipped": kept.start,
        "now_point": now_info,
        # Every turn of the route, not only the drawn ones (at most about 240).
        "peak": peak,
        "turns": turns,
        "path_length": len(light),
    }


# The most characters of JSON a route's window may hold for its kept turns to be stored.
# The turns hold every entry of the window parsed (the running estimate needs them to go
# on), about twelve times the lines' size in memory, and their stored row is the pickle of
# that: a 50,000-entry session's 984-entry route is 2 M characters; a big file's route of
# multi-MB tool results would make the import hold, and write, hundreds of MB (the import
# must stay within a quarter of the file's size). Above it, a reader builds the turns.
STORED_TIMELINE_CHARS = 4_000_000


def _timeline_storable(session: Session, window: Sequence[LightEntry]) -> bool:
    """Whether the kept turns of ``window`` are small enough to store (one sum over the
    window's rows; no line is read into Python)."""
    from django.db.models import Sum
    from django.db.models.functions import Length

    pks = [e.pk for e in window]
    if not pks or 0 in pks:
        return False
    chars = 0
    for k in range(0, len(pks), 900):
        part = Entry.objects.filter(session=session, pk__in=pks[k : k + 900])
        chars += part.aggregate(n=Sum(Length("raw")))["n"] or 0
        if chars > STORED_TIMELINE_CHARS:
            return False
    return True


def _adopt_stored_timeline(session: Session, variant: str) -> None:
    """Take the stored kept turns (and their route) into this process when it keeps none
    for the session: :func:`_timeline_state` then extends them like its own, and the
    route is reused by :func:`light_path` (a tip a few entries below it walks those few).
    What does not fit (a branch elsewhere, a window that moved) is built as before."""
    kept = _session_timelines(session)
    with _TIMELINES_LOCK:
        if kept:
            return
    found = stored_figures.load(session, f"{_TIMELINE_STATE}|{variant}", _last_position(session))
    if found is None:
        return
    upto, (rows, start, fed, last_id, state) = found
    route = [LightEntry(*r) for r in rows]
    if not fed or start + fed != len(route) or route[-1].entry_id != last_id:
        return
    _remember_route(_session_routes(session), route)
    with _TIMELINES_LOCK:
        if not kept:
            kept.append(_KeptTimeline(start, fed, last_id, state, stored=upto))


def _store_timeline(
    session: Session,
    light: Sequence[LightEntry],
    kept: _KeptTimeline,
    variant: str,
) -> None:
    """Store the tip's kept turns and route when the stored copy is
    :data:`~explorer.stored_figures.STORE_LAG` positions behind (or missing), so a cold
    reader loads them instead of building them from the route (a reader of another
    branch builds its own: the stored copy is the tip's)."""
    last = _last_position(session)
    state_name = f"{_TIMELINE_STATE}|{variant}"
    with kept.lock:  # the state must not be extended while it is pickled
        if kept.start + kept.fed != len(light) or not light or light[-1].entry_id != kept.last_id:
            return  # extended meanwhile by a longer route: that reader stores it
        if kept.stored < 0:
            kept.stored = stored_figures.position(session, state_name)
        if last - kept.stored < stored_figures.STORE_LAG:
            return
        if not _timeline_storable(session, light[kept.start :]):
            kept.stored = last  # asked again after the next STORE_LAG positions
            return
        rows = [
            (e.entry_id, e.parent_id, e.type, e.role, e.position, e.size, e.child_count)
            + (e.target_id, e.pk)
            for e in light
        ]
        value = (rows, kept.start, kept.fed, kept.last_id, kept.state)
        if stored_figures.store(session, state_name, last, value):
            kept.stored = last


def _session_timelines(session: Session) -> list[_KeptTimeline]:
    # Tied to a stamp in the shared cache like the routes: a cleared cache forgets them too.
    key = _identity_key(session, f"timeline|{mask_key(session)}")
    return _stamped_list(_TIMELINES, _TIMELINES_LOCK, key)


def _timeline_state(session: Session, light: Sequence[LightEntry]) -> _KeptTimeline:
    """Every turn of the route's window, extended from a kept shorter route when this one
    continues it (same window start, the kept last entry at the same place), else built.

    A route is determined by its last entry, so a kept route whose last entry sits at the
    same index here is this route's prefix, and its figures stay right."""
    start = timeline_window(len(light))
    kept = _session_timelines(session)
    with _TIMELINES_LOCK:
        candidates = list(kept)
    for item in reversed(candidates):
        with item.lock:  # checked under the lock: another request may be extending it
            end = item.start + item.fed
            if not (item.start == start and item.fed and end <= len(light)):
                continue
            if light[end - 1].entry_id != item.last_id:
                continue
            new = light[end:]
            if new:
                with gc_paused():
                    extend_timeline(item.state, full_path(session, new))
                item.fed += len(new)
                item.last_id = new[-1].entry_id
        return item
    window = light[start:]
    # What is parsed and estimated here is kept (the state holds the route's entries and
    # their messages): the collector's passes over it as it grows are paused.
    with gc_paused():
        state = TimelineState()
        if start:  # the window's turns go on from the context the route before it leaves
            prime_timeline(state, context_path(session, light[:start])[0])
        state = extend_timeline(state, full_path(session, window))
    item = _KeptTimeline(start, len(window), window[-1].entry_id if window else "", state)
    with _TIMELINES_LOCK:
        kept.append(item)
        del kept[:-TIMELINES_KEPT]
    return item
