"""Context size per turn along a route: the projection's estimate against what the provider
reported, with compactions and edits marked."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

# --- context-size timeline ---------------------------------------------------------------


PENDING_ESTIMATE = -1  # an estimate not known


@dataclass
class TimelinePoint:
    index: int  # path index of the assistant reply
    entry_id: str
    projected: int  # the engine's context figure here (= ``pisession context``)
    reported: float | None  # provider-reported context (``provider_context_tokens``)
    turn: int = 0  # 1-based number of the assistant reply on the route; 0: "now"
    timestamp: str = ""  # the entry's own ISO timestamp
    # Every message estimated (no usage trusted): what the "estimate" line plots
    estimate: int = PENDING_ESTIMATE


@dataclass
class TimelineMark:
    index: int
    entry_id: str
    kind: str  # "compaction" | "edit" | "branch_summary"
    label: str


PENDING = -1  # a turn's projected context not known (never so for a stored route's)


def sampled_points(points: Sequence[TimelinePoint], max_points: int = 240) -> list[TimelinePoint]:
    """At most about ``max_points`` turns, evenly spread, always with the last one and the
    peak among the computed ones (a chart of a long route must not lose its highest turn
    between two samples)."""
    return [points[k] for k in sample_indices([p.projected for p in points], max_points)]


def sample_indices(projected: Sequence[int], max_points: int = 240) -> list[int]:
    """:func:`sampled_points` as indices into the turns' projected figures: a caller holding
    thousands of turns as plain figures builds a point for the drawn ones only."""
    n = len(projected)
    if n <= max_points:
        return list(range(n))
    step = n / max_points
    picked = {int(k * step) for k in range(max_points)} | {n - 1}
    known = [k for k, v in enumerate(projected) if v != PENDING]
    if known:
        picked.add(max(known, key=projected.__getitem__))
    return sorted(picked)


def peak_of(points: Sequence[TimelinePoint], shown: Sequence[TimelinePoint]) -> int:
    """The highest projected context over every turn: those computed, and the ``shown``
    ones (settled: a turn left to compute on demand counts once it is drawn)."""
    return peak_of_values([p.projected for p in points], shown)


def peak_of_values(projected: Sequence[int], shown: Sequence[TimelinePoint]) -> int:
    """:func:`peak_of` of the turns' projected figures."""
    known = [v for v in projected if v != PENDING]
    return max([*known, *(p.projected for p in shown)], default=0)


def _dotted(points: Sequence[TimelinePoint], limit: int) -> list[TimelinePoint]:
    """At most ``limit`` of ``points`` (limit ≥ 3): evenly spread, the peak and the last."""
    n = len(points)
    if n <= limit:
        return list(points)
    peak = max(range(n), key=lambda i: points[i].projected)
    picked = {round(k * (n - 1) / (limit - 3)) for k in range(limit - 2)} | {peak, n - 1}
    return [points[i] for i in sorted(picked)]


def timeline_svg_data(
    points: Sequence[TimelinePoint],
    marks: Sequence[TimelineMark],
    path_len: int,
    *,
    width: int = 900,
    height: int = 290,
    max_dots: int = 150,
) -> dict[str, Any]:
    """Coordinates for an inline SVG chart (the template draws it; no JS library).

    The lines go through every turn; at most ``max_dots`` turns get a dot (a link with
    its figures), spread evenly and always including the peak and the last turn, so the
    page stays the same weight however long the route is."""
    pad_l, pad_r, pad_t, pad_b = 56, 12, 12, 58
    w, h = width - pad_l - pad_r, height - pad_t - pad_b
    top = max([p.estimate for p in points] + [p.reported or 0 for p in points] + [1])
    top = _nice(min(top, CHART_CEILING))
    span = max(path_len - 1, 1)

    def x(i: int) -> float:
        return round(pad_l + w * i / span, 1)

    def y(v: float) -> float:
        return round(pad_t + h - h * max(min(v, top), 0) / top, 1)

    proj = " ".join(f"{x(p.index)},{y(p.estimate)}" for p in points)
    dotted = _dotted(points, max_dots)
    rep = " ".join(f"{x(p.index)},{y(p.reported)}" for p in points if p.reported is not None)
    ticks = [{"y": y(top * k / 4), "label": _short(top * k / 4)} for k in range(5)]
    return {
        "xticks": _x_ticks(points, x),
        "width": width,
        "height": height,
        "projected": proj,
        "reported": rep,
        "ticks": ticks,
        "marks": [
            {"x": x(m.index), "kind": m.kind, "label": m.label, "id": m.entry_id} for m in marks
        ],
        "dots": [_dot(p, str(x(p.index)), str(y(p.estimate))) for p in dotted],
        "dots_shown": len(dotted),
        "left": pad_l,
        "right": width - pad_r,
        "bottom": pad_t + h,
        "top": pad_t,
    }


def _dot(p: TimelinePoint, cx: str, cy: str) -> dict[str, Any]:
    """One dot's link, its words made here once: a page draws up to 150 of them, and the
    template's per-value lookups and number formatting cost more than the chart's maths."""
    time = _clock(p.timestamp, True)
    reported = "" if p.reported is None else _whole(p.reported)
    if not p.turn:  # the context after a trailing compaction or edit
        label = f"Now, after the last reply: estimate {p.estimate} tokens, projected {p.projected} tokens"
        title = f"Now · estimate {p.estimate}, projected {p.projected}"
    else:
        label = f"Turn {p.turn}{' at ' + time if time else ''} ({p.entry_id}): estimate {p.estimate} tokens, projected {p.projected} tokens"
        title = f"Turn {p.turn} · {p.entry_id}: estimate {p.estimate}, projected {p.projected}"
    if reported:
        label += f", provider-reported {reported}"
        title += f", reported {reported}"
    return {
        "x": cx,
        "y": cy,
        "id": p.entry_id,
        "v": p.projected,
        "r": p.reported,
        "turn": p.turn,
        "time": time,
        "label": label,
        "title": title,
    }


def _whole(v: float) -> str:
    """``v`` rounded half up to a whole number, as the page has always written it. A
    whole number is written as it is (a crafted file's may be too long for a float)."""
    if isinstance(v, int):
        return str(v)
    if not math.isfinite(v):
        return "0"
    if abs(v) >= 1e15:  # past the float's whole-number digits: nothing to round
        return str(int(v))
    return str(Decimal(repr(float(v))).quantize(Decimal(1), rounding=ROUND_HALF_UP))


# The highest token count the chart's scale goes to. A crafted file's usage may hold any
# number (23 digits, 1e308); no context is anywhere near this, and past it the arithmetic
# of the scale would leave the floats (OverflowError). A turn above it is drawn at the top;
# its dot still says its figure in full.
CHART_CEILING = 10**18


def _nice(v: float) -> float:
    exp = 10 ** max(0, len(str(int(v))) - 1)
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * exp:
            return m * exp
    return v


def _short(v: float) -> str:
    """A gridline's value, short but exact: 1,250 is "1.25k", never a rounded "1k"."""

    def trim(x: float) -> str:
        return f"{x:.3f}".rstrip("0").rstrip(".")

    if v >= 1_000_000:
        return trim(v / 1_000_000) + "M"
    if v >= 1000:
        return trim(v / 1000) + "k"
    return trim(v)


def _clock(timestamp: str, with_date: bool) -> str:
    """``2025-03-04T05:06:07.000Z`` as "05:06" (or "03-04 05:06"); "" when not a timestamp."""
    if len(timestamp) < 16 or timestamp[10] != "T":
        return ""
    return (timestamp[5:10] + " " if with_date else "") + timestamp[11:16]


def _x_ticks(points: Sequence[TimelinePoint], x: Any, count: int = 6) -> list[dict[str, Any]]:
    """Up to ``count`` evenly spread turns labelled with their number and clock time (with
    the date when the route spans several days). A label centred on the chart's last turn
    would run past the drawing's right edge and be cut off, so the last one of several
    ends at its tick (``anchor``), as the first begins at its own."""
    points = [p for p in points if p.turn]  # a "now" point has no turn to label
    if not points:
        return []
    days = {p.timestamp[:10] for p in points if p.timestamp}
    picks = sorted({round(k * (len(points) - 1) / max(count - 1, 1)) for k in range(count)})
    return [
        {
            "x": x(points[k].index),
            "turn": points[k].turn,
            "time": _clock(points[k].timestamp, len(days) > 1),
            "anchor": _tick_anchor(n, len(picks)),
        }
        for n, k in enumerate(picks)
    ]


def _tick_anchor(n: int, count: int) -> str:
    """Where the ``n``-th of ``count`` x labels is anchored: inside the chart at both ends."""
    if count > 1 and n == count - 1:
        return "end"
    if count > 1 and n == 0:
        return "start"
    return "middle"
