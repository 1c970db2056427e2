"""The Transcript tab's route map: where each entry of a route sits, extended as entries
arrive.
"""

from __future__ import annotations

from dataclasses import dataclass

from explorer.models import Session
from explorer.queries.entries import load_entries
from explorer.queries.keep import cached
from explorer.queries.routes import light_path

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


def _build_route_map(session: Session, leaf: str | None) -> RouteMap:
    from explorer.analysis.compactions import compaction_ranges
    from explorer.analysis.projection import entry_edit_effect

    light = light_path(session, leaf)
    special = load_entries(
        session, [e.entry_id for e in light if e.type in ("compaction", "context_edit")]
    )
    skeleton = [special.get(e.entry_id) or {"id": e.entry_id, "type": e.type} for e in light]
    edits: dict[str, tuple[str, str]] = {}
    for e in light:
        if e.type == "context_edit":
            d = special.get(e.entry_id, {})
            target = d.get("targetId")
            if isinstance(target, str):
                state = "hidden" if d.get("replacement") is None else "replaced"
                edits[target] = (state, e.entry_id)
    # A replacement the model does not see as one (an undo's original content, an edit of a
    # role it does not apply to) is no edit mark: Raw vs projected calls the row "same".
    replaced = [t for t, (state, _by) in edits.items() if state == "replaced"]
    targets = load_entries(session, replaced) if replaced else {}
    for target in replaced:
        entry = targets.get(target)
        if entry is None or entry.get("type") == "compaction":
            continue
        if entry_edit_effect(entry, special.get(edits[target][1], {})) in ("restored", "inert"):
            del edits[target]
    return RouteMap(
        leaf,
        tuple(e.entry_id for e in light),
        tuple(e.type for e in light),
        tuple(compaction_ranges(skeleton)),
        edits,
    )
