"""The folded tree's linear chains (segments), kept with the entries.

A session's tree is stored as segments: runs of entries each the child of the one before,
so a route is a short list of (segment, up to offset) and the tree's shape is read from
O(branch points) rows instead of one per entry. Each entry gets its (segment, offset) once,
when it is stored, and never again: an entry joins its parent's segment when the parent is
that segment's tail and has no child yet (the one UPDATE an append makes is that segment's
length); otherwise it heads a new segment hanging at (parent's segment, parent's offset).
So a segment may hold branch points in its middle: the other children's segments name it.

The structure is the one ``explorer.session.graph`` folds (``TreeShape``): the first
record of a repeated id is the one attached (later ones get no segment), a parent named
anywhere in the file attaches, a parent never stored (or the entry itself) makes a root,
and entries whose parents loop (a cycle, and everything below it) reach no root, so they
get no segment. Children keep file order: the reader sorts a branch point's children by
their head's position.

Written by :class:`SegmentWriter`, which ``route_store.FigureWriter`` drives alongside the
figures (the import's batches, appends, a grown import) in the same transaction; migration
``0022_segments`` fills stored sessions with it. Raw SQL on table names it is given, so the
migration runs it on the historical tables. The one case that would move stored entries (an
append bringing the parent a stored root named and waited for) rebuilds the session's
segments from its entry rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection

from explorer.session.jsonfmt import visible
from explorer.session.segfold import size_within, subtree_total

__all__ = [
    "SegmentTree",
    "SegmentWriter",
    "chain_root_first",
    "on_route",
    "on_route_of",
    "route_chain",
    "route_rows",
    "rebuild_segments",
    "segment_children",
]


@dataclass(eq=False, slots=True)
class _Seg:
    head_position: int
    parent: _Seg | None
    parent_offset: int | None
    length: int
    missing_parent: str | None = None
    db_id: int | None = None
    dirty: bool = False  # stored, and its length grew
    grown_from: int = 0


@dataclass(slots=True)
class _Waiting:
    entry_id: str
    parent_id: str
    position: int


@dataclass
class SegmentWriter:
    """Segments of entries as they are stored, in file order (see the module's doc).

    :meth:`add` places an entry whose parent is placed already (in memory or in the
    tables); an entry whose parent is not (later in the file, never, or in a loop) waits for
    :meth:`finish`. :meth:`write` inserts the new segments, the grown lengths and the
    entries' rows; the entries themselves must be in the entry table by then."""

    session_pk: int
    entry_table: str = "explorer_entry"
    segment_table: str = "explorer_segment"
    member_table: str = "explorer_segmententry"
    where: dict[str, tuple[_Seg, int] | None] = field(default_factory=dict)
    waiting: list[_Waiting] = field(default_factory=list)
    waiting_ids: set[str] = field(default_factory=set)
    new_segments: list[_Seg] = field(default_factory=list)
    queued: list[tuple[int, _Seg | None, int | None]] = field(default_factory=list)
    missing: set[str] | None = None
    rebuild: bool = False
    # The last position stored before this writer's first entry (None: nothing was): ids
    # are looked up in the tables only when something was.
    base: int | None = None
    started: bool = False
    by_db_id: dict[int, _Seg] = field(default_factory=dict)
    # The entries added are known to be new to the session (``extend_segments``): no
    # lookup of each id among the stored ones.
    fresh: bool = False

    def __post_init__(self) -> None:
        q = connection.ops.quote_name
        self.entries = q(self.entry_table)
        self.segments = q(self.segment_table)
        self.members = q(self.member_table)

    # -- writing -------------------------------------------------------------------------

    def add(self, entry_id: str, parent_id: str | None, position: int) -> None:
        """Place the entry stored (or queued) at ``position``."""
        if not self.started:
            self.started = True
            self.base = self._stored_before(position)
            if self.missing is None:
                self.missing = self._missing_parents() if self.base is not None else set()
        if self.missing and entry_id in self.missing:
            self.rebuild = True  # a stored root waited for this one: rebuilt at finish
        if self._known(entry_id, position):
            self.queued.append((position, None, None))  # a repeated id: the first one counts
            return
        if not parent_id or parent_id == entry_id:
            self._place(entry_id, position, None, None)
            return
        spot = self._lookup(parent_id)
        if spot is None:
            self.waiting.append(_Waiting(entry_id, parent_id, position))
            self.waiting_ids.add(entry_id)
            self.where[entry_id] = None
            return
        self._place(entry_id, position, *spot)

    def _place(
        self, entry_id: str, position: int, seg: _Seg | None, offset: int | None
    ) -> tuple[_Seg, int]:
        # A child segment hangs only at an offset that was not the tail (the tail's first
        # child extends the segment), so "the parent is the tail" means "it has no child".
        if seg is not None and offset == seg.length - 1:
            seg.length += 1
            if seg.db_id is not None:
                seg.dirty = True
            spot = (seg, seg.length - 1)
        else:
            new = _Seg(position, seg, offset, 1)
            self.new_segments.append(new)
            spot = (new, 0)
        self.where[entry_id] = spot
        self.queued.append((position, spot[0], spot[1]))
        return spot

    def write(self) -> None:
        """Insert the new segments, the grown lengths and the queued entries' rows."""
        if not self.queued and not self.new_segments:
            return
        positions = [row[0] for row in self.queued] + [s.head_position for s in self.new_segments]
        sql = (
            f"SELECT position, id FROM {self.entries} "
            f"WHERE session_id = %s AND position >= %s AND position <= %s"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [self.session_pk, min(positions), max(positions)])
            pk_at = dict(cur.fetchall())
            for seg in self.new_segments:
                parent = seg.parent.db_id if seg.parent is not None else None
                cur.execute(
                    f"INSERT INTO {self.segments} (session_id, head_id, head_position, "
                    f"parent_segment_id, parent_offset, length, missing_parent) "
                    f"VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING id",
                    [self.session_pk, pk_at[seg.head_position], seg.head_position, parent,
                     seg.parent_offset, seg.length, seg.missing_parent],
                )  # fmt: skip
                seg.db_id = cur.fetchone()[0]
                self.by_db_id[seg.db_id] = seg
                seg.dirty = False
            self.new_segments = []
            for seg in {s for _p, s, _o in self.queued if s is not None and s.dirty}:
                cur.execute(
                    f"UPDATE {self.segments} SET length = %s WHERE id = %s", [seg.length, seg.db_id]
                )
                seg.dirty = False
            rows = [
                (pk_at[p], self.session_pk, s.db_id if s is not None else None, o)
                for p, s, o in self.queued
            ]
        # On the driver's cursor, as the figures' rows: Django's wrapper formats and checks
        # each row, most of what this insert would cost an import.
        mark = "?" if connection.vendor == "sqlite" else "%s"
        insert = (
            f"INSERT INTO {self.members} (entry_id, session_id, segment_id, {q_offset()}) "
            f"VALUES ({mark}, {mark}, {mark}, {mark})"
        )
        connection.ensure_connection()
        raw = connection.connection.cursor()
        try:
            raw.executemany(insert, rows)
        finally:
            raw.close()
        self.queued = []

    def finish(self) -> None:
        """Place the entries that waited: under a parent found later, as roots when the
        parent never came (remembered, so that its arrival rebuilds), and nowhere when the
        parents loop. Then write (or rebuild the session, see :meth:`add`)."""
        waiting = self.waiting
        self.waiting = []
        while waiting:
            later: list[_Waiting] = []
            progressed = False
            for w in waiting:
                spot = self._lookup(w.parent_id)
                if spot is not None:
                    self._place(w.entry_id, w.position, *spot)
                elif w.parent_id in self.waiting_ids or self._stored(w.parent_id):
                    later.append(w)
                    continue
                else:
                    seg, _ = self._place(w.entry_id, w.position, None, None)
                    seg.missing_parent = w.parent_id
                progressed = True
                self.waiting_ids.discard(w.entry_id)
            if not progressed:
                for w in later:  # a loop of parents, and what hangs below it
                    self.queued.append((w.position, None, None))
                break
            waiting = sorted(later, key=lambda w: w.position)
        self.waiting_ids = set()
        if self.rebuild:
            self.queued = []
            self.new_segments = []
            rebuild_segments(
                self.session_pk,
                entry_table=self.entry_table,
                segment_table=self.segment_table,
                member_table=self.member_table,
            )
            return
        self.write()

    # -- reading back --------------------------------------------------------------------

    def _known(self, entry_id: str, position: int) -> bool:
        if entry_id in self.where:
            return True
        if self.base is None or self.fresh:
            return False
        sql = (
            f"SELECT 1 FROM {self.entries} WHERE session_id = %s AND entry_id = %s "
            f"AND position < %s"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [self.session_pk, visible(entry_id), position])
            return cur.fetchone() is not None

    def _stored(self, entry_id: str) -> bool:
        if self.base is None:
            return False  # every entry of this session went through this writer
        sql = f"SELECT 1 FROM {self.entries} WHERE session_id = %s AND entry_id = %s"
        with connection.cursor() as cur:
            cur.execute(sql, [self.session_pk, visible(entry_id)])
            return cur.fetchone() is not None

    def _lookup(self, entry_id: str) -> tuple[_Seg, int] | None:
        if entry_id in self.where:
            return self.where[entry_id]
        if self.base is None:
            return None
        sql = (
            f"SELECT m.segment_id, m.{q_offset()} FROM {self.members} m "
            f"JOIN {self.entries} e ON e.id = m.entry_id "
            f"WHERE e.session_id = %s AND e.entry_id = %s ORDER BY e.position"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [self.session_pk, visible(entry_id)])
            row = cur.fetchone()
        if row is None:
            return None  # not stored (or not written yet: then it is in ``where``)
        if row[0] is None:
            self.where[entry_id] = None
            return None
        seg = self._segment(row[0])
        spot = (seg, row[1])
        self.where[entry_id] = spot
        return spot

    def _segment(self, db_id: int) -> _Seg:
        known = self.by_db_id.get(db_id)
        if known is not None:
            return known
        with connection.cursor() as cur:
            cur.execute(f"SELECT head_position, length FROM {self.segments} WHERE id = %s", [db_id])
            head_position, length = cur.fetchone()
        seg = _Seg(head_position, None, None, length, db_id=db_id)
        self.by_db_id[db_id] = seg
        return seg

    def _stored_before(self, position: int) -> int | None:
        sql = f"SELECT MAX(position) FROM {self.entries} WHERE session_id = %s AND position < %s"
        with connection.cursor() as cur:
            cur.execute(sql, [self.session_pk, position])
            row = cur.fetchone()
        return row[0] if row is not None else None

    def _missing_parents(self) -> set[str]:
        sql = (
            f"SELECT missing_parent FROM {self.segments} "
            f"WHERE session_id = %s AND missing_parent IS NOT NULL"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [self.session_pk])
            return {r[0] for r in cur.fetchall()}


def q_offset() -> str:
    return connection.ops.quote_name("offset")


BATCH = 2000


def rebuild_segments(
    session_pk: int,
    *,
    entry_table: str = "explorer_entry",
    segment_table: str = "explorer_segment",
    member_table: str = "explorer_segmententry",
) -> None:
    """The session's segments made again from its entry rows (the migration's backfill, and
    an append that attaches roots stored earlier)."""
    q = connection.ops.quote_name
    with connection.cursor() as cur:
        cur.execute(f"DELETE FROM {q(member_table)} WHERE session_id = %s", [session_pk])
        cur.execute(f"DELETE FROM {q(segment_table)} WHERE session_id = %s", [session_pk])
    writer = SegmentWriter(
        session_pk, entry_table=entry_table, segment_table=segment_table, member_table=member_table
    )
    writer.missing = set()
    writer.started = True  # nothing stored counts: every entry is read here, in order
    _place_stored(writer, after=-1)


def extend_segments(session_pk: int, after: int) -> None:
    """Place the session's entries stored after position ``after`` in its segments, in file
    order, as the entry writers place each one as it arrives.

    For a grown file's import, which stages its entries in a hidden session and moves them
    into the stored one in its last transaction (``files.growth``): the segments it grows
    are the stored session's, which readers see, so they are written only then. The import
    refused any id the session had, so no entry is looked up as a repeat."""
    _place_stored(SegmentWriter(session_pk, fresh=True), after=after)


def _place_stored(writer: SegmentWriter, *, after: int) -> None:
    """Hand the writer its session's entries stored after position ``after``, in file
    order a batch at a time, writing as it goes, then finish."""
    table = writer.entries
    while True:
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT entry_id, parent_id, position FROM {table} "
                f"WHERE session_id = %s AND position > %s ORDER BY position LIMIT %s",
                [writer.session_pk, after, BATCH],
            )
            rows = cur.fetchall()
        if not rows:
            break
        for entry_id, parent_id, position in rows:
            writer.add(entry_id, parent_id, position)
        writer.write()
        after = rows[-1][2]
    writer.finish()


# ---------------------------------------------------------------------------------------------
# Reading


def segment_children(session: Any) -> tuple[dict[str, list[str]], list[str]]:
    """The attached tree as children lists (file order) and roots, made from the segments
    and their entries: what ``TreeShape`` gives for the entries reachable from a root. For
    checks (it reads every entry's row); pages read segments and shown rows only."""
    from explorer.models import Entry

    table = connection.ops.quote_name(Entry._meta.db_table)
    with connection.cursor() as cur:
        cur.execute(
            "SELECT id, head_position, parent_segment_id, parent_offset FROM explorer_segment "
            "WHERE session_id = %s",
            [session.pk],
        )
        segs = {r[0]: r[1:] for r in cur.fetchall()}
        cur.execute(
            f"SELECT m.segment_id, m.{q_offset()}, e.entry_id FROM explorer_segmententry m "
            f"JOIN {table} e ON e.id = m.entry_id WHERE m.session_id = %s "
            f"AND m.segment_id IS NOT NULL",
            [session.pk],
        )
        members: dict[int, dict[int, str]] = {}
        for seg_id, offset, entry_id in cur.fetchall():
            members.setdefault(seg_id, {})[offset] = entry_id
    chains: dict[int, list[str]] = {}
    for seg_id, by_offset in members.items():
        chains[seg_id] = [by_offset[k] for k in range(len(by_offset))]
    children: dict[str, list[tuple[int, str]]] = {}
    roots: list[tuple[int, str]] = []
    position_of: dict[str, int] = {}
    for seg_id, (head_position, parent_seg, parent_offset) in segs.items():
        chain = chains[seg_id]
        position_of[chain[0]] = head_position
        if parent_seg is None:
            roots.append((head_position, chain[0]))
        else:
            children.setdefault(chains[parent_seg][parent_offset], []).append(
                (head_position, chain[0])
            )
    # A chain's next entry: its position is needed to order it among branches.
    with connection.cursor() as cur:
        cur.execute(f"SELECT entry_id, MIN(position) FROM {table} WHERE session_id = %s "
                    f"GROUP BY entry_id", [session.pk])  # fmt: skip
        first_position = dict(cur.fetchall())
    for chain in chains.values():
        for a, b in zip(chain, chain[1:], strict=False):
            children.setdefault(a, []).append((first_position[b], b))
    return (
        {p: [c for _k, c in sorted(kids)] for p, kids in children.items()},
        [r for _k, r in sorted(roots)],
    )


@dataclass(frozen=True, slots=True)
class SegmentRow:
    head_position: int
    parent: int | None
    parent_offset: int | None
    length: int


class SegmentTree:
    """A session's segments, read in one query (about one row per branch): routes as lists
    of (segment, last offset) and subtree sizes, without a row per entry."""

    def __init__(self, session: Any) -> None:
        from explorer.models import Segment

        self.session = session
        self.rows: dict[int, SegmentRow] = {
            pk: SegmentRow(*rest)
            for pk, *rest in Segment.objects.filter(session=session)
            .order_by()
            .values_list("pk", "head_position", "parent_segment_id", "parent_offset", "length")
        }
        self.hanging: dict[int, list[tuple[int, int]]] = {}  # segment → (offset, child)
        for pk, row in self.rows.items():
            if row.parent is not None and row.parent_offset is not None:
                self.hanging.setdefault(row.parent, []).append((row.parent_offset, pk))
        self._totals: dict[int, tuple[int, int]] = {}

    def place(self, entry_id: str) -> tuple[int, int] | None:
        """(segment, offset) of an entry (None: unknown, or in no segment)."""
        from explorer.models import SegmentEntry

        row = (
            SegmentEntry.objects.filter(session=self.session, entry__entry_id=entry_id)
            .values_list("segment_id", "offset")
            .first()
        )
        if row is None or row[0] is None:
            return None
        return row[0], row[1]

    def route(self, entry_id: str) -> list[tuple[int, int]]:
        """The route from its root to ``entry_id``: (segment, last offset on the route), root
        first; empty for an entry in no segment."""
        spot = self.place(entry_id)
        out: list[tuple[int, int]] = []
        while spot is not None:
            out.append(spot)
            row = self.rows[spot[0]]
            spot = (
                (row.parent, row.parent_offset)
                if row.parent is not None and row.parent_offset is not None
                else None
            )
        out.reverse()
        return out

    def route_ids(self, entry_id: str) -> list[str]:
        """The ids on the route to ``entry_id``, root first (one query over its segments)."""
        from django.db.models import Q

        from explorer.models import SegmentEntry

        route = self.route(entry_id)
        if not route:
            return []
        wanted = Q()
        for seg, upto in route:
            wanted |= Q(segment_id=seg, offset__lte=upto)
        found = {
            (s, o): eid
            for s, o, eid in SegmentEntry.objects.filter(wanted).values_list(
                "segment_id", "offset", "entry__entry_id"
            )
        }
        return [found[(seg, k)] for seg, upto in route for k in range(upto + 1)]

    def total(self, seg: int) -> tuple[int, int]:
        """(entries, leaves) of a segment's subtree, from its head."""
        return subtree_total(seg, lambda s: self.rows[s].length, self.hanging, self._totals)

    def size_at(self, seg: int, offset: int) -> tuple[int, int]:
        """(entries, leaves) of the subtree of the entry at (``seg``, ``offset``): what
        ``TreeShape.sizes`` holds for it."""
        return size_within(seg, offset, lambda s: self.rows[s].length, self.hanging, self._totals)


def on_route(session: Any, entry_id: str, leaf_id: str) -> bool | None:
    """:func:`on_route_of` the session's primary key."""
    return on_route_of(session.pk, entry_id, leaf_id)


def on_route_of(session_pk: int, entry_id: str, leaf_id: str) -> bool | None:
    """Whether the entry ``entry_id`` is on the route root → ``leaf_id``, from the segments:
    the leaf's chain of segments (one row per branch point above it, not per entry) holds the
    entry's segment at or below its offset. None when the segments do not settle it: either
    id unknown, or either entry in no segment (a loop, or below one).

    A placed entry's parent is placed (else it is a root: no parent stored, or itself), so
    the parent links above a placed leaf are exactly its chain of segments, ending at a
    true root: the route walk (``queries.routes.light_path``) reads the same entries, and
    entries elsewhere that loop change nothing. Ids are in their stored (visible) form."""
    from explorer.models import Entry, SegmentEntry

    entries = connection.ops.quote_name(Entry._meta.db_table)
    members = connection.ops.quote_name(SegmentEntry._meta.db_table)
    off = q_offset()
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT e.entry_id, m.segment_id, m.{off} FROM {entries} e "
            f"LEFT JOIN {members} m ON m.entry_id = e.id "
            f"WHERE e.session_id = %s AND e.entry_id IN (%s, %s)",
            [session_pk, entry_id, leaf_id],
        )
        rows = cur.fetchall()
        places: dict[str, tuple[int, int]] = {}
        for eid, seg, offset in rows:
            if seg is None or eid in places:
                return None
            places[eid] = (seg, offset)
        if entry_id not in places or leaf_id not in places:
            return None
    target_seg, target_off = places[entry_id]
    chain = route_chain(session_pk, leaf_id)  # the leaf is placed: never None here
    return chain is not None and chain.get(target_seg, -1) >= target_off


def _chain_cte() -> str:
    """``chain(seg, upto, n)``: the segments of the route to the entry whose (session, id)
    are the query's first two parameters, with the last offset the route holds in each and
    its distance from the entry's own segment (0). No row when the entry is unknown or in
    no segment."""
    from explorer.models import Entry, Segment, SegmentEntry

    entries = connection.ops.quote_name(Entry._meta.db_table)
    members = connection.ops.quote_name(SegmentEntry._meta.db_table)
    segments = connection.ops.quote_name(Segment._meta.db_table)
    return f"""
        WITH RECURSIVE chain(seg, upto, n) AS (
            SELECT m.segment_id, m.{q_offset()}, 0 FROM {members} m
            WHERE m.entry_id = (
                SELECT x.id FROM {entries} x WHERE x.session_id = %s AND x.entry_id = %s
            ) AND m.segment_id IS NOT NULL
            UNION ALL
            SELECT s.parent_segment_id, s.parent_offset, chain.n + 1 FROM {segments} s
            JOIN chain ON s.id = chain.seg WHERE s.parent_segment_id IS NOT NULL
        )"""


def route_rows(
    session_pk: int,
    entry_id: str,
    columns: str,
    *,
    join: str = "",
    where: str = "",
    params: Sequence[Any] = (),
    entries_joined: bool = True,
) -> list[tuple[Any, ...]]:
    """The entry rows (``columns`` of the entry table, aliased ``e``) of the route root →
    ``entry_id``, root first, read from the segments in one query: the entry's chain of
    segments (one row per branch point above it), then each segment's members up to the
    place the route leaves it, by the (segment, offset) index. Empty when the segments do
    not settle it (the id unknown, or the entry in no segment: a loop, or below one); the
    caller then walks the parent links. ``join``, ``where`` and ``params``: a table joined
    to the rows and a condition on them (the route's figure rows past a depth, say).
    ``entries_joined`` False leaves the entry table out (``columns`` and ``join`` then name
    the members ``m``, whose ``m.entry_id`` is the entry's key): a lookup per entry saved,
    half the statement on a route of thousands, when the caller needs no entry column.

    The same entries as the walk up the parent links (:func:`on_route_of` says why), read by
    range instead of one key lookup per link: about three times quicker on a route of
    thousands of entries, and no longer than the route whatever the session's size."""
    from explorer.models import Entry, SegmentEntry

    entries = connection.ops.quote_name(Entry._meta.db_table)
    members = connection.ops.quote_name(SegmentEntry._meta.db_table)
    off = q_offset()
    with connection.cursor() as cur:
        cur.execute(
            f"""{_chain_cte()}
            SELECT {columns} FROM chain
            JOIN {members} m ON m.segment_id = chain.seg AND m.{off} <= chain.upto
            {f"JOIN {entries} e ON e.id = m.entry_id" if entries_joined else ""} {join}
            {f"WHERE {where}" if where else ""}
            ORDER BY chain.n DESC, m.{off}
            """,
            [session_pk, entry_id, *params],
        )
        return cur.fetchall()


def route_chain(session_pk: int, entry_id: str) -> dict[int, int] | None:
    """The route root → ``entry_id`` as its segments: segment → the last offset the route
    holds in it (one row per branch point above the entry). An entry is on the route when
    its segment is here and its offset at most that. None when the segments do not settle
    it (the id unknown, or the entry in no segment); an entry in no segment is on no
    placed entry's route."""
    return dict(chain_root_first(session_pk, entry_id)) or None


def chain_root_first(session_pk: int, entry_id: str) -> list[tuple[int, int]]:
    """:func:`route_chain` in route order: (segment, last offset the route holds in it),
    root first, so each segment's entries sit at known depths (the first at the sum of the
    lengths above). Empty when the segments do not settle it."""
    with connection.cursor() as cur:
        cur.execute(
            f"{_chain_cte()} SELECT seg, upto FROM chain ORDER BY n DESC", [session_pk, entry_id]
        )
        return [(int(s), int(u)) for s, u in cur.fetchall()]
