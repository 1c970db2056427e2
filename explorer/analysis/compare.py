"""Two routes of one session compared: common ancestor, per-route figures, projection diff."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from explorer.session.context import projection_from_path
from explorer.session.describe import (
    compact_json,
    cost_of,
    files_touched,
    message_preview,
    tokens_of,
    tool_calls_of,
    total_tokens_of,
)

# --- comparing routes --------------------------------------------------------------------


def common_ancestor_index(path_a: Sequence[str], path_b: Sequence[str]) -> int:
    """Index of the last shared entry of two root-first id paths (-1: different roots)."""
    k = -1
    for x, y in zip(path_a, path_b, strict=False):
        if x != y:
            break
        k += 1
    return k


@dataclass
class RouteStats:
    entries: int
    messages: int
    tokens: float  # provider-reported tokens (all requests on the route)
    cost: float
    tool_calls: int
    files_read: list[str]
    files_modified: list[str]


def route_stats(entries: Sequence[dict]) -> RouteStats:
    files = files_touched(entries)
    return RouteStats(
        entries=len(entries),
        messages=sum(1 for e in entries if e.get("type") == "message"),
        tokens=sum(total_tokens_of(e) for e in entries),
        cost=sum(cost_of(e) for e in entries),
        tool_calls=sum(len(tool_calls_of(e)) for e in entries),
        files_read=files["read"],
        files_modified=files["modified"],
    )


@dataclass
class ProjectionDiffRow:
    side: str  # "both" | "a" | "b"
    source_id: str
    role: str
    text: str
    tokens: int


def projection_diff(path_a: Sequence[dict], path_b: Sequence[dict]) -> list[ProjectionDiffRow]:
    """The two model contexts side by side, grouped by source entry: shared, only-A, only-B."""
    pa = projection_from_path(list(path_a))
    pb = projection_from_path(list(path_b))

    def rows(p: Any) -> list[tuple[str, str, str, int, str]]:
        out = []
        for pe in p.entries:
            for m in pe.messages:
                role = m.get("role", "") if isinstance(m, dict) else ""
                sig = compact_json(m)
                text = message_preview(m)
                out.append((str(pe.source_entry.get("id", "")), role, text, tokens_of([m]), sig))
        return out

    ra, rb = rows(pa), rows(pb)
    sigs_b = {(r[0], r[4]) for r in rb}
    sigs_a = {(r[0], r[4]) for r in ra}
    out: list[ProjectionDiffRow] = []
    for r in ra:
        out.append(
            ProjectionDiffRow("both" if (r[0], r[4]) in sigs_b else "a", r[0], r[1], r[2], r[3])
        )
    for r in rb:
        if (r[0], r[4]) not in sigs_a:
            out.append(ProjectionDiffRow("b", r[0], r[1], r[2], r[3]))
    return out
