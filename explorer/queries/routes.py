"""Routes: the light root→entry walks over the indexed parent links, the routes each process
keeps, the cursor and the default leaf, and the light child/sibling reads around an entry.

A route is one recursive query carrying only index columns (:func:`light_path`,
cycle-safe); raw lines are fetched only for the entries a page shows (:mod:`.entries`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from django.db import connection

from explorer.models import Entry, Leaf, Session
from explorer.queries.keep import _identity_key, _once, _stamped_list
from explorer.segment_store import route_rows
from explorer.session import jsonfmt


class LightEntry(NamedTuple):
    """An entry's index columns, as a route lists it (no body).

    A named tuple, not a frozen dataclass: a route of thousands of entries is built on
    every request that reads it, and a tuple costs a third of a frozen dataclass to build
    (1.8 against 6 ms for a 5,780-entry route); it pickles as its fields in order."""

    entry_id: str
    parent_id: str | None
    type: str
    role: str
    position: int
    size: int
    child_count: int
    target_id: str
    pk: int = 0


_LIGHT_COLS = "entry_id, parent_id, type, role, position, size, child_count, target_id, id"


_PATH_COLS = "entry_id, parent_id, type, position, id"


def light_path(session: Session, entry_id: str | None) -> list[LightEntry]:
    """Root→entry index rows in one query; stops on cycles and dangling parents.

    Read from the stored segments (the entry's chain of segments, then their members by
    range); an entry the segments leave out (a loop, or below one) is walked up its parent
    links instead, one recursive query either way.

    Only columns stored before the raw line are read: SQLite would otherwise step over each
    entry's payload (overflow pages) to reach the later columns, and a path can be thousands
    of entries long. Role, size and child count are left empty here.

    A route this process read recently is reused (:func:`_known_route`): an entry on it has
    its prefix as route, and a new leaf a few entries below it (the tip after an append, a
    sibling branch) costs a walk of those few entries instead of the whole route.
    """
    if not entry_id:
        return []
    routes = _session_routes(session)
    known = _known_route(session, routes, entry_id)
    if known is not None:
        return known
    out = _segment_route(session, entry_id)
    if out is None:
        out = _walk_up(session, entry_id, max(session.entry_count, 1) + 1)
    _remember_route(routes, out)
    return out


def route_length(session: Session, entry_id: str | None) -> int:
    """Entries on the route root → ``entry_id`` (0 for none or an unknown id): the stored
    depth of a placed entry (``RouteFigure.depth``, written when it arrived), else the
    route read. A placed entry's parent links are its chain of segments up to a true root,
    which is the route the depth counts."""
    if not entry_id:
        return 0
    depth = stored_depth(session, entry_id)
    return depth + 1 if depth is not None else len(light_path(session, entry_id))


def stored_depth(session: Session, entry_id: str) -> int | None:
    """Entries above a placed entry on its route (``RouteFigure.depth``, written when it
    arrived), or None for an unknown id or an entry in no segment (a loop, or below one):
    there the parent links are walked (:func:`light_path`)."""
    from explorer.models import RouteFigure, SegmentEntry

    entries = connection.ops.quote_name(Entry._meta.db_table)
    members = connection.ops.quote_name(SegmentEntry._meta.db_table)
    figures = connection.ops.quote_name(RouteFigure._meta.db_table)
    with connection.cursor() as cur:
        cur.execute(
            f"SELECT f.depth FROM {entries} e "
            f"JOIN {members} m ON m.entry_id = e.id AND m.segment_id IS NOT NULL "
            f"JOIN {figures} f ON f.entry_id = e.id "
            f"WHERE e.session_id = %s AND e.entry_id = %s",
            [session.pk, jsonfmt.visible(entry_id)],
        )
        row = cur.fetchone()
    return int(row[0]) if row is not None and row[0] is not None else None


_SEGMENT_COLS = ", ".join(f"e.{c}" for c in _PATH_COLS.split(", "))


def _segment_route(session: Session, entry_id: str) -> list[LightEntry] | None:
    """The route to ``entry_id`` read from the stored segments (``segment_store.route_rows``),
    or None where they do not settle it (an unknown id, an entry in a loop or below one)."""
    rows = route_rows(session.pk, jsonfmt.visible(entry_id), _SEGMENT_COLS)
    if not rows:
        return None
    return [LightEntry(r[0], r[1], r[2], "", r[3], 0, 0, "", r[4]) for r in rows]


def _walk_up(session: Session, entry_id: str, limit: int) -> list[LightEntry]:
    """At most ``limit`` + 1 entries from ``entry_id`` up its parent links, root first
    (stopping at a repetition, as the route query does)."""
    table = Entry._meta.db_table
    sql = f"""
        WITH RECURSIVE walk(entry_id, parent_id, type, position, id, n) AS (
            SELECT {_PATH_COLS}, 0 FROM {table} WHERE session_id = %s AND entry_id = %s
            UNION ALL
            SELECT e.entry_id, e.parent_id, e.type, e.position, e.id, walk.n + 1
            FROM {table} e JOIN walk ON e.session_id = %s AND e.entry_id = walk.parent_id
            WHERE walk.n < %s AND walk.parent_id <> walk.entry_id
        )
        SELECT {_PATH_COLS} FROM walk ORDER BY n DESC
    """
    with connection.cursor() as cur:
        cur.execute(sql, [session.pk, jsonfmt.visible(entry_id), session.pk, limit])
        rows = cur.fetchall()
    seen: set[str] = set()
    out: list[LightEntry] = []
    # A cycle repeats ids; keep the walk up to the first repetition (from the entry upwards).
    for r in reversed(rows):
        if r[0] in seen:
            break
        seen.add(r[0])
        out.append(LightEntry(r[0], r[1], r[2], "", r[3], 0, 0, "", r[4]))
    out.reverse()
    return out


# Routes this process read, per session identity: key -> (stamp, routes), each route a
# (rows, id -> index) pair, newest last. Entries never change parent once stored, so a
# route stays right for as long as its session exists; the stamp in the shared cache ties
# the routes to it like the grown figures (a cleared cache forgets them too).
_ROUTES: OrderedDict[str, tuple[str, list]] = OrderedDict()
_ROUTES_LOCK = threading.Lock()
ROUTES_KEPT = 4  # routes kept per session
ROUTE_WALK = 48  # entries walked up from a new leaf looking for a known route


def _session_routes(session: Session) -> list[tuple[list[LightEntry], dict[str, int]]]:
    # The stamp is a shared-cache read (a file without Redis): once per request.
    key = _identity_key(session, "routes")
    return _once(("routes", key), lambda: _stamped_list(_ROUTES, _ROUTES_LOCK, key))


def _remember_route(routes: list, route: list[LightEntry]) -> None:
    """Keep ``route`` when it ends at a true root (no cycle cut it short): only then is
    each prefix of it the route of the prefix's last entry."""
    if not route:
        return
    ids = {e.entry_id: i for i, e in enumerate(route)}
    top = route[0]
    if top.parent_id and top.parent_id != top.entry_id and top.parent_id in ids:
        return  # the walk stopped at a cycle
    with _ROUTES_LOCK:
        routes[:] = [r for r in routes if r[0][-1].entry_id != route[-1].entry_id]
        routes.append((list(route), ids))  # a copy: the caller may change its own list
        del routes[:-ROUTES_KEPT]


def _known_route(session: Session, routes: list, entry_id: str) -> list[LightEntry] | None:
    """The route to ``entry_id`` from a kept one, or None: the entry on a kept route, or
    a few parent links above it joining one (the joined route is kept too)."""
    with _ROUTES_LOCK:
        kept = list(routes)
    for route, ids in reversed(kept):
        k = ids.get(entry_id)
        if k is not None:
            return route[: k + 1]
    if not kept:
        return None
    walked = _walk_up(session, entry_id, ROUTE_WALK)  # root first, at most ROUTE_WALK + 1
    for i in range(len(walked) - 1, -1, -1):
        for route, ids in reversed(kept):
            k = ids.get(walked[i].entry_id)
            if k is not None:
                joined = route[: k + 1] + walked[i + 1 :]
                _remember_route(routes, joined)
                return joined
    top = walked[0] if walked else None
    if top is not None and len(walked) <= ROUTE_WALK:
        # The walk reached the top before its limit: it is the whole route.
        _remember_route(routes, walked)
        return walked
    return None


def last_position(session: Session) -> int:
    """The file position of the session's newest entry (0 when it has none): where a live
    viewer resumes from, so nothing written after the page was drawn is missed."""
    return _tip(session)[0]


def default_leaf_id(session: Session) -> str | None:
    """The file's own leaf: its last entry in file order."""
    return _tip(session)[1]


def _tip(session: Session) -> tuple[int, str | None]:
    """(position, id) of the session's newest entry, once per read-only request."""

    def read() -> tuple[int, str | None]:
        row = (
            Entry.objects.filter(session=session)
            .order_by("-position")
            .values_list("position", "entry_id")
            .first()
        )
        return (row[0] or 0, row[1]) if row else (0, None)

    return _once(("tip", session.pk, session.entry_count), read)


def cursor_id(session: Session, user: Any) -> str | None:
    """The entry the user's navigation cursor is on, or the file's own leaf (its last entry)
    when the user has none yet or it points nowhere. The one read-only cursor lookup: the
    row itself is created by ``services.cursor_for`` on the first write. Read once per
    read-only request (the page, its frame and its panel each ask)."""
    if user is not None and getattr(user, "is_authenticated", False):
        own = _once(("cursor", session.pk, user.pk), lambda: _own_cursor(session, user))
        if own:
            return own
    return default_leaf_id(session)


def _own_cursor(session: Session, user: Any) -> str | None:
    leaf = Leaf.objects.filter(session=session, name=f"user:{user.pk}").first()
    if (
        leaf is not None
        and leaf.entry_id
        and Entry.objects.filter(session=session, entry_id=leaf.entry_id).exists()
    ):
        return leaf.entry_id
    return None


def entry_exists(session: Session, entry_id: str | None) -> bool:
    return bool(entry_id) and Entry.objects.filter(session=session, entry_id=entry_id).exists()


def children_of(session: Session, entry_id: str | None) -> list[Entry]:
    """Children in file order (the engine's ``get_children``); None → the roots."""
    if entry_id is None:
        return list(Entry.objects.roots(session).light())
    return list(Entry.objects.children_of(session, entry_id).light())


def get_entry(session: Session, entry_id: str) -> Entry | None:
    return Entry.objects.filter(session=session, entry_id=entry_id).first()


# A read of children by parent must look each parent up in the ``entry_children`` index.
# Without table statistics SQLite prefers the covering ``entry_skeleton`` index whenever it
# holds every column asked for, and walks the whole session with it: 6 to 13 ms a query
# instead of 0.1 ms on 50,000 entries, and a minute for a recursive walk down a subtree.
# So the ORM reads also ask for a column that index does not hold (``BY_PARENT_COLS``,
# ignored), and the raw recursive walk names the index on SQLite.
BY_PARENT_COLS = ("child_count",)


def _children_index() -> str:
    return "INDEXED BY entry_children" if connection.vendor == "sqlite" else ""


def siblings_of(session: Session, parents: Iterable[str | None]) -> dict[str | None, list[str]]:
    """Children in file order of each of ``parents`` that has more than one (None: the
    roots): the branch points a window of a route passes."""
    wanted = [p for p in dict.fromkeys(parents) if p]
    out: dict[str | None, list[str]] = {}
    for k in range(0, len(wanted), 500):
        # Sorted here, not by the database: an ORDER BY position makes SQLite walk the whole
        # session by position instead of looking up each parent's children.
        rows = sorted(
            Entry.objects.filter(session=session, parent_id__in=wanted[k : k + 500])
            .order_by()
            .values_list("position", "parent_id", "entry_id", *BY_PARENT_COLS)
        )
        for _position, parent, child, *_ in rows:
            out.setdefault(parent, []).append(child)
    if None in parents:
        roots = list(Entry.objects.roots(session).values_list("entry_id", flat=True)[:1000])
        out[None] = roots
    return {p: kids for p, kids in out.items() if len(kids) > 1}


def children_roles(session: Session, parents: Sequence[str]) -> list[tuple[str, str]]:
    """(id, role) of every child of ``parents``, in file order (sorted here: see
    :func:`siblings_of`)."""
    rows = sorted(
        Entry.objects.filter(session=session, parent_id__in=list(parents))
        .order_by()
        .values_list("position", "entry_id", "role", *BY_PARENT_COLS)
    )
    return [(eid, role) for _position, eid, role, *_ in rows]


def newest_leaf_under(session: Session, entry_id: str) -> str | None:
    """The newest entry (in file order) of the subtree at ``entry_id``: the route a branch
    switcher opens, as the newest work under that branch is what a reader looks for."""
    table = Entry._meta.db_table
    limit = max(session.entry_count, 1) + 1
    sql = f"""
        WITH RECURSIVE sub(entry_id, position, n) AS (
            SELECT entry_id, position, 0 FROM {table} WHERE session_id = %s AND entry_id = %s
            UNION
            SELECT e.entry_id, e.position, sub.n + 1
            FROM {table} e {_children_index()} JOIN sub
                ON e.session_id = %s AND e.parent_id = sub.entry_id
            WHERE sub.n < %s AND e.entry_id <> sub.entry_id
        )
        SELECT entry_id FROM sub ORDER BY position DESC LIMIT 1
    """
    with connection.cursor() as cur:
        cur.execute(sql, [session.pk, entry_id, session.pk, limit])
        row = cur.fetchone()
    return row[0] if row else None


def newer_than(session: Session, entry_id: str | None) -> tuple[int, str | None]:
    """How many entries were written after ``entry_id`` (file order), and the tip (the
    file's leaf): what "N newer entries — go to the tip" says."""
    tip = default_leaf_id(session)
    if not entry_id or entry_id == tip:
        return 0, tip
    pos = (
        Entry.objects.filter(session=session, entry_id=entry_id)
        .values_list("position", flat=True)
        .first()
    )
    if pos is None:
        return 0, tip
    return Entry.objects.filter(session=session, position__gt=pos).count(), tip
