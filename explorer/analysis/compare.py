"""Two routes of one session compared: common ancestor, per-route figures, projection diff."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

import orjson

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


def _signature(message: Any) -> bytes:
    """What tells two messages apart, for matching the routes' contexts. Only equality
    matters, so orjson's encoding serves (twenty times quicker than the byte-exact encoder
    the files need); what orjson refuses (keys that are not strings, integers beyond 64
    bits, lone surrogates) takes the exact encoder, which no orjson output can equal."""
    try:
        return orjson.dumps(message)
    except TypeError:
        return b"\x00" + compact_json(message).encode("utf-8", "surrogatepass")


def _projected_messages(path: Sequence[dict]) -> list[tuple[str, str, str, int, str]]:
    """(source id, role, preview, tokens, signature) per message the model sees, in order."""
    out = []
    for pe in projection_from_path(list(path)).entries:
        for m in pe.messages:
            role = m.get("role", "") if isinstance(m, dict) else ""
            out.append(
                (
                    str(pe.source_entry.get("id", "")),
                    role,
                    message_preview(m),
                    tokens_of([m]),
                    _signature(m),
                )
            )
    return out


def projection_diff(path_a: Sequence[dict], path_b: Sequence[dict]) -> list[ProjectionDiffRow]:
    """The two model contexts aligned in model order: shared messages once, then what differs.

    A message is shared when the same source entry gives the same message on both sides (an
    edit or a compaction on one route makes it differ). The alignment is a longest-common-
    subsequence match, so a message only one route has appears where it sits in that route's
    context rather than at the end.
    """
    ra, rb = _projected_messages(path_a), _projected_messages(path_b)
    keys_a = [(r[0], r[4]) for r in ra]
    keys_b = [(r[0], r[4]) for r in rb]
    out: list[ProjectionDiffRow] = []
    matcher = SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.extend(ProjectionDiffRow("both", *r[:4]) for r in ra[i1:i2])
            continue
        out.extend(ProjectionDiffRow("a", *r[:4]) for r in ra[i1:i2])
        out.extend(ProjectionDiffRow("b", *r[:4]) for r in rb[j1:j2])
    return out


def collapse_shared(rows: Sequence[ProjectionDiffRow]) -> list[dict[str, Any]]:
    """The aligned diff for reading: each run of shared messages becomes one counted line."""
    out: list[dict[str, Any]] = []
    for r in rows:
        if r.side == "both" and out and out[-1]["side"] == "both":
            run = out[-1]
            run["count"] += 1
            run["tokens"] += r.tokens
            run["last_id"] = r.source_id
        elif r.side == "both":
            out.append(
                {"side": "both", "count": 1, "tokens": r.tokens, "first_id": r.source_id,
                 "last_id": r.source_id}
            )  # fmt: skip
        else:
            out.append(
                {"side": r.side, "source_id": r.source_id, "role": r.role, "text": r.text,
                 "tokens": r.tokens}
            )  # fmt: skip
    return out


def listed_lines(lines: Sequence[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """At most ``limit`` of the collapsed difference's ``lines`` to list, in their order, each
    with its 1-based line number ``n``: the newest lines of each side in turn (A only, B only,
    shared runs), so a long run of one side's messages cannot push the other side off the
    page (the last lines alone listed none of A's when B's 200 came after them)."""
    if len(lines) <= limit:
        return [{**line, "n": i + 1} for i, line in enumerate(lines)]
    by_side: dict[str, list[int]] = {"a": [], "b": [], "both": []}
    for i, line in enumerate(lines):
        by_side[line["side"]].append(i)
    kept: set[int] = set()
    while len(kept) < limit:
        took = False
        for side in ("a", "b", "both"):
            if by_side[side] and len(kept) < limit:
                kept.add(by_side[side].pop())
                took = True
        if not took:
            break
    return [{**lines[i], "n": i + 1} for i in sorted(kept)]


def off_route_cost(
    entry_ids: Iterable[str], route_ids: Iterable[str], costs: Mapping[str, float]
) -> float:
    """Cost of the entries among ``entry_ids`` that lie on no route to the cursor.

    Wasted work is what the chosen cursor's route does not use: a shared trunk still on that
    route is not wasted, whichever two leaves are compared. ``route_ids`` is root→cursor.
    ``entry_ids`` may be ``costs`` itself (the abandoned total: 20,000 costed entries on the
    benchmark's big session, a third of a cold Compare when summed through a set of them).
    """
    keep = set(route_ids)
    # An exactly rounded sum (``fsum``) does not depend on the order of the set below, which
    # changes from process to process: every worker gives the same figure to the last bit.
    if entry_ids is costs:  # every costed entry (all abandoned branches): no set made
        return math.fsum([c for i, c in costs.items() if i not in keep])
    return math.fsum([costs[i] for i in set(entry_ids) - keep if i in costs])
