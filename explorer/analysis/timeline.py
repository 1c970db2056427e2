"""Context size per turn along a route: the projection's estimate against what the provider
reported, with compactions and edits marked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from explorer.session.context import projection_from_path
from explorer.session.describe import (
    entry_role,
    finite,
    provider_input_tokens,
)
from explorer.session.tokens import estimate_projected_context

# --- context-size timeline ---------------------------------------------------------------


@dataclass
class TimelinePoint:
    index: int  # path index of the assistant reply
    entry_id: str
    projected: int  # estimated context the projection gives the model here
    reported: float | None  # provider-reported input (+ cache) tokens
    turn: int = 0  # 1-based number of the assistant reply on the route
    timestamp: str = ""  # the entry's own ISO timestamp


@dataclass
class TimelineMark:
    index: int
    entry_id: str
    kind: str  # "compaction" | "edit" | "branch_summary"
    label: str


def timeline(
    path: Sequence[dict], *, max_points: int = 240
) -> tuple[list[TimelinePoint], list[TimelineMark]]:
    """Projected context per turn against the provider's reported input tokens.

    The projection is recomputed at each sampled turn from the path prefix that can still
    reach the model (from the newest compaction's kept range on), so long paths stay cheap.
    """
    turns = [i for i, e in enumerate(path) if entry_role(e) == "assistant"]
    turn_of = {i: k + 1 for k, i in enumerate(turns)}
    if len(turns) > max_points:
        step = len(turns) / max_points
        sampled = sorted({turns[int(k * step)] for k in range(max_points)} | {turns[-1]})
    else:
        sampled = turns
    marks = []
    for i, e in enumerate(path):
        t = e.get("type")
        if t == "compaction":
            marks.append(TimelineMark(i, str(e.get("id")), "compaction", "compaction"))
        elif t == "context_edit":
            rep = e.get("replacement")
            marks.append(
                TimelineMark(i, str(e.get("id")), "edit", "hide" if rep is None else "replace")
            )
        elif t == "branch_summary":
            marks.append(TimelineMark(i, str(e.get("id")), "branch_summary", "branch summary"))
    points: list[TimelinePoint] = []
    last_comp = -1
    comp_positions = [m.index for m in marks if m.kind == "compaction"]
    index_of = {e.get("id"): i for i, e in enumerate(path)}
    settings_idx: list[int] = []
    for i in sampled:
        while comp_positions and comp_positions[0] <= i:
            last_comp = comp_positions.pop(0)
        prefix = _relevant_prefix(path, i, last_comp, index_of, settings_idx)
        p = projection_from_path(prefix)
        est = estimate_projected_context(p, prefix)
        ts = path[i].get("timestamp")
        points.append(
            TimelinePoint(
                i,
                str(path[i].get("id")),
                int(finite(est.tokens)),
                provider_input_tokens(path[i]),
                turn_of[i],
                ts if isinstance(ts, str) else "",
            )
        )
    return points, marks


def _relevant_prefix(
    path: Sequence[dict], end: int, last_comp: int, index_of: dict, _cache: list[int]
) -> list[dict]:
    if last_comp < 0:
        return list(path[: end + 1])
    fk = index_of.get(path[last_comp].get("firstKeptEntryId"))
    start = fk if fk is not None and fk < last_comp else last_comp
    return list(path[start : end + 1])


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
    top = max([p.projected for p in points] + [p.reported or 0 for p in points] + [1])
    top = _nice(top)
    span = max(path_len - 1, 1)

    def x(i: int) -> float:
        return round(pad_l + w * i / span, 1)

    def y(v: float) -> float:
        return round(pad_t + h - h * v / top, 1)

    proj = " ".join(f"{x(p.index)},{y(p.projected)}" for p in points)
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
        "dots": [
            {
                "x": x(p.index),
                "y": y(p.projected),
                "id": p.entry_id,
                "v": p.projected,
                "r": p.reported,
                "turn": p.turn,
                "time": _clock(p.timestamp, True),
            }
            for p in dotted
        ],
        "dots_shown": len(dotted),
        "left": pad_l,
        "right": width - pad_r,
        "bottom": pad_t + h,
        "top": pad_t,
    }


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
    the date when the route spans several days)."""
    if not points:
        return []
    days = {p.timestamp[:10] for p in points if p.timestamp}
    picks = sorted({round(k * (len(points) - 1) / max(count - 1, 1)) for k in range(count)})
    return [
        {
            "x": x(points[k].index),
            "turn": points[k].turn,
            "time": _clock(points[k].timestamp, len(days) > 1),
        }
        for k in picks
    ]
