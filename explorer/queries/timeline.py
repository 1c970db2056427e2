"""The Timeline tab: the context size at every turn of a route, read from the route
figures stored with each entry (:mod:`explorer.route_store`).

Each turn's projected figure (the engine's, = ``pisession context --leaf``) and its
"every message estimated" figure are columns of the entry's row, computed once when the
entry arrived: the tab reads the window's index rows and figure rows, and parses only the
bodies of the turns it draws (their timestamp and provider-reported context) and of the
context edits it marks (hide or replace). Nothing is kept between requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection

from explorer.analysis.timeline import (
    TimelineMark,
    TimelinePoint,
    peak_of,
    sampled_points,
    timeline_svg_data,
)
from explorer.key_lookups import rows_for_keys
from explorer.models import Entry, RouteFigure, Session
from explorer.queries.routes import LightEntry, light_path
from explorer.segment_store import route_chain, route_rows
from explorer.session import jsonfmt
from explorer.session.describe import finite, provider_context_tokens

TIMELINE_MAX_PATH = 6000  # newest entries of a route the timeline shows turns of
# The window's start moves in steps this long, so a route growing at its tip keeps the
# same x axis (and the same figures at the same places) for up to a step.
TIMELINE_STEP = 1000


def timeline_window(route_length: int) -> int:
    """How many of a route's oldest entries the timeline leaves out: none up to
    :data:`TIMELINE_MAX_PATH`, then a multiple of :data:`TIMELINE_STEP`, so the start stays
    put while the route grows by up to a step."""
    over = route_length - TIMELINE_MAX_PATH
    return 0 if over <= 0 else (over // TIMELINE_STEP + 1) * TIMELINE_STEP


def timeline_figures(session: Session, cursor: str | None) -> dict[str, Any]:
    """The Timeline tab's figures (its page, htmx partial and JSON all use this).

    Every turn of the window comes from its stored row (projected, every message
    estimated); only the drawn turns' lines are parsed (at most about 240, for their time
    and provider-reported context), so a cold request costs the same on a long route as
    on a short one, bar the index rows of the route itself."""
    light = light_path(session, cursor)
    start = timeline_window(len(light))
    window = light[start:]
    rows = _reply_rows(session, light[-1].entry_id, start) if light else {}
    if rows is None:
        rows = _figure_rows(session, window)
    elif window and window[-1].pk not in rows:
        rows |= _figure_rows(session, window[-1:])  # the context now (:func:`_now_point`)
    every: list[TimelinePoint] = []
    marks: list[TimelineMark] = []
    edits: list[tuple[int, LightEntry]] = []
    for i, e in enumerate(window):
        if e.type == "compaction":
            marks.append(TimelineMark(i, e.entry_id, "compaction", "compaction"))
        elif e.type == "context_edit":
            marks.append(TimelineMark(i, e.entry_id, "edit", "hide"))
            edits.append((len(marks) - 1, e))
        elif e.type == "branch_summary":
            marks.append(TimelineMark(i, e.entry_id, "branch_summary", "branch summary"))
        row = rows.get(e.pk)
        if row is None or row[0] != "assistant":
            continue
        every.append(
            TimelinePoint(i, e.entry_id, _whole(row[1]), None, len(every) + 1, "", _whole(row[2]))
        )
    points = sampled_points(every)
    _read_shown(session, window, points, marks, edits)
    now = _now_point(window, rows, points, marks)
    now_info = None
    if now is not None:  # a compaction or edit after the last reply: the context now
        kind = next(m.kind for m in reversed(marks) if m.kind != "branch_summary")
        now_info = {
            "entry_id": now.entry_id, "projected": now.projected, "estimate": now.estimate,
            "kind": "compaction" if kind == "compaction" else "context edit",
        }  # fmt: skip
    return {
        # The chart ends at the context now; ``points`` stay the turns (``now`` apart).
        "chart": timeline_svg_data([*points, now] if now else points, marks, len(window)),
        "points": points,
        "marks": marks,
        "clipped": start,
        "now_point": now_info,
        # Every turn of the window, not only the drawn ones (at most about 240).
        "peak": peak_of(every, points),
        "turns": len(every),
        "path_length": len(light),
    }


def _whole(value: float | None) -> int:
    """A stored figure as the chart counts it (null, i.e. NaN, is 0)."""
    return int(finite(float("nan") if value is None else value))


def _reply_rows(
    session: Session, leaf: str, start: int
) -> dict[int, tuple[str, float | None, float | None]] | None:
    """:func:`_figure_rows` of the replies at depth ``start`` or below on the route to
    ``leaf``, the rows the chart reads (bar the leaf's own), in one query over the route's segments (no
    list of keys); None where the segments do not settle the route."""
    table = connection.ops.quote_name(RouteFigure._meta.db_table)
    rows = route_rows(
        session.pk,
        leaf,
        "e.id, f.role, f.context_tokens, f.every_estimate",
        join=f"JOIN {table} f ON f.entry_id = e.id",
        where="f.depth >= %s AND f.role = %s",
        params=[start, "assistant"],
    )
    if not rows:
        # No reply in the window, or a route the segments leave out: the rows decide.
        if route_chain(session.pk, leaf) is None:
            return None
        return {}
    return {pk: (role, projected, estimate) for pk, role, projected, estimate in rows}


def _figure_rows(
    session: Session, window: Sequence[LightEntry]
) -> dict[int, tuple[str, float | None, float | None]]:
    """(role, context_tokens, every_estimate) of the window's entries by entry key: the
    figure rows looked up by their key (the entry's), a few hundred at a time."""
    table = connection.ops.quote_name(RouteFigure._meta.db_table)
    rows = rows_for_keys(
        f"SELECT entry_id, session_id, role, context_tokens, every_estimate FROM {table} "
        "WHERE entry_id IN ({keys})",
        [e.pk for e in window if e.pk],
    )
    return {
        pk: (role, projected, estimate)
        for pk, session_pk, role, projected, estimate in rows
        if session_pk == session.pk
    }


def _read_shown(
    session: Session,
    window: Sequence[LightEntry],
    points: Sequence[TimelinePoint],
    marks: list[TimelineMark],
    edits: Sequence[tuple[int, LightEntry]],
) -> None:
    """Parse what the page shows and the rows do not hold: the drawn turns' timestamp and
    provider-reported context, and whether each marked context edit hides or replaces."""
    wanted = [window[p.index] for p in points] + [e for _, e in edits]
    parsed = _lines(session, wanted)
    for p in points:
        entry = parsed.get(p.entry_id)
        if entry is None:
            continue
        p.reported = provider_context_tokens(entry)
        ts = entry.get("timestamp")
        p.timestamp = ts if isinstance(ts, str) else ""
    for at, e in edits:
        entry = parsed.get(e.entry_id)
        if entry is not None and entry.get("replacement") is not None:
            marks[at].label = "replace"


def _lines(session: Session, light: Sequence[LightEntry]) -> dict[str, dict]:
    """The parsed lines of ``light`` by entry id, read by their keys.

    Not masked (:func:`~explorer.queries.entries.full_path` is): the tab shows no text of
    them, only a timestamp, a usage figure and whether an edit replaces, and the masking's
    findings would cost more to read than these few lines do to parse."""
    table = connection.ops.quote_name(Entry._meta.db_table)
    expected = {e.pk: e.entry_id for e in light if e.pk}
    pks = list(expected)
    out: dict[str, dict] = {}
    with connection.cursor() as cur:
        for k in range(0, len(pks), 500):
            chunk = pks[k : k + 500]
            cur.execute(
                f"SELECT id, session_id, entry_id, raw FROM {table} "
                f"WHERE id IN ({','.join(['%s'] * len(chunk))})",
                chunk,
            )
            for pk, session_pk, entry_id, raw in cur.fetchall():
                if session_pk != session.pk or expected.get(pk) != entry_id:
                    continue
                try:
                    value = jsonfmt.loads(raw)
                except ValueError:
                    continue
                if isinstance(value, dict):
                    out[entry_id] = value
    return out


def _now_point(
    window: Sequence[LightEntry],
    rows: dict[int, tuple[str, float | None, float | None]],
    points: Sequence[TimelinePoint],
    marks: Sequence[TimelineMark],
) -> TimelinePoint | None:
    """The context as it is at the route's end when a compaction or context edit came after
    the last assistant reply, or None. Without it the chart ended at the last reply's
    figure (24,896) while the context after the trailing compaction was 12,454."""
    last = points[-1].index if points else -1
    if not window or not any(m.index > last and m.kind in ("compaction", "edit") for m in marks):
        return None
    leaf = window[-1]
    row = rows.get(leaf.pk)
    if row is None:
        return None
    return TimelinePoint(
        len(window) - 1, leaf.entry_id, _whole(row[1]), None, 0, "", _whole(row[2])
    )
