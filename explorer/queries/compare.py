"""The Compare tab: two routes from their common ancestor, read from stored rows.

A route never changes, so what one route adds up to after the common ancestor is read
from stored rows (:class:`explorer.models.RouteFigure` prefix sums and the entries'
index columns: depth, type, cost), the files each reply read and modified from the rows
stored with it (:class:`explorer.models.FileUse`); only what the page lists is parsed: the
newest entries of each route (:data:`ROUTE_SHOWN`), the two contexts the projection
difference aligns, and the few tool-calling replies after the ancestor that hold a secret
(their paths are shown masked, as a parse gives them).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from typing import Any

from explorer import route_store
from explorer.analysis.line_texts import CompareTexts as Texts
from explorer.analysis.line_texts import compare_texts
from explorer.key_lookups import rows_for_keys
from explorer.line_text_store import stored_texts
from explorer.models import Entry, RouteFigure, Session
from explorer.queries.chain_context import TailRow
from explorer.queries.compare_tails import WholeTail
from explorer.queries.costs import abandoned_cost
from explorer.queries.entries import context_light, entries_with_secrets, load_entries
from explorer.queries.omitted import omitted_entries
from explorer.queries.routes import LightEntry, light_path
from explorer.session.describe import entry_role, entry_title

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

    The page, its partial and its JSON all read this. Nothing is kept: every figure comes
    from stored rows and the few lines the page lists or aligns, so a cold request does
    what a warm one does. Routes are read by their chains of segments
    (:func:`_compare_by_chains`: each route's part after the common ancestor, and of the
    shared prefix only what the live ranges and the costs need); where the segments do not
    settle a route (an id unknown, an entry in a parent loop), both routes are read whole
    (:func:`compare_walked`, the reference the chains' answer is tested against)."""
    shown = _compare_by_chains(session, a, b, cursor)
    return shown if shown is not None else compare_walked(session, a, b, cursor)


def _route_rows(
    route: Sequence[Any], data: dict[str, dict], known: dict[str, Texts]
) -> list[dict[str, str]]:
    return [
        {
            "id": e.entry_id,
            "role": (
                known[e.entry_id][0]
                if e.entry_id in known
                else entry_role(data.get(e.entry_id, {}))
            )
            or e.type,  # fmt: skip
            "title": known[e.entry_id][1]
            if e.entry_id in known
            else entry_title(data.get(e.entry_id, {}), 110),  # fmt: skip
        }
        for e in route
    ]


def _stored_texts(session: Session, ids: Collection[str]) -> dict[str, Texts]:
    """What Compare shows of the multi-MB lines among ``ids``, stored with them
    (``line_text_store``: ``analysis.line_texts.compare_texts`` of the masked line)."""
    return {eid: texts.compare for eid, texts in stored_texts(session, ids).items()}


def _undecided_lines(
    diff: Sequence[Any],
    listed: Sequence[dict[str, Any]],
    stood: set[str],
    undecided: bool,
    known: dict[str, Texts],
) -> set[str]:
    """The stood-in entries whose lines must be read: every one in an unaligned stretch
    when one there might equal a message of the other side by content (``undecided``:
    ``analysis.compare.checked_diff_rows``), and those on a listed line of the difference
    whose preview is not stored. Read, the stretches hold no stand-in (the
    alignment by source entry is the same with or without them), so a second alignment
    needs none read."""
    out: set[str] = set()
    if undecided:
        for d in diff:
            if d.side != "both" or d.source_b:
                out.update(x for x in (d.source_id, d.source_b) if x in stood)
    for line in listed:
        eid = line.get("source_id")
        if line["side"] != "both" and eid in stood and (eid not in known or known[eid][3] is None):
            out.add(eid)
    return out


def _with_preview(line: dict[str, Any], stood: set[str], known: dict[str, Texts]) -> dict[str, Any]:
    """A listed line of a stood-in entry with the stored preview of its message."""
    eid = line.get("source_id")
    if line["side"] == "both" or eid not in stood:
        return line
    return {**line, "text": known[eid][3]}


def compare_walked(session: Session, a: str, b: str, cursor: str | None) -> dict[str, Any]:
    """:func:`compare_routes` from both routes read whole (``light_path``): for routes the
    segments do not settle, and the reference the chains' reading is tested against."""
    from explorer.analysis.compare import common_ancestor_index

    route_a, route_b = light_path(session, a), light_path(session, b)
    k = common_ancestor_index([e.entry_id for e in route_a], [e.entry_id for e in route_b])
    # Each entry's stored cost and route tool calls, for both routes in one read.
    stored = _stored_rows(session, {e.position for e in (*route_a, *route_b)})
    live_a, live_b = context_light(session, route_a)[0], context_light(session, route_b)[0]
    rows_a, rows_b = _with_stored(route_a, k, stored), _with_stored(route_b, k, stored)
    base = rows_a[0] if k >= 0 else None
    out = _compare_parts(
        session,
        (a, b),
        base,
        (
            WholeTail(rows_a[1:] if k >= 0 else rows_a, base),
            WholeTail(rows_b[1:] if k >= 0 else rows_b, base),
        ),
        (route_a[-1].entry_id if route_a else None, route_b[-1].entry_id if route_b else None),
        (live_a, live_b),
    )
    out.update(_compare_costs(session, a, b, cursor, route_a, route_b, stored))
    return out


def _compare_by_chains(
    session: Session, a: str, b: str, cursor: str | None
) -> dict[str, Any] | None:
    """:func:`compare_routes` from the routes' chains of segments, or None where the
    segments do not settle a route (then both are read whole).

    The common ancestor is where the two chains part (its depth from the chains alone);
    each route's part after it is read sparsely by its (segment, offset) ranges
    (``compare_tails.SparseTail``: the entries a sum needs one by one, and rows only from
    where the live range or the listing starts); of the shared prefix only the rows of a
    live range that reaches into it are read (once for both routes), and its costs off the
    cursor's route as costs only (:func:`_chain_costs`)."""
    from explorer.queries.chain_context import Prefix, live_range, tail_rows
    from explorer.queries.compare_tails import SparseTail, marks_on, session_marks
    from explorer.route_parts import ancestor_depth, chain

    ca, cb = chain(session.pk, a), chain(session.pk, b)
    if ca is None or cb is None:
        return None
    cc = None
    if cursor:
        cc = ca if cursor == a else cb if cursor == b else chain(session.pk, cursor)
        if cc is None:
            return None
    k = ancestor_depth(ca, cb)
    first = max(k, 0) + (1 if k >= 0 else 0)
    base = None
    if k >= 0:
        found = tail_rows(ca, k, k)
        if len(found) != 1:
            return None  # a member missing: the segments do not settle it
        base = found[0]
    marks = session_marks(session.pk)
    tail_a, tail_b = (
        SparseTail(session.pk, ca, first, marks),
        SparseTail(session.pk, cb, first, marks),
    )
    prefix = Prefix(ca, k, [tuple(m) for m in marks_on(ca, 0, k, marks)] if k >= 0 else [])
    lives = (live_range(session, ca, prefix, tail_a), live_range(session, cb, prefix, tail_b))
    ends = tuple(
        tail.last(1)[-1].entry_id if tail.length else base.entry_id if base else None
        for tail in (tail_a, tail_b)
    )
    out = _compare_parts(session, (a, b), base, (tail_a, tail_b), ends, lives)
    if tail_a.broken or tail_b.broken:
        return None  # a member or a figure row missing: the stored rows do not settle it
    costs = _chain_costs(session, (a, b), cursor, (ca, cb, cc), k)
    if costs is None:  # entry rows stored without route figures: their costs added up
        costs = _chain_costs_by_rows(
            session, (a, b), cursor, (ca, cb, cc), k, (tail_a.spent(), tail_b.spent())
        )
    out.update(costs)
    return out


def _chain_costs(
    session: Session,
    pair: tuple[str, str],
    cursor: str | None,
    chains: tuple[Any, Any, Any],
    k: int,
) -> dict[str, Any] | None:
    """:func:`_compare_costs` from the chains of A, B and the cursor's route (None: no
    cursor), or None where a figure row needed is missing or not exact. What each route
    holds off the cursor's route lies after the depth where their chains part: A's entries
    after it, and B's after it or the common ancestor, whichever is deeper (B's before the
    ancestor are A's). Each is an exact route cost less another, from the route figures
    (``RouteFigures.cost_partials``) of a few entries, so both figures are exactly rounded
    sums, as the walk's ``fsum`` of the entries' costs."""
    from explorer.route_parts import ancestor_depth, figure_rows
    from explorer.session import exactsum, jsonfmt

    ca, cb, cc = chains
    part_a = ancestor_depth(ca, cc) if cc is not None else -1  # on the cursor's route up to
    part_b = ancestor_depth(cb, cc) if cc is not None else -1
    wanted = [(ca, ca.end), (cb, cb.end), (ca, part_a), (cb, max(part_b, k))]
    if cc is not None:
        wanted.append((cc, cc.end))
    partials: list[tuple[float, ...] | None] = []
    for route, depth in wanted:
        if depth < 0:
            partials.append(())
            continue
        row = figure_rows(route, [depth], "f.cost_partials").get(depth)
        if row is None or row[0] is None:
            return None
        partials.append(route_store.partials_of(row[0]))
    if any(p is None for p in partials):
        return None
    end_a, end_b, at_a, at_b, *on = (p or () for p in partials)
    a, b = pair
    return {
        "cursor": cursor,
        # An id as asked for, on the route when it is a stored id there (as the walk tests).
        "a_abandoned": part_a != ca.end or jsonfmt.visible(a) != a,
        "b_abandoned": part_b != cb.end or jsonfmt.visible(b) != b,
        "wasted": exactsum.rounded([*end_a, *end_b], [*at_a, *at_b]),
        "abandoned_total": abandoned_cost(session, cursor, route_costs=on[0] if on else []),
    }


def _chain_costs_by_rows(
    session: Session,
    pair: tuple[str, str],
    cursor: str | None,
    chains: tuple[Any, Any, Any],
    k: int,
    tails: tuple[Sequence[tuple[int, float]], Sequence[tuple[int, float]]],
) -> dict[str, Any]:
    """:func:`_chain_costs` from the entries' stored costs, for entry rows without route
    figures: the shared prefix's part off the cursor's route and the cursor's route read
    as costs. ``tails``: each route's entries after the ancestor with a cost (depth, cost,
    in route order)."""
    from explorer.route_parts import ancestor_depth, rows_between
    from explorer.session import exactsum, jsonfmt

    ca, cb, cc = chains
    part_a = ancestor_depth(ca, cc) if cc is not None else -1
    part_b = ancestor_depth(cb, cc) if cc is not None else -1
    off: list[float] = []
    if part_a < k:  # the shared prefix's entries off the cursor's route (B's are the same)
        off.extend(c for _d, c in rows_between(ca, part_a + 1, k, "e.cost", where="e.cost <> 0"))
    for tail, part in zip(tails, (part_a, part_b), strict=True):
        off.extend(c for d, c in tail if d > part)
    on_cursor: list[float] = []
    if cc is not None:
        tail, part = (tails[0], part_a) if part_a >= part_b else (tails[1], part_b)
        on_cursor.extend(c for d, c in tail if d <= part and c)
        for low, high, route in ((0, min(part, k), ca), (part + 1, cc.end, cc)):
            if low <= high:
                found = rows_between(route, low, high, "e.cost", where="e.cost <> 0")
                on_cursor.extend(c for _d, c in found)
    a, b = pair
    return {
        "cursor": cursor,
        "a_abandoned": part_a != ca.end or jsonfmt.visible(a) != a,
        "b_abandoned": part_b != cb.end or jsonfmt.visible(b) != b,
        "wasted": exactsum.total(off),
        "abandoned_total": abandoned_cost(session, cursor, route_costs=on_cursor),
    }


def _compare_parts(
    session: Session,
    pair: tuple[str, str],
    base: Any,
    tails: tuple[Any, Any],
    ends: tuple[str | None, ...],
    lives: tuple[Sequence[Any], Sequence[Any]],
) -> dict[str, Any]:
    """Every figure but the costs, from each route's part after the common ancestor
    ``base`` (``tails``: ``compare_tails.WholeTail`` or ``SparseTail``), the entries its
    route ends at (``ends``), its live range (``lives``, as ``context_light`` gives it);
    the ancestor is a ``chain_context.TailRow`` (with its stored cost and route tool
    calls)."""
    from dataclasses import asdict

    from explorer.analysis.compare import checked_diff_rows, collapse_shared, listed_lines

    a, b = pair
    ancestor = base.entry_id if base is not None else None
    tail_a, tail_b = tails
    live_a, live_b = lives
    shown_a, shown_b = tail_a.last(ROUTE_SHOWN), tail_b.last(ROUTE_SHOWN)
    # Every line the page needs parsed, in one read: the listed ones, both contexts and
    # the replies after the ancestor that called tools and hold a secret (the files the
    # others name are stored with them). A multi-MB line of the contexts that no row lists
    # is stood in for by its stored estimate (``queries.omitted``), and read after all only
    # where its content decides. The texts of a big line listed, or stood in for, are
    # stored with it (``line_text_store``): a listed row reads them, not the line.
    titled = {*(e.entry_id for e in (*shown_a, *shown_b)), *([ancestor] if ancestor else [])}
    known = _stored_texts(session, titled)
    holding = entries_with_secrets(session)
    parsed = {*(titled - known.keys()), *tail_a.to_parse(holding), *tail_b.to_parse(holding)}
    omitted = omitted_entries(session, [*live_a, *live_b], parsed)
    known.update(_stored_texts(session, [eid for eid in omitted if eid not in known]))
    data = load_entries(
        session,
        [*parsed, *(e.entry_id for e in (*live_a, *live_b) if e.entry_id not in omitted)],
    )
    data.update(omitted)
    figures = route_store.figures_of(
        session, [*(e for e in ends if e), *([ancestor] if ancestor else [])]
    )
    stats_a = _part_stats(session.pk, base, tail_a, data, figures, holding)
    stats_b = _part_stats(session.pk, base, tail_b, data, figures, holding)
    for attempt in range(4):  # the third reads every stand-in left; the fourth aligns
        projected_a, estimate_a = _context_of(ends[0], live_a, data, figures)
        projected_b, estimate_b = _context_of(ends[1], live_b, data, figures)
        diff, undecided = checked_diff_rows(projected_a, projected_b)
        lines = collapse_shared(diff)
        listed = listed_lines(lines, DIFF_SHOWN)
        stood = {eid for eid in omitted if data.get(eid) is omitted[eid]}
        if not stood:
            break
        if estimate_a is None or estimate_b is None or attempt >= 2:
            reread = stood  # the engine estimates a path holding one: every line read
        else:
            reread = _undecided_lines(diff, listed, stood, undecided, known)
        if not reread:
            listed = [_with_preview(line, stood, known) for line in listed]
            break
        # Read where their content decides (or their texts are not stored).
        loaded = load_entries(session, list(reread))
        data.update(loaded)
        known.update({eid: compare_texts(e) for eid, e in loaded.items()})
    return {
        "a": a,
        "b": b,
        "same": a == b,
        "ancestor": ancestor,
        "ancestor_title": (
            known[ancestor][2] if ancestor in known else entry_title(data.get(ancestor, {}), 100)
        )
        if ancestor
        else "",  # fmt: skip
        "route_a": _route_rows(shown_a, data, known),
        "route_b": _route_rows(shown_b, data, known),
        "len_a": tail_a.length,
        "len_b": tail_b.length,
        "stats_a": asdict(stats_a),
        "stats_b": asdict(stats_b),
        # Raw vs projected's figure: the engine's estimate, stored with each entry.
        "projected_a": estimate_a,
        "projected_b": estimate_b,
        "diff": listed,
        "diff_hidden": max(0, len(lines) - DIFF_SHOWN),  # lines not listed
        "diff_counts": {
            **{s: sum(1 for d in diff if d.side == s) for s in ("both", "a", "b")},
            # of the shared ones, those equal in content from different entries
            "content": sum(1 for d in diff if d.source_b),
        },
    }


def _stored_rows(session: Session, positions: set[int]) -> dict[int, tuple[float, int]]:
    """Position → (the entry's stored cost, its route's tool calls) of the entries at
    ``positions``: index columns and route figures only, no line read. Raw SQL: a Django
    filter of 500 positions costs more to build than SQLite takes to answer it."""
    entries, figures = Entry._meta.db_table, RouteFigure._meta.db_table
    rows = rows_for_keys(
        f"SELECT e.position, e.cost, f.tool_calls FROM {entries} e "  # noqa: S608
        f"LEFT JOIN {figures} f ON f.entry_id = e.id "
        "WHERE e.session_id = %s AND e.position IN ({keys})",
        sorted(positions),
        before=[session.pk],
    )
    return {position: (cost or 0.0, calls) for position, cost, calls in rows}


def _with_stored(
    route: Sequence[LightEntry], k: int, stored: dict[int, tuple[float, int]]
) -> list[TailRow]:
    """``route``'s entries from index ``k`` (the ancestor; -1: from the root) as
    ``TailRow``, with the costs and tool calls of ``stored`` (:func:`_stored_rows`)."""
    return [
        TailRow(
            d, e.entry_id, e.parent_id, e.type, e.position, *stored.get(e.position, (0.0, 0)), e.pk
        )
        for d, e in enumerate(route[max(k, 0) :], max(k, 0))
    ]


def stats_after_ancestor(
    session: Session,
    route: Sequence[LightEntry],
    k: int,
    stored: dict[int, tuple[float, int]] | None = None,
    parsed: dict[str, dict] | None = None,
    figures: dict[str, Any] | None = None,
    holding: Any = None,
) -> Any:
    """``analysis.compare.RouteStats`` of ``route``'s entries after index ``k`` (-1: all),
    the route read whole (:func:`_part_stats` of a ``compare_tails.WholeTail``).
    ``stored``: what :func:`_stored_rows` gives for the route, ``figures`` the route
    figures of its last entry and the ancestor, ``holding`` the entries with a secret
    (``entries_with_secrets``) and ``parsed`` the lines of those of the calling replies,
    when the caller read them already."""
    if stored is None:
        stored = _stored_rows(session, {e.position for e in route[max(k, 0) :]})
    rows = _with_stored(route, k, stored)
    base = rows[0] if k >= 0 else None
    tail = WholeTail(rows[1:] if k >= 0 else rows, base)
    if holding is None:
        holding = entries_with_secrets(session)
    if parsed is None:
        parsed = load_entries(session, tail.to_parse(holding))
    return _part_stats(session.pk, base, tail, parsed, figures, holding)


def _part_stats(
    session_pk: int,
    base_entry: Any,
    tail: Any,
    parsed: dict[str, dict],
    figures: dict[str, Any] | None,
    holding: Any,
) -> Any:
    """``analysis.compare.RouteStats`` of a route's part after ``base_entry`` (``tail``:
    ``compare_tails.WholeTail`` or ``SparseTail``).

    Counts and integer sums are the leaf's stored prefix sums minus the ancestor's, and so
    is the cost, kept as an exact sum (``RouteFigures.cost_partials``) and rounded once: the
    engine's correctly rounded sum of the part's costs (``WholeTail`` adds them up). The files read
    and modified are the uses stored with the replies that called tools, in route order;
    only those holding a secret (``holding``) are parsed, masked (in ``parsed``)."""
    from explorer.analysis.compare import RouteStats
    from explorer.session.describe import files_of_uses

    if not tail.length:
        return RouteStats(0, 0, 0.0, 0.0, 0, [], [])
    last = tail.last(1)[-1].entry_id
    if figures is None:
        ends = [last, *([base_entry.entry_id] if base_entry is not None else [])]
        figures = route_store.figures_of(Session(pk=session_pk), ends)
    leaf = figures.get(last)
    base = figures.get(base_entry.entry_id) if base_entry is not None else None
    files = files_of_uses(tail.file_uses(session_pk, holding, parsed))
    return RouteStats(
        entries=tail.length,
        messages=tail.messages(leaf, base),
        tokens=(leaf.tokens - (base.tokens if base is not None else 0.0)) if leaf else 0.0,
        cost=tail.cost(leaf, base),
        tool_calls=(leaf.tool_calls - (base.tool_calls if base is not None else 0)) if leaf else 0,
        files_read=files["read"],
        files_modified=files["modified"],
    )


def _context_of(
    end: str | None,
    live: Sequence[Any],
    data: dict[str, dict],
    figures: dict[str, Any],
) -> tuple[list[Any], int | None]:
    """The messages the model sees at the route's end ``end`` (``analysis.compare``'s
    projected rows, for the difference) from its live range ``live`` parsed in ``data``,
    and the engine's estimate of them (``figures``: the route figures by entry id): the one
    stored with the entry, except where a compaction carries the context its agent recorded
    (a Codex session: ``analysis.recorded``), which the stored figure does not follow. The
    estimate is None where the engine must estimate a path holding a stood-in message
    (``queries.omitted``): the caller reads the real lines."""
    from explorer.analysis.compare import projected_rows
    from explorer.analysis.projection import projected_estimate
    from explorer.analysis.recorded import projection_of, recorded_of
    from explorer.session.tokens import OmittedMessage

    path = [data[e.entry_id] for e in live if e.entry_id in data]
    projection = projection_of(path)
    rows = projected_rows(path, projection)
    stored = figures.get(end) if end else None
    recorded = bool(projection.entries) and recorded_of(projection.entries[0].source_entry)
    value = stored.context_tokens if stored is not None else math.nan
    if recorded or value != value:
        if any(isinstance(e.get("message"), OmittedMessage) for e in path):
            return rows, None
        return rows, projected_estimate(path, projection)
    return rows, int(value)


def _compare_costs(
    session: Session,
    a: str,
    b: str,
    cursor: str | None,
    route_a: Sequence[LightEntry],
    route_b: Sequence[LightEntry],
    stored: dict[int, tuple[float, int]],
) -> dict[str, Any]:
    known = next((r for r in (route_a, route_b) if cursor and r and r[-1].entry_id == cursor), None)  # fmt: skip
    on_cursor = known if known is not None else light_path(session, cursor)
    keep = {e.entry_id for e in on_cursor}
    off = {e.position for e in (*route_a, *route_b) if e.entry_id not in keep}
    return {
        "cursor": cursor,
        "a_abandoned": a not in keep,
        "b_abandoned": b not in keep,
        # Exactly rounded: the same figure whatever order the set gives.
        "wasted": math.fsum([stored.get(p, (0.0, 0))[0] for p in off]),
        # The route's costs read already (``stored``) are not read again.
        "abandoned_total": abandoned_cost(
            session, cursor, on_cursor, {p: cost for p, (cost, _calls) in stored.items()}
        ),
    }
