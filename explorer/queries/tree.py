"""The Tree tab: the folded tree (text and graph), the flags of the current route, the
chains folded between branch points, and the nodes of the JSON tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from explorer.line_text_store import row_facts_of
from explorer.models import Entry, Session
from explorer.queries.entries import load_entries
from explorer.queries.keep import cached
from explorer.queries.labels import current_labels
from explorer.queries.routes import _LIGHT_COLS, LightEntry, default_leaf_id, light_path
from explorer.queries.skeleton import _skeleton
from explorer.queries.tree_segments import segment_tree
from explorer.segment_store import q_offset, route_chain
from explorer.session import jsonfmt
from explorer.session.graph import FoldedGraph, GraphNode, fold_tree
from explorer.session.segfold import fold_segments


def hidden_targets(
    session: Session, active_ids: set[str], light: Sequence[LightEntry]
) -> dict[str, str]:
    """Targets of context edits on the active path → "hidden" / "replaced" (latest wins)."""
    edits = [e.entry_id for e in light if e.type == "context_edit"]
    if not edits:
        return {}
    data = load_entries(session, edits)
    out: dict[str, str] = {}
    for eid in edits:
        d = data.get(eid, {})
        t = d.get("targetId")
        if isinstance(t, str):
            out[t] = "hidden" if d.get("replacement") is None else "replaced"
    return out


# Items of the folded graph the Tree tab draws (graph and text tree). A small session
# folds to well under this; a big one is cut to about it, so the page weighs about the same
# whatever the session's size (the rest is one "subtree" or chain node away: expand, root=).
TREE_BUDGET = 80


@dataclass
class TreeModel:
    graph: FoldedGraph
    titles: dict[str, str]
    path_ids: list[str]
    cursor: str | None
    flags: dict[str, str] = field(default_factory=dict)  # entry id -> "hidden" / "replaced"


def folded_tree(
    session: Session,
    *,
    cursor: str | None,
    root: str | None = None,
    expanded: Sequence[str] = (),
    selected: str | None = None,
    max_nodes: int = TREE_BUDGET,
    hide: frozenset[str] = frozenset(),
    archived: frozenset[str] = frozenset(),
) -> TreeModel:
    """The folded graph of the Tree tab at ``cursor``, read afresh: the segment rows and
    the entry index rows of the segments the fold walks (``explorer.session.segfold``),
    then the drawn entries' titles (a multi-MB line's stored, the others' parsed). Nothing
    is kept.

    ``max_nodes`` bounds the drawn items (the page's weight), not what can be reached:
    chains unfold (``expanded``) and closed subtrees open on their own (``root``).
    ``hide``: entries left out (archived branches, :mod:`explorer.archives`); ``archived``:
    first entries of archived branches drawn marked (when the reader shows them)."""
    light = light_path(session, cursor)
    path_ids = [e.entry_id for e in light]
    labels = current_labels(session)
    flags = path_flags(session, cursor, light)

    def marks_of(eid: str) -> frozenset[str]:
        found = {flags[eid]} if eid in flags else set()
        return frozenset(found | {"archived"}) if eid in archived else frozenset(found)

    fold_args: dict[str, Any] = {
        "active_path": path_ids,
        "cursor_id": cursor,
        "root_id": root,
        "expanded": expanded,
        "pinned": ([selected] if selected else []) + sorted(archived),
        "max_nodes": max_nodes,
    }
    if hide:
        # Archived branches left out: folded from the rows of the rest (the skeleton the
        # archives read to know what they hide; the segments describe every entry).
        nodes = [
            GraphNode(r[0], r[1], r[2], r[3] or None, labels.get(r[0]), flags=marks_of(r[0]))
            for r in _skeleton(session)
            if r[0] not in hide
        ]
        graph = fold_tree(nodes, **fold_args)
    else:
        graph = fold_segments(segment_tree(session, labels, marks_of), **fold_args)
    ids = [i.entry_id for i in graph.items if i.kind == "entry"]
    ids += [i.entry_id for i in graph.items if i.kind == "chain"]
    facts = row_facts_of(session, ids)
    titles = {eid: f[2] for eid, f in facts.items() if f[2]}
    for item in graph.items:
        if item.kind == "entry" and item.node is not None:
            # Roles are read here, for the drawn entries only (the index's role column is
            # the engine's for messages only); a multi-MB line's from its stored texts.
            role = facts.get(item.node.id, (None, "", ""))[0]
            item.node = GraphNode(
                item.node.id, item.node.parent_id, item.node.type, role or None,
                item.node.label, titles.get(item.node.id, ""), item.node.flags,
            )  # fmt: skip
    return TreeModel(graph, titles, path_ids, cursor, flags)


def path_flags(
    session: Session, cursor: str | None, light: Sequence[LightEntry] | None = None
) -> dict[str, str]:
    """Hidden/replaced marks of the cursor's route (cached per session version); ``light``:
    the route when the caller already has it."""
    return cached(
        session,
        f"pathflags:{cursor or ''}",
        lambda: hidden_targets(
            session, set(), light if light is not None else light_path(session, cursor)
        ),
    )


def chain_entries(
    session: Session, first_id: str, limit: int = 200, stop: str | None = None
) -> list[LightEntry]:
    """The entries of a folded chain, following single children from `first_id` (up to and
    including `stop`, when given)."""
    table = Entry._meta.db_table
    sql = f"""
        WITH RECURSIVE down(entry_id, parent_id, type, role, position, size, child_count,
                            target_id, id, n) AS (
            SELECT {_LIGHT_COLS}, 0 FROM {table} WHERE session_id = %s AND entry_id = %s
            UNION ALL
            SELECT e.entry_id, e.parent_id, e.type, e.role, e.position, e.size, e.child_count,
                   e.target_id, e.id, down.n + 1
            FROM {table} e JOIN down ON e.session_id = %s AND e.parent_id = down.entry_id
            WHERE down.child_count = 1 AND down.n < %s AND down.entry_id <> %s
        )
        SELECT {_LIGHT_COLS} FROM down ORDER BY n
    """
    with connection.cursor() as cur:
        cur.execute(
            sql,
            [
                session.pk,
                jsonfmt.visible(first_id),
                session.pk,
                limit - 1,
                jsonfmt.visible(stop or ""),
            ],
        )
        return [LightEntry(*r) for r in cur.fetchall()]


def path_before(session: Session, entry_id: str, stop: str, limit: int) -> list[LightEntry]:
    """Up to `limit` ancestors of `entry_id`, in root→entry order, going no higher than `stop`.

    One page of a long route read upwards: cost follows `limit`, not the route's length."""
    table = Entry._meta.db_table
    sql = f"""
        WITH RECURSIVE up(entry_id, parent_id, type, role, position, size, child_count,
                          target_id, id, n) AS (
            SELECT {_LIGHT_COLS}, 0 FROM {table} WHERE session_id = %s AND entry_id = %s
            UNION ALL
            SELECT e.entry_id, e.parent_id, e.type, e.role, e.position, e.size, e.child_count,
                   e.target_id, e.id, up.n + 1
            FROM {table} e JOIN up ON e.session_id = %s AND e.entry_id = up.parent_id
            WHERE up.n < %s AND (up.n = 0 OR up.entry_id <> %s) AND up.parent_id <> up.entry_id
        )
        SELECT {_LIGHT_COLS} FROM up WHERE n > 0 ORDER BY n DESC
    """
    with connection.cursor() as cur:
        cur.execute(
            sql, [session.pk, jsonfmt.visible(entry_id), session.pk, limit, jsonfmt.visible(stop)]
        )
        rows = [LightEntry(*r) for r in cur.fetchall()]
    seen: set[str] = set()
    out: list[LightEntry] = []
    for e in reversed(rows):  # a cycle would repeat ids: keep the walk up to it
        if e.entry_id in seen:
            break
        seen.add(e.entry_id)
        out.append(e)
    out.reverse()
    return out


def path_after(
    session: Session, entry_id: str, stop: str, limit: int, cursor: str | None
) -> list[LightEntry]:
    """Up to `limit` entries of the cursor's route after `entry_id`, down to `stop` inclusive.

    Single children are followed in one query; at a branch point inside a folded stretch the
    child on the cursor's route is chosen (reading the route only in that rare case)."""
    out: list[LightEntry] = []
    route: set[str] | None = None
    current = entry_id
    seen = {entry_id}
    while len(out) < limit:
        walk = chain_entries(session, current, limit=limit - len(out) + 1, stop=stop)
        fresh = [e for e in walk[1:] if e.entry_id not in seen]
        seen.update(e.entry_id for e in fresh)
        out.extend(fresh)
        tail = walk[-1] if walk else None
        if tail is None or tail.entry_id == stop or len(out) >= limit or tail.child_count <= 1:
            break
        if route is None:
            route = {e.entry_id for e in light_path(session, cursor)}
        nxt = next(
            (
                LightEntry(*r)
                for r in Entry.objects.filter(session=session, parent_id=tail.entry_id)
                .order_by("position")
                .values_list(*_LIGHT_COLS.split(", "))
                if r[0] in route and r[0] not in seen
            ),
            None,
        )
        if nxt is None:
            break
        seen.add(nxt.entry_id)
        out.append(nxt)
        current = nxt.entry_id
        if nxt.entry_id == stop:
            break
    return out[:limit]


# ---------------------------------------------------------------------------------------------
# The tree as data (the JSON API)


# Nodes per page of the Tree JSON: its size stays the same whatever the session's size (a
# 500-entry session's whole tree is one page), and a client reads the rest page by page
# (``next``, or ``limit`` up to the maximum), as the HTML tree unfolds on demand.
TREE_JSON_PAGE = 500
TREE_JSON_PAGE_MAX = 10_000


def tree_nodes(
    session: Session, cursor: str | None, *, after: int = 0, limit: int = TREE_JSON_PAGE
) -> dict[str, Any]:
    """One page of the tree as data: the entries after file position ``after`` (the header
    is position 0), ``limit`` at most, each with its parent, type, role, label and whether
    it is on the cursor's route; ``next_after`` is the position to ask for next, ``None``
    on the last page. Read from the entry index by position, so a page costs the same on
    a 500-entry session as on a 150,000-entry one."""
    limit = max(1, min(limit, TREE_JSON_PAGE_MAX))
    rows = _page_rows(session, max(after, 0), limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    labels = current_labels(session)
    chain = route_chain(session.pk, jsonfmt.visible(cursor)) if cursor else None
    if chain is not None:
        # The page's own places against the cursor's chain of segments: no route read.
        on_route = {r[0] for r in rows if r[5] is not None and chain.get(r[5], -1) >= r[6]}
    else:
        on_route = {e.entry_id for e in light_path(session, cursor)}
    return {
        "cursor": cursor,
        "default_leaf": default_leaf_id(session),
        "entry_count": session.entry_count,
        "after": max(after, 0),
        "next_after": rows[-1][4] if more else None,
        "nodes": [
            {
                "id": eid,
                "parent_id": parent,
                "type": kind,
                "role": role or None,
                "label": labels.get(eid),
                "on_route": eid in on_route,
                "position": position,
            }
            for eid, parent, kind, role, position, _seg, _offset in rows
        ],
    }


def _page_rows(session: Session, after: int, count: int) -> list[tuple[Any, ...]]:
    """(id, parent, type, role, position, segment, offset) of ``count`` entries after file
    position ``after``, by the entry index's (session, position) order."""
    from explorer.models import SegmentEntry

    entries = connection.ops.quote_name(Entry._meta.db_table)
    members = connection.ops.quote_name(SegmentEntry._meta.db_table)
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT e.entry_id, e.parent_id, e.type, e.role, e.position, m.segment_id, "
            f"m.{q_offset()} FROM {entries} e LEFT JOIN {members} m ON m.entry_id = e.id "
            f"WHERE e.session_id = %s AND e.position > %s ORDER BY e.position LIMIT %s",
            [session.pk, after, count],
        )
        return cur.fetchall()
