"""The whole-session tree skeleton (index columns only) and the tree shape built from it,
shared by the tree, the integrity checks and the stored figures.
"""

from __future__ import annotations

from explorer.models import Entry, Session
from explorer.queries.keep import grown
from explorer.session.gcpause import gc_paused
from explorer.session.graph import NodeTable, TreeShape
from explorer.session.packed import PackedTree


def _skeleton_rows(session: Session, after: int, upto: int) -> list[tuple]:
    """The rows are kept (:func:`_skeleton`): the collector is paused while 50,000 of them
    are made, or its passes over the growing heap cost as much as reading them. The few
    distinct types and roles are shared strings: the driver makes a new one per row, a
    quarter of a kept skeleton's size."""
    words: dict[str, str] = {}
    with gc_paused():
        return [
            (eid, parent, words.setdefault(kind, kind), words.setdefault(role, role))
            for eid, parent, kind, role in Entry.objects.filter(
                session=session, position__gt=after, position__lte=upto
            )
            .order_by("position")
            .values_list("entry_id", "parent_id", "type", "role")
            .iterator(chunk_size=5000)
        ]


def _skeleton(session: Session) -> list[tuple]:
    """(id, parent, type, role) of every entry in file order, for the graph.

    Read once per session and process from the covering index (migration 0013), and an
    append reads only the new rows (:func:`grown`). Each process keeps its own copy: on a
    50,000-entry session pickling the rows into the shared cache cost a first request
    twice what reading them from the index costs a second worker."""
    return grown(
        session,
        "skeleton",
        lambda last: _skeleton_rows(session, -1, last),
        lambda rows, after, last: rows + _skeleton_rows(session, after, last),
        shared=False,
        stored=True,
    )


def _graph_nodes(session: Session) -> NodeTable:
    """Entry id → its :class:`GraphNode` without label or marks (the last row of a repeated
    id winning, as in ``fold_tree``), made on demand from the skeleton rows
    (:class:`NodeTable`).

    A packed tree shape (:func:`_tree_shape`) holds the rows already, so the table reads
    them there; otherwise the table is kept and extended by the appended rows
    (:func:`grown`). An extension makes a new table: other requests of this process may be
    reading the kept one."""
    shape = _tree_shape(session)
    if isinstance(shape, PackedTree):
        return NodeTable(shape.rows)
    return grown(
        session,
        "graph-nodes",
        lambda last: NodeTable.of(_skeleton(session)),
        lambda nodes, after, last: nodes.extended(_skeleton_rows(session, after, last)),
        shared=False,
    )


# Appended entries a kept tree shape is extended by at most: each walks up to its root to
# count itself in every ancestor's size, so on a 5,000-deep route a few hundred of them
# (a stored shape that fell behind, a follower's batch) cost more than building the shape
# again, which is about one walk over every entry.
SHAPE_EXTEND_AT_MOST = 64


def _tree_shape(session: Session) -> TreeShape | PackedTree:
    """The session's tree shape, extended by the appended rows (:func:`grown`): packed
    (:class:`~explorer.session.packed.PackedTree`, which a cold worker loads from its stored
    copy in a few milliseconds) unless an id repeats, else a :class:`TreeShape`."""

    def build(last: int) -> TreeShape | PackedTree:
        rows = _skeleton(session)
        with gc_paused():
            return PackedTree.pack(rows) or TreeShape.build(rows)

    def extend(shape: TreeShape | PackedTree, after: int, last: int) -> TreeShape | PackedTree:
        rows = _skeleton_rows(session, after, last)
        if len(rows) > SHAPE_EXTEND_AT_MOST:
            return build(last)
        if isinstance(shape, PackedTree):
            return shape.extended(rows) or build(last)
        new = [(r[0], r[1]) for r in rows]
        # Extended on a copy: other requests of this process may be folding the kept one.
        # The children lists a new record joins are copied; the rest are shared unchanged.
        children = dict(shape.children)
        for _nid, p in new:
            if p in children:
                children[p] = list(children[p])
        copy = TreeShape(
            children, list(shape.roots), dict(shape.sizes), dict(shape.parent), set(shape.missing)
        )
        if copy.extend(new):
            return copy
        return build(last)

    return grown(
        session,
        "tree-shape",
        build,
        extend,
        shared=False,
        stored=True,
        store_lag=SHAPE_EXTEND_AT_MOST,  # further behind, a cold worker would build it again
    )
