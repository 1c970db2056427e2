"""The Compare tab: the figures of a route (:class:`RouteFigureSet`), kept per process,
and the comparison of two routes with their costs.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from explorer.models import Entry, Session
from explorer.queries.costs import abandoned_cost, entry_costs
from explorer.queries.entries import _load_by_pk, context_light, load_entries
from explorer.queries.keep import (
    _cache_generation,
    _through_cache,
    _upto_key,
    cached,
    kept_below,
    mask_key,
)
from explorer.queries.routes import (
    LightEntry,
    _remember_route,
    _session_routes,
    entry_exists,
    light_path,
)
from explorer.session.describe import COSTED_TYPES, entry_role, entry_title

# ---------------------------------------------------------------------------------------------
# Comparing two routes

ROUTE_SHOWN = 150  # entries of each route listed (the newest); figures cover them all
# Lines of the projection difference listed (the newest of each side, in turn:
# ``analysis.compare.listed_lines``); the counts cover every line. Unbounded, the list grew
# with the live ranges (630 lines on the benchmark's big session), and the page weighed and
# cost three times a small session's.
DIFF_SHOWN = 150


def compare_routes(session: Session, a: str, b: str, cursor: str | None) -> dict[str, Any]:
    """Two routes from their common ancestor with every figure the Compare page shows.

    The page, its partial and its JSON all read this. What depends only on one entry's
    route (its figures, the messages its context holds, its newest entries) is kept per
    entry (:func:`route_figure_set`: a route never changes), so a pair is worked out from
    two kept routes; the pair itself is kept across appends too. What depends on the
    reader's cursor or on the whole session (the costs off the cursor's route) is worked
    out per session version."""
    return cached(
        session,
        f"compare-2:{a}:{b}:{cursor or ''}",
        lambda: _compare_routes(session, a, b, cursor),
    )


def _compare_routes(session: Session, a: str, b: str, cursor: str | None) -> dict[str, Any]:
    fa, fb = route_figure_set(session, a), route_figure_set(session, b)
    pair = _through_cache(
        _upto_key(session, mask_key(session), f"{_COMPARED_PAIR}|{b}", a),
        lambda: _compare_pair(session, a, b, fa, fb),
    )
    return {**pair, **_compare_costs(session, a, b, cursor, fa, fb)}


def _route_rows(route: Sequence[LightEntry], data: dict[str, dict]) -> list[dict[str, str]]:
    return [
        {
            "id": e.entry_id,
            "role": entry_role(data.get(e.entry_id, {})) or e.type,
            "title": entry_title(data.get(e.entry_id, {}), 110),
        }
        for e in route[-ROUTE_SHOWN:]
    ]


# The kept pair's cache name; a new name whenever what it holds changes meaning.
_COMPARED_PAIR = "compared-pair-5"  # 5: a Codex compaction's recorded context
# The kept route figures' name; likewise.
_ROUTE_FIGURES = "route-figures-2"  # 2: a Codex compaction's recorded context


@dataclass
class RouteFigureSet:
    """What a comparison needs of one entry's route, kept per entry (:func:`kept_below`).

    Comparing two leaves used to parse both routes after their common ancestor and both
    live ranges: on a big session 1,400 lines and 600 projected messages for a first pair,
    which grew with the routes. Everything a pair shows is a tail of a route or a route's
    context, so each route's part is worked out once, whatever it is compared with, and
    the import stores the default leaf's (the route the Compare tab opens on)."""

    route: list[LightEntry]  # root → entry
    figures: Any  # analysis.compare.RouteFigures
    projected: list[Any]  # analysis.compare.ProjectedRow of each message of its context
    estimate: int  # the engine's estimate of that context
    newest: list[dict[str, str]]  # :func:`_route_rows` of the route's last ROUTE_SHOWN


# The route figure sets this process holds, by their kept key, with the cache generation
# they were read under. A set of a big session's route is about 200 KB pickled, and a
# Compare after every append (its figures are per session version) read both again from
# the shared cache: two unpickles, a fifth of the request. A copy is trusted while the
# shared cache has not been cleared since (one small read), as the grown figures are.
_ROUTE_SETS: OrderedDict[str, tuple[str, RouteFigureSet]] = OrderedDict()
_ROUTE_SETS_LOCK = threading.Lock()
ROUTE_SETS_KEPT = 16  # a few pairs of a few sessions


def route_figure_set(session: Session, entry_id: str) -> RouteFigureSet:
    """The :class:`RouteFigureSet` of the route to ``entry_id``: kept per entry (and stored
    with a big session) when the entry is stored, else worked out (an id no entry has: an
    empty route). A kept route joins this process's known routes, so the walks that follow
    (the cursor's route) start from it. Callers only read the set: it is shared."""
    if not entry_exists(session, entry_id):
        return _route_figure_set(session, light_path(session, entry_id))
    key = _upto_key(session, mask_key(session), _ROUTE_FIGURES, entry_id)
    generation = _cache_generation()
    with _ROUTE_SETS_LOCK:
        held = _ROUTE_SETS.get(key)
        found = held[1] if held is not None and held[0] == generation else None
        if found is not None:
            _ROUTE_SETS.move_to_end(key)
    if found is None:
        found = kept_below(
            session,
            _ROUTE_FIGURES,
            entry_id,
            lambda: _route_figure_set(session, light_path(session, entry_id)),
        )
        with _ROUTE_SETS_LOCK:
            _ROUTE_SETS[key] = (generation, found)
            _ROUTE_SETS.move_to_end(key)
            while len(_ROUTE_SETS) > ROUTE_SETS_KEPT:
                _ROUTE_SETS.popitem(last=False)
    if found.route and found.route[-1].entry_id == entry_id:
        _remember_route(_session_routes(session), found.route)
    return found


# Bytes of lines a route's figures read at a time beyond its live range (whose projection
# needs it whole): a long route of a big session holds thousands of assistant messages, and
# its newest rows can be multi-MB tool results.
PARSE_PART_BYTES = 4_000_000


def _route_figure_set(session: Session, light: Sequence[LightEntry]) -> RouteFigureSet:
    from explorer.analysis.compare import RouteFigures, Spend, projected_rows, spend_of
    from explorer.analysis.projection import projected_estimate
    from explorer.analysis.recorded import projection_of

    light = list(light)
    live, _ = context_light(session, light)
    newest = light[-ROUTE_SHOWN:]
    # Only assistant messages and the costed types spend or call tools: the route's other
    # lines (tool results, user messages: most of its bytes) are read only when its
    # context or its newest rows hold them. Roles come from the covering skeleton index.
    spenders = _assistant_positions(session, [e.position for e in light if e.type == "message"])
    spending = [e for e in light if e.type in COSTED_TYPES or e.position in spenders]
    wanted = {e.pk: e for e in (*live, *newest, *spending)}
    # By primary key unless an id is on two rows (or a row has no key): then by id, as the
    # rest of the page reads them.
    by_pk = bool(wanted) and 0 not in wanted
    by_pk = by_pk and len({e.entry_id for e in wanted.values()}) == len(wanted)

    def read(rows: Sequence[LightEntry]) -> dict[str, dict]:
        if not rows:
            return {}
        if by_pk:
            return _load_by_pk(session, rows)
        return load_entries(session, [e.entry_id for e in rows])

    # The live range is read whole (its projection needs every message of it); the rest a
    # part at a time, keeping only what the figures need of each line.
    data = read(list({e.pk: e for e in live}.values()))
    path = [data[e.entry_id] for e in live if e.entry_id in data]
    projection = projection_of(path)
    at: dict[str, list[int]] = {e.entry_id: [] for e in spending}  # id → its route indexes
    for i, e in enumerate(light):
        if e.entry_id in at:
            at[e.entry_id].append(i)
    found: dict[int, Spend] = {}

    def count(eid: str, entry: dict) -> None:
        for i in at.get(eid, ()):
            if (spend := spend_of(i, entry)) is not None:
                found[i] = spend

    for eid in at.keys() & data.keys():
        count(eid, data[eid])
    outside = [e for e in spending if e.entry_id not in data]
    sizes = _line_sizes([*outside, *newest])
    for part in _parts_by_size(outside, sizes):
        for eid, entry in read(part).items():
            count(eid, entry)
    rows: list[dict[str, str]] = []
    for part in _parts_by_size(newest, sizes):
        known = {e.entry_id: data[e.entry_id] for e in part if e.entry_id in data}
        rows += _route_rows(part, {**known, **read([e for e in part if e.entry_id not in known])})
    return RouteFigureSet(
        route=light,
        figures=RouteFigures(
            length=len(light),
            message_at=[i for i, e in enumerate(light) if e.type == "message"],
            spends=[found[i] for i in sorted(found)],
        ),
        projected=projected_rows(path, projection),
        estimate=projected_estimate(path, projection),
        newest=rows,
    )


def _parts_by_size(
    rows: Sequence[LightEntry], sizes: dict[int, int], budget: int | None = None
) -> Iterator[list[LightEntry]]:
    """``rows`` in order, cut into runs of at most ``budget`` (:data:`PARSE_PART_BYTES`)
    bytes of lines by ``sizes`` (primary key → bytes; a longer line is a run of its own)."""
    budget = PARSE_PART_BYTES if budget is None else budget
    part: list[LightEntry] = []
    size = 0
    for e in rows:
        n = sizes.get(e.pk, 0)
        if part and size + n > budget:
            yield part
            part, size = [], 0
        part.append(e)
        size += n
    if part:
        yield part


def _line_sizes(rows: Sequence[LightEntry]) -> dict[int, int]:
    """Bytes of each row's line, by primary key (a route's walk leaves sizes empty). The
    size is stored after the line, so SQLite steps over a long line's pages to reach it,
    but no line is read into Python."""
    pks = [e.pk for e in rows if e.pk]
    out: dict[int, int] = {}
    for k in range(0, len(pks), 500):
        out.update(Entry.objects.filter(pk__in=pks[k : k + 500]).values_list("pk", "size"))
    return out


def _assistant_positions(session: Session, positions: Sequence[int]) -> set[int]:
    """Which of ``positions`` hold assistant messages, from the covering skeleton index
    (the role lies after the raw line in the table: reading it there reads every line)."""
    found: set[int] = set()
    for k in range(0, len(positions), 500):
        found.update(
            Entry.objects.filter(
                session=session, position__in=positions[k : k + 500], role="assistant"
            )
            .order_by()
            .values_list("position", flat=True)
        )
    return found


def _compare_pair(
    session: Session, a: str, b: str, fa: RouteFigureSet, fb: RouteFigureSet
) -> dict[str, Any]:
    from dataclasses import asdict

    from explorer.analysis.compare import (
        collapse_shared,
        common_ancestor_index,
        diff_rows,
        listed_lines,
        stats_after,
    )

    k = common_ancestor_index([e.entry_id for e in fa.route], [e.entry_id for e in fb.route])
    len_a, len_b = len(fa.route) - k - 1, len(fb.route) - k - 1
    diff = diff_rows(fa.projected, fb.projected)
    ancestor = fa.route[k].entry_id if k >= 0 else None
    lines = collapse_shared(diff)
    return {
        "a": a,
        "b": b,
        "same": a == b,
        "ancestor": ancestor,
        "ancestor_title": entry_title(load_entries(session, [ancestor]).get(ancestor, {}), 100)
        if ancestor
        else "",
        # The newest ROUTE_SHOWN of each tail: the newest of the route, as far as the tail.
        "route_a": fa.newest[max(0, len(fa.newest) - len_a) :] if len_a else [],
        "route_b": fb.newest[max(0, len(fb.newest) - len_b) :] if len_b else [],
        "len_a": len_a,
        "len_b": len_b,
        "stats_a": asdict(stats_after(fa.figures, k)),
        "stats_b": asdict(stats_after(fb.figures, k)),
        # Raw vs projected's figure (the same live ranges, the same engine estimate),
        # without its rows: building both routes' summaries was half a cold Compare.
        "projected_a": fa.estimate,
        "projected_b": fb.estimate,
        "diff": listed_lines(lines, DIFF_SHOWN),
        "diff_hidden": max(0, len(lines) - DIFF_SHOWN),  # lines not listed
        "diff_counts": {
            **{s: sum(1 for d in diff if d.side == s) for s in ("both", "a", "b")},
            # of the shared ones, those equal in content from different entries
            "content": sum(1 for d in diff if d.source_b),
        },
    }


def _compare_costs(
    session: Session,
    a: str,
    b: str,
    cursor: str | None,
    fa: RouteFigureSet,
    fb: RouteFigureSet,
) -> dict[str, Any]:
    from explorer.analysis.compare import off_route_cost

    # The cursor's route: one of the two compared (the Compare tab opens with the cursor
    # as A), else walked from theirs (both joined the known routes).
    known = next((f.route for f in (fa, fb) if cursor and f.route and f.route[-1].entry_id == cursor), None)  # fmt: skip
    on_cursor = [e.entry_id for e in (known if known is not None else light_path(session, cursor))]
    costs = entry_costs(session)
    return {
        "cursor": cursor,
        "a_abandoned": a not in on_cursor,
        "b_abandoned": b not in on_cursor,
        "wasted": off_route_cost(
            [e.entry_id for e in fa.route] + [e.entry_id for e in fb.route], on_cursor, costs
        ),
        "abandoned_total": abandoned_cost(session, cursor, on_cursor),
    }
