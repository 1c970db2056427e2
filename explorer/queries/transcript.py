"""The Transcript tab's route map: where each entry of a route sits, extended as entries
arrive; and the windows of a route its rows are drawn from, cut from the map or, for the
Live tab's tail, read without the whole route.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db import connection

from explorer.models import Session
from explorer.queries.entries import load_entries
from explorer.queries.keep import cached
from explorer.queries.routes import light_path

if TYPE_CHECKING:
    from explorer.route_parts import Chain

# ---------------------------------------------------------------------------------------------
# The transcript: a route read as a conversation, one window at a time


@dataclass(frozen=True, slots=True)
class RouteMap:
    """What a transcript needs to know about a whole route without loading its entries:
    the ids in order, their types, the compaction ranges and the context edits' marks.

    Cached per session version and leaf, so scrolling a 50,000-entry route reads only the
    window's raw lines; every page of the route slices the same map.
    """

    leaf: str | None
    ids: tuple[str, ...]
    types: tuple[str, ...]
    # (compaction index, replaced start, first kept index or None), as the Compactions tab.
    compactions: tuple[tuple[int, int, int | None], ...]
    # target id → ("hidden" | "replaced", id of the newest edit on the route naming it)
    edits: dict[str, tuple[str, str]]

    def index(self, entry_id: str | None) -> int | None:
        """The position of ``entry_id`` on the route, or None when it is not on it."""
        if not entry_id:
            return None
        try:
            return self.ids.index(entry_id)
        except ValueError:
            return None


def route_map(session: Session, leaf: str | None) -> RouteMap:
    """The route root → ``leaf`` as a :class:`RouteMap` (cached per session version)."""
    # "routemap-2": a restoring edit (an undo) is no longer an edit mark.
    return cached(session, f"routemap-2:{leaf or ''}", lambda: _build_route_map(session, leaf))


def extend_route_map(rmap: RouteMap, entry_id: str, entry_type: str) -> RouteMap | None:
    """The route of a new entry whose parent is ``rmap``'s leaf, without walking it again.

    A live broadcast meets every appended entry; rebuilding the map of a 50,000-entry route
    for each costs a recursive walk. A plain entry only lengthens the route (it cannot be a
    compaction's first kept entry, which lies before the compaction); a compaction or a
    context edit changes the ranges or marks, so None tells the caller to build the map.
    """
    if entry_type in ("compaction", "context_edit") or entry_id in rmap.ids:
        return None
    return RouteMap(
        entry_id, rmap.ids + (entry_id,), rmap.types + (entry_type,), rmap.compactions, rmap.edits
    )


@dataclass(frozen=True, slots=True)
class RouteWindow:
    """The entries [``start``, ``end``) of a route as a transcript window shows them, and
    what the rest of the route says about them: the entry above the window (its first
    entry's parent), the compaction marks and counts, the context edits in force.

    Made from a whole route's map (:func:`window_of_map`, the Transcript tab's pages) or
    read for the route's tail alone (:func:`tail_window`, the Live tab): one item builder
    (``items.window_items``) takes either, so both draw the same rows."""

    leaf: str | None
    length: int  # entries on the whole route
    start: int
    ids: tuple[str, ...]
    types: tuple[str, ...]
    above: str | None  # the route's entry before the window (None: it starts at the root)
    # Route index → ("replaced" | "kept", compaction id), as ``window_marks``.
    marks: dict[int, tuple[str, str]]
    # Route index of each compaction in the window → (entries it replaced, entries it kept).
    counts: dict[int, tuple[int, int]]
    # The window's entries an edit in force names (``RouteMap.edits`` of those ids).
    edits: dict[str, tuple[str, str]]

    @property
    def end(self) -> int:
        return self.start + len(self.ids)

    def parent(self, i: int) -> str | None:
        """The route's entry before route index ``i`` (``start`` <= i < ``end``)."""
        return self.ids[i - self.start - 1] if i > self.start else self.above


def window_marks(
    ranges: Iterable[tuple[tuple[int, int, int | None], str]],
    types: Sequence[str],
    start: int,
    end: int,
) -> dict[int, tuple[str, str]]:
    """Route index → ("replaced" | "kept", compaction id) for the window [start, end): the
    entries the Compactions tab and the compaction cards count (``replaced_indices``,
    ``kept_indices``), a newer compaction's mark over an older one's. ``ranges``: the
    route's compaction ranges with each compaction's id; only those of compactions at
    ``start`` or later can mark the window (a compaction replaces and keeps entries above
    it). ``types`` is read at the window's indices only."""
    from explorer.analysis.compactions import kept_indices, replaced_indices

    out: dict[int, tuple[str, str]] = {}
    for rng, comp_id in ranges:
        for i in replaced_indices(types, rng, start, end):
            out[i] = ("replaced", comp_id)
        for i in kept_indices(rng, start, end):
            out[i] = ("kept", comp_id)
    return out


def window_of_map(rmap: RouteMap, start: int, end: int) -> RouteWindow:
    """The window [start, end) of a whole route's map."""
    from explorer.analysis.compactions import kept_count, replaced_indices

    ids = rmap.ids[start:end]
    ranges = [(rng, rmap.ids[rng[0]]) for rng in rmap.compactions]
    return RouteWindow(
        leaf=rmap.leaf,
        length=len(rmap.ids),
        start=start,
        ids=ids,
        types=rmap.types[start:end],
        above=rmap.ids[start - 1] if start > 0 else None,
        marks=window_marks(ranges, rmap.types, start, end),
        counts={
            rng[0]: (len(replaced_indices(rmap.types, rng)), kept_count(rng))
            for rng in rmap.compactions
            if start <= rng[0] < end
        },
        edits={eid: rmap.edits[eid] for eid in ids if eid in rmap.edits},
    )


def _build_route_map(session: Session, leaf: str | None) -> RouteMap:
    from explorer.analysis.compactions import compaction_ranges

    light = light_path(session, leaf)
    special = load_entries(
        session, [e.entry_id for e in light if e.type in ("compaction", "context_edit")]
    )
    skeleton = [special.get(e.entry_id) or {"id": e.entry_id, "type": e.type} for e in light]
    edits = edit_marks(
        session,
        [(e.entry_id, special.get(e.entry_id, {})) for e in light if e.type == "context_edit"],
    )
    return RouteMap(
        leaf,
        tuple(e.entry_id for e in light),
        tuple(e.type for e in light),
        tuple(compaction_ranges(skeleton)),
        edits,
    )


def edit_marks(
    session: Session, route_edits: list[tuple[str, dict]], targets: Collection[str] | None = None
) -> dict[str, tuple[str, str]]:
    """Target id → ("hidden" | "replaced", id of the newest edit naming it) of a route's
    context edits (``route_edits``: (id, parsed line) in route order), for the targets in
    ``targets`` (None: every target). The whole route's map and a window's bounded read
    (:func:`tail_window`) both call it, so a window's edit marks are the map's."""
    from explorer.analysis.projection import entry_edit_effect

    edits: dict[str, tuple[str, str]] = {}
    lines = dict(route_edits)
    for edit_id, d in route_edits:
        target = d.get("targetId")
        if isinstance(target, str) and (targets is None or target in targets):
            state = "hidden" if d.get("replacement") is None else "replaced"
            edits[target] = (state, edit_id)
    # A replacement the model does not see as one (an undo's original content, an edit of a
    # role it does not apply to) is no edit mark: Raw vs projected calls the row "same".
    replaced = [t for t, (state, _by) in edits.items() if state == "replaced"]
    loaded = load_entries(session, replaced) if replaced else {}
    for target in replaced:
        entry = loaded.get(target)
        if entry is None or entry.get("type") == "compaction":
            continue
        if entry_edit_effect(entry, lines.get(edits[target][1], {})) in ("restored", "inert"):
            del edits[target]
    return edits


def tail_window(session: Session, leaf: str | None, page: int) -> RouteWindow:
    """The last ``page`` entries of the route root → ``leaf`` (:func:`window_of_map` of
    its map), read without the whole route: a placed leaf's chain of segments gives each
    depth, so the window is its ``page`` + 1 index rows; the route's compactions (of the
    session's, those on the chain) give the window's marks and counts, of which the
    compactions above the window only the last one's end is needed (where the next
    replaced range starts); the edits naming the window's entries (by their indexed target)
    give its edit marks. A leaf in no segment (a loop, or below one) reads its map.

    The Live tab draws this window on every page and after every append: the route's map
    is a read of every entry of the route and a parse of all its compactions and edits
    (14 ms on a 5,780-entry route), rebuilt for each new tip."""
    from explorer.analysis.compactions import extend_compaction_ranges, kept_count
    from explorer.route_parts import chain, rows_between
    from explorer.session import jsonfmt

    route = chain(session.pk, leaf) if leaf else None
    if route is None:
        return _tail_of_map(session, leaf, page)
    n = route.end + 1
    start = max(0, n - page)
    top = max(start - 1, 0)
    rows = rows_between(route, top, n - 1, "e.entry_id, e.type")
    if [r[0] for r in rows] != list(range(top, n)):
        return _tail_of_map(session, leaf, page)
    window = rows[1:] if start else rows
    ids = tuple(r[1] for r in window)
    types = tuple(r[2] for r in window)
    comps = _on_route(session, route, "entry_by_type", "e.type = %s", ["compaction"])
    # Those whose ranges reach the window (its own), and the one before them (where the
    # first one's replaced range starts).
    first = next((k for k, (d, _id) in enumerate(comps) if d >= start), len(comps))
    wanted = comps[max(first - 1, 0) :] if first < len(comps) else []
    lines = load_entries(session, [eid for _d, eid in wanted])
    kept_ids = [lines.get(eid, {}).get("firstKeptEntryId") for _d, eid in wanted]
    named = [k for k in kept_ids if isinstance(k, str)]
    if any(jsonfmt.visible(k) != k for k in named):
        return _tail_of_map(session, leaf, page)  # an id no stored one spells: the map's rule
    depths = (
        {eid: d for d, eid in _on_route(session, route, None, *_ids_in(named))} if named else {}
    )
    ranges = [
        rng
        for rng in extend_compaction_ranges(
            [(d, k) for (d, _eid), k in zip(wanted, kept_ids, strict=True)], depths, 0
        )[0]
        if rng[0] >= start
    ]
    at = dict(comps)
    comp_depths = [d for d, _eid in comps]
    counts: dict[int, tuple[int, int]] = {}
    for rng in ranges:
        ci, low, fk = rng
        stop = fk if fk is not None else ci
        inside = sum(1 for d in comp_depths if low <= d < stop)
        counts[ci] = (max(stop - low, 0) - inside, kept_count(rng))
    # The edits naming the window's entries (their target column holds the first 200
    # characters of the id), on the route, in route order.
    cut = sorted({eid[:200] for eid in ids})
    where, params = _ids_in(cut, column="e.target_id")
    edits_on = _on_route(
        session,
        route,
        "entry_by_target",
        f"e.type = %s AND NOT (e.target_id = '') AND {where}",
        ["context_edit", *params],
    )
    edit_lines = load_entries(session, [eid for _d, eid in edits_on])
    return RouteWindow(
        leaf=leaf,
        length=n,
        start=start,
        ids=ids,
        types=types,
        above=rows[0][1] if start else None,
        marks=window_marks([(rng, at[rng[0]]) for rng in ranges], _Shifted(types, start), start, n),
        counts=counts,
        edits=edit_marks(
            session, [(eid, edit_lines.get(eid, {})) for _d, eid in edits_on], set(ids)
        ),
    )


def _tail_of_map(session: Session, leaf: str | None, page: int) -> RouteWindow:
    rmap = route_map(session, leaf)
    n = len(rmap.ids)
    return window_of_map(rmap, max(0, n - page), n)


def _ids_in(ids: Sequence[str], column: str = "e.entry_id") -> tuple[str, list[str]]:
    return f"{column} IN ({', '.join(['%s'] * len(ids))})", list(ids)


def _on_route(
    session: Session, route: Chain, index: str | None, where: str, params: Sequence[Any]
) -> list[tuple[int, str]]:
    """(depth, id) of the session's entries meeting ``where`` (on the entry table, ``e``)
    that lie on ``route`` (a ``route_parts.Chain``), in route order: found by ``index`` of
    the entry table (by type, by target; None: by id, the unique key the planner picks),
    placed by their segment member row.

    The index is named on SQLite: without statistics its planner prefers the covering
    skeleton index and steps over every entry of the session (29 ms at 150,000 entries
    for the edits naming a window's entries, against well under 1 ms)."""
    from explorer.models import Entry, SegmentEntry
    from explorer.segment_store import q_offset

    entries = connection.ops.quote_name(Entry._meta.db_table)
    members = connection.ops.quote_name(SegmentEntry._meta.db_table)
    hint = f"INDEXED BY {index}" if index and connection.vendor == "sqlite" else ""
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT e.entry_id, m.segment_id, m.{q_offset()} FROM {entries} e {hint} "  # noqa: S608
            f"JOIN {members} m ON m.entry_id = e.id "
            f"WHERE e.session_id = %s AND ({where})",
            [session.pk, *params],
        )
        rows = cur.fetchall()
    out = []
    for eid, seg, offset in rows:
        depth = route.depth_of(seg, offset) if seg is not None else None
        if depth is not None:
            out.append((depth, eid))
    out.sort()
    return out


class _Shifted(Sequence[str]):
    """A window's values indexed by route index (``start`` is the first's)."""

    def __init__(self, values: Sequence[str], start: int) -> None:
        self.values, self.start = values, start

    def __len__(self) -> int:
        return self.start + len(self.values)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice) or i < self.start:
            raise IndexError(i)
        return self.values[i - self.start]
