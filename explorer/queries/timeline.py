"""The Timeline tab: the context size at every turn of a route, read from the route
figures stored with each entry (:mod:`explorer.route_store`).

Each turn's projected figure (the engine's, = ``pisession context --leaf``) and its
"every message estimated" figure are columns of the entry's row, computed once when the
entry arrived: the tab reads the window's index rows and figure rows, and parses only the
bodies of the turns it draws (their timestamp and provider-reported context) and of the
context edits it marks (hide or replace). Nothing is kept between requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from django.db import connection

from explorer.analysis.timeline import (
    TimelineMark,
    TimelinePoint,
    peak_of_values,
    sample_indices,
    timeline_svg_data,
)
from explorer.key_lookups import rows_for_keys
from explorer.models import Entry, RouteFigure, Session
from explorer.queries.routes import LightEntry, light_path, stored_depth
from explorer.segment_store import route_rows
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


# The marks (compactions, context edits, branch summaries) a page draws and lists: the
# newest of the window's. A route of thousands of edits would otherwise make the page and
# its JSON grow with it; the counts per kind still say how many there are.
MARKS_SHOWN = 50
_MARK_KINDS = {
    "compaction": ("compaction", "compaction"),
    "context_edit": ("edit", "hide"),
    "branch_summary": ("branch_summary", "branch summary"),
}

# One row of the window the tab reads: (index in the window, entry id, type, role,
# projected, every message estimated, entry key), for the replies, the marks and the leaf;
# the role is None where the entry has no figure row. A reply read over the segments has
# no id here (""): a drawn one's comes with its line (:func:`_read_shown`).
_Row = tuple[int, str, str, str | None, float | None, float | None, int]


def timeline_figures(
    session: Session, cursor: str | None, marks_before: int | None = None, *, chart: bool = True
) -> dict[str, Any]:
    """The Timeline tab's figures (its page, htmx partial and JSON all use this).

    Every turn of the window comes from its stored row (projected, every message
    estimated); only the drawn turns' lines are parsed (at most about 240, for their time
    and provider-reported context), and of the marks the newest :data:`MARKS_SHOWN`, so a
    cold request reads the route's replies and marks (one statement over its segments),
    never the whole route, and its answer is no longer on a long route than on a short one.
    ``marks_before``: a window index; the marks shown are then the newest before it (how a
    reader, or a JSON client, pages back through a window of more marks than are shown).
    ``chart``: False leaves the drawing's coordinates out (None), for the JSON, which has
    the figures they are drawn from."""
    path_length, start, rows = _window_rows(session, cursor)
    replies: list[_Row] = []
    marked: list[tuple[int, TimelineMark]] = []  # (entry key, mark)
    for row in rows:
        mark = _MARK_KINDS.get(row[2])
        if mark is not None:
            marked.append((row[6], TimelineMark(row[0], row[1], *mark)))
        if row[3] == "assistant":
            replies.append(row)
    marks = [m for _pk, m in marked]
    # A point is built for the drawn turns only (at most about 240 of thousands).
    projected = [_whole(r[4]) for r in replies]
    drawn = [
        (replies[k][6], TimelinePoint(
            replies[k][0], replies[k][1], projected[k], None, k + 1, "", _whole(replies[k][5])
        ))
        for k in sample_indices(projected)
    ]  # fmt: skip
    points = [p for _pk, p in drawn]
    older = marked if marks_before is None else [x for x in marked if x[1].index < marks_before]
    shown_marked = older[-MARKS_SHOWN:]
    shown = [m for _pk, m in shown_marked]
    _read_shown(session, drawn, [(pk, m) for pk, m in shown_marked if m.kind == "edit"])
    window_length = path_length - start
    now = _now_point(window_length, rows, points, marks)
    now_info = None
    if now is not None:  # a compaction or edit after the last reply: the context now
        kind = next(m.kind for m in reversed(marks) if m.kind != "branch_summary")
        now_info = {
            "entry_id": now.entry_id, "projected": now.projected, "estimate": now.estimate,
            "kind": "compaction" if kind == "compaction" else "context edit",
        }  # fmt: skip
    counts = {"compaction": 0, "edit": 0, "branch_summary": 0}
    for m in marks:
        counts[m.kind] += 1
    return {
        # The chart ends at the context now; ``points`` stay the turns (``now`` apart).
        "chart": (
            timeline_svg_data([*points, now] if now else points, shown, window_length)
            if chart
            else None
        ),
        "points": points,
        # The newest MARKS_SHOWN of the window's marks (before ``marks_before`` if asked);
        # ``marks_total`` and ``mark_counts`` count them all.
        "marks": shown,
        "marks_total": len(marks),
        "marks_not_shown": len(marks) - len(shown),
        # Marks newer than the shown ones (paged back with ``marks_before``), not drawn.
        "marks_newer": len(marks) - len(older),
        "marks_older": len(older) - len(shown),
        "mark_counts": counts,
        # The ``?marks_before=`` that asks for the older marks, or None: none left out.
        "older_marks": shown[0].index if len(older) > len(shown) else None,
        "clipped": start,
        "now_point": now_info,
        # Every turn of the window, not only the drawn ones (at most about 240).
        "peak": peak_of_values(projected, points),
        "turns": len(replies),
        "path_length": path_length,
    }


def _window_rows(session: Session, cursor: str | None) -> tuple[int, int, list[_Row]]:
    """(route length, entries left out at its start, the window's rows the tab reads: its
    replies, its marks and its last entry, in route order).

    A placed leaf (in a segment) has its depth stored: the length is that, and the rows
    one statement over the route's segments (:func:`_segment_rows`). A leaf in no segment
    (a loop, or below one) has its route walked up its parent links instead
    (:func:`_walked_rows`)."""
    if not cursor:
        return 0, 0, []
    depth = stored_depth(session, cursor)
    if depth is not None:
        start = timeline_window(depth + 1)
        rows = _segment_rows(session, cursor, depth, start)
        if rows is not None:
            return depth + 1, start, rows
    light = light_path(session, cursor)
    start = timeline_window(len(light))
    return len(light), start, _walked_rows(session, light, start)


def _segment_rows(session: Session, leaf: str, depth: int, start: int) -> list[_Row] | None:
    """The rows of the window from ``start`` on the route to ``leaf`` (a placed entry
    ``depth`` entries below its root): the route's segments joined to their figure rows
    past the start, only the replies, the marks and the leaf, each at its stored depth (its
    index on the route). None where the statement does not end at the leaf (no figure row
    for it: the caller walks the route).

    The statement reads the members and their figure rows only: joining the entry table
    for every entry of the route doubled its time. The figure rows say which entries are
    replies (their role); a mark is an entry of no role (not a message), whose id and type
    are then looked up by key, with the leaf's (a few rows: the route's non-messages)."""
    table = connection.ops.quote_name(RouteFigure._meta.db_table)
    found = route_rows(
        session.pk,
        jsonfmt.visible(leaf),
        "f.depth, m.entry_id, f.role, f.context_tokens, f.every_estimate",
        join=f"JOIN {table} f ON f.entry_id = m.entry_id",
        where="f.depth >= %s AND (f.role = %s OR f.role = %s OR f.depth = %s)",
        params=[start, "assistant", "", depth],
        entries_joined=False,
    )
    if not found or found[-1][0] != depth:
        return None
    entries = connection.ops.quote_name(Entry._meta.db_table)
    named = {
        pk: (entry_id, kind)
        for pk, session_pk, entry_id, kind in rows_for_keys(
            f"SELECT id, session_id, entry_id, type FROM {entries} WHERE id IN ({{keys}})",
            [pk for d, pk, role, *_ in found if role != "assistant" or d == depth],
        )
        if session_pk == session.pk
    }
    rows: list[_Row] = []
    for d, pk, role, projected, estimate in found:
        if role == "assistant" and d != depth:
            rows.append((d - start, "", "message", role, projected, estimate, pk))
            continue
        if pk not in named:
            return None
        entry_id, kind = named[pk]
        if role == "assistant" or kind in _MARK_KINDS or d == depth:
            rows.append((d - start, entry_id, kind, role or "", projected, estimate, pk))
    return rows


def _walked_rows(session: Session, light: Sequence[LightEntry], start: int) -> list[_Row]:
    """The rows of the window from ``start`` of a walked route (:func:`_segment_rows`'s
    rows, from the route's index rows and the window's figure rows by key)."""
    window = light[start:]
    figures = _figure_rows(session, window)
    rows: list[_Row] = []
    for i, e in enumerate(window):
        role, projected, estimate = figures.get(e.pk, (None, None, None))
        if role == "assistant" or e.type in _MARK_KINDS or i == len(window) - 1:
            rows.append((i, e.entry_id, e.type, role, projected, estimate, e.pk))
    return rows


def _whole(value: float | None) -> int:
    """A stored figure as the chart counts it (null, i.e. NaN, is 0); a stored float, as
    every figure column holds, is taken as it is (a route's thousands of replies each
    pass here)."""
    if type(value) is float and math.isfinite(value):
        return int(value)
    return int(finite(value))


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
    points: Sequence[tuple[int, TimelinePoint]],
    edits: Sequence[tuple[int, TimelineMark]],
) -> None:
    """Parse what the page shows and the rows do not hold: the drawn turns' timestamp and
    provider-reported context (and id, where the rows left it out), and whether each shown
    context edit hides or replaces. Each comes with its entry key."""
    parsed = _lines(session, {pk: x.entry_id for pk, x in [*points, *edits] if pk})
    for pk, p in points:
        got = parsed.get(pk)
        if got is None:
            continue
        p.entry_id, entry = got
        if entry is None:
            continue
        p.reported = provider_context_tokens(entry)
        ts = entry.get("timestamp")
        p.timestamp = ts if isinstance(ts, str) else ""
    for pk, m in edits:
        got = parsed.get(pk)
        if got is not None and got[1] is not None and got[1].get("replacement") is not None:
            m.label = "replace"


def _lines(session: Session, expected: dict[int, str]) -> dict[int, tuple[str, dict | None]]:
    """(entry id, parsed line or None when it is no JSON object) of the entries
    ``expected`` (key → id, "" when not known yet) by key, read by their keys.

    Not masked (:func:`~explorer.queries.entries.full_path` is): the tab shows no text of
    them, only a timestamp, a usage figure and whether an edit replaces, and the masking's
    findings would cost more to read than these few lines do to parse."""
    table = connection.ops.quote_name(Entry._meta.db_table)
    out: dict[int, tuple[str, dict | None]] = {}
    rows = rows_for_keys(
        f"SELECT id, session_id, entry_id, raw FROM {table} WHERE id IN ({{keys}})",
        list(expected),
    )
    for pk, session_pk, entry_id, raw in rows:
        if session_pk != session.pk or expected.get(pk) not in ("", entry_id):
            continue
        try:
            value = jsonfmt.loads(raw)
        except ValueError:
            value = None
        out[pk] = (entry_id, value if isinstance(value, dict) else None)
    return out


def _now_point(
    window_length: int,
    rows: Sequence[_Row],
    points: Sequence[TimelinePoint],
    marks: Sequence[TimelineMark],
) -> TimelinePoint | None:
    """The context as it is at the route's end when a compaction or context edit came after
    the last assistant reply, or None. Without it the chart ended at the last reply's
    figure (24,896) while the context after the trailing compaction was 12,454."""
    last = points[-1].index if points else -1
    if not rows or not any(m.index > last and m.kind in ("compaction", "edit") for m in marks):
        return None
    index, entry_id, _type, role, projected, estimate, _pk = rows[-1]
    if index != window_length - 1 or role is None:
        return None  # the leaf's figure row is missing
    return TimelinePoint(index, entry_id, _whole(projected), None, 0, "", _whole(estimate))
