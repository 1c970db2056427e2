"""Two routes of one session compared: common ancestor, per-route figures, projection diff."""

from __future__ import annotations

import hashlib
import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

import orjson

from explorer.analysis.recorded import projection_of
from explorer.session.describe import (
    compact_json,
    cost_of,
    file_uses,
    files_of_uses,
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


@dataclass(frozen=True)
class Spend:
    """What one entry adds to its route's figures: the spend it records and the tools it
    called. Only entries that record usage or call tools have one (assistant messages and
    the costed entry types), so a route's figures can be read without its other lines."""

    index: int  # the entry's place on the route, 0 for the root
    tokens: float
    cost: float
    tool_calls: int
    files: tuple[tuple[str, str], ...]  # ``describe.file_uses``: (kind, path) in call order

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickled as its fields (kept with every route's figures): quicker than its state.
        return (Spend, (self.index, self.tokens, self.cost, self.tool_calls, self.files))


def spend_of(index: int, entry: dict) -> Spend | None:
    """The entry's :class:`Spend`, or None when it adds nothing."""
    calls = len(tool_calls_of(entry))
    tokens, cost = total_tokens_of(entry), cost_of(entry)
    if not (calls or tokens or cost):
        return None
    return Spend(index, tokens, cost, calls, tuple(file_uses(entry)))


@dataclass
class RouteFigures:
    """A whole route (root to one entry) as :func:`stats_after` needs it: enough to give
    the figures of any tail of it, such as the part after a common ancestor, in time that
    depends on that tail's spends alone. Kept per entry (a route never changes), so a pair
    of routes compared is two of these, not two tails parsed again."""

    length: int
    message_at: list[int] = field(default_factory=list)  # route indexes of message entries
    spends: list[Spend] = field(default_factory=list)  # in route order


def stats_after(figures: RouteFigures, k: int) -> RouteStats:
    """The figures of the route's entries after index ``k`` (-1: the whole route). The
    sums run over the same values in the same order as over the parsed entries, so they
    agree to the last bit with adding up every entry of the tail."""
    spends = figures.spends[bisect_right([s.index for s in figures.spends], k) :]
    files = files_of_uses(u for s in spends for u in s.files)
    return RouteStats(
        entries=max(0, figures.length - k - 1),
        messages=len(figures.message_at) - bisect_right(figures.message_at, k),
        tokens=sum((s.tokens for s in spends), 0.0),
        cost=sum((s.cost for s in spends), 0.0),
        tool_calls=sum(s.tool_calls for s in spends),
        files_read=files["read"],
        files_modified=files["modified"],
    )


def route_figures(entries: Sequence[dict]) -> RouteFigures:
    """:class:`RouteFigures` of parsed entries in route order."""
    return RouteFigures(
        length=len(entries),
        message_at=[i for i, e in enumerate(entries) if e.get("type") == "message"],
        spends=[s for i, e in enumerate(entries) if (s := spend_of(i, e)) is not None],
    )


def route_stats(entries: Sequence[dict]) -> RouteStats:
    return stats_after(route_figures(entries), -1)


@dataclass
class ProjectionDiffRow:
    side: str  # "both" | "a" | "b"
    source_id: str
    role: str
    text: str
    tokens: int
    # A shared message that comes from different entries on the two routes (equal content:
    # say, the checkpoints of two compactions with the same system prompt): B's entry.
    source_b: str = ""


def _signature(message: Any) -> bytes:
    """What tells two messages apart, for matching the routes' contexts: a digest of the
    message's JSON (kept per route, so the messages themselves need not be). Only equality
    matters, so orjson's encoding serves (twenty times quicker than the byte-exact encoder
    the files need); what orjson refuses (keys that are not strings, integers beyond 64
    bits, lone surrogates) takes the exact encoder, marked so no orjson output can equal
    it."""
    try:
        encoded = orjson.dumps(message)
    except TypeError:
        encoded = b"\x00" + compact_json(message).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(encoded, digest_size=16).digest()


# (source id, role, preview, tokens, signature) of one message the model sees.
ProjectedRow = tuple[str, str, str, int, bytes]


def projected_rows(path: Sequence[dict], projection: Any = None) -> list[ProjectedRow]:
    """Each message the model sees on ``path`` (its projection, if already made), in order."""
    if projection is None:
        projection = projection_of(path)
    out = []
    for pe in projection.entries:
        for m in pe.messages:
            role = m.get("role", "") if isinstance(m, dict) else ""
            source = str(pe.source_entry.get("id", ""))
            out.append((source, role, message_preview(m), tokens_of([m]), _signature(m)))
    return out


def diff_rows(ra: Sequence[ProjectedRow], rb: Sequence[ProjectedRow]) -> list[ProjectionDiffRow]:
    """Two contexts' :func:`projected_rows` aligned in model order (:func:`projection_diff`)."""
    keys_a = [(r[0], r[4]) for r in ra]
    keys_b = [(r[0], r[4]) for r in rb]
    out: list[ProjectionDiffRow] = []
    matcher = SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.extend(ProjectionDiffRow("both", *r[:4]) for r in ra[i1:i2])
            continue
        out.extend(_same_content(ra[i1:i2], rb[j1:j2]))
    return out


def _same_content(
    ra: Sequence[ProjectedRow], rb: Sequence[ProjectedRow]
) -> list[ProjectionDiffRow]:
    """A stretch the source entries do not align, aligned again by content alone: a message
    both models get word for word from different entries is shared (and says so, with B's
    entry), the rest is one side's. Two routes whose contexts began with the same system
    prompt, each from its own compaction's checkpoint, once shared nothing."""
    out: list[ProjectionDiffRow] = []
    matcher = SequenceMatcher(None, [r[4] for r in ra], [r[4] for r in rb], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.extend(
                ProjectionDiffRow("both", *a[:4], source_b=b[0])
                for a, b in zip(ra[i1:i2], rb[j1:j2], strict=True)
            )
            continue
        out.extend(ProjectionDiffRow("a", *r[:4]) for r in ra[i1:i2])
        out.extend(ProjectionDiffRow("b", *r[:4]) for r in rb[j1:j2])
    return out


def projection_diff(path_a: Sequence[dict], path_b: Sequence[dict]) -> list[ProjectionDiffRow]:
    """The two model contexts aligned in model order: shared messages once, then what differs.

    A message is shared when the same source entry gives the same message on both sides (an
    edit or a compaction on one route makes it differ). The alignment is a longest-common-
    subsequence match, so a message only one route has appears where it sits in that route's
    context rather than at the end.
    """
    return diff_rows(projected_rows(path_a), projected_rows(path_b))


def collapse_shared(rows: Sequence[ProjectionDiffRow]) -> list[dict[str, Any]]:
    """The aligned diff for reading: each run of shared messages becomes one counted line."""
    out: list[dict[str, Any]] = []
    for r in rows:
        by_content = bool(r.source_b)  # a run is of one kind: same entries, or same content
        if (
            r.side == "both"
            and out
            and out[-1]["side"] == "both"
            and bool(out[-1].get("last_b")) == by_content
        ):
            run = out[-1]
            run["count"] += 1
            run["tokens"] += r.tokens
            run["last_id"] = r.source_id
            if by_content:
                run["last_b"] = r.source_b
        elif r.side == "both":
            run = {"side": "both", "count": 1, "tokens": r.tokens, "first_id": r.source_id,
                   "last_id": r.source_id}  # fmt: skip
            if by_content:
                run.update(first_b=r.source_b, last_b=r.source_b)
            out.append(run)
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
