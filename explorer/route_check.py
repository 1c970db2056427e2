"""Whether an entry is on the route to a leaf, at a cost that does not grow with the route.

A context edit must target an entry on the route root → leaf. The lean appends load only the
leaf and the target, so the engine asks the storage (``DatabaseStorage.on_branch``). Walking
the route's ids each time made a context edit on a 50,000-entry session cost several times
the same edit on 500 entries. The answer comes, cheapest first, from:

1. the stored segments (``segment_store.on_route``): the leaf's chain of segments, one row
   per branch point above it, holds the target's place. This settles every session whose
   ids are unique and loop-free (every session an agent wrote), with no per-process memo;
2. the depth column: a target deeper than the leaf is not above it, and a target a few
   levels above it is checked by walking exactly that many parent links (each step must
   lower the depth by one, else the stored depths are not a plain tree's here: cycles and
   re-parented lines, and the full walk decides);
3. the route walk of ``queries.routes.light_path``.
"""

from __future__ import annotations

from django.db import connection

from explorer import segment_store
from explorer.models import Entry, Session
from explorer.queries.routes import light_path
from explorer.session import jsonfmt

# Parent links walked from the leaf before the whole route is read (and kept) instead.
SHORT_WALK = 1000


def on_route(session: Session, entry_id: str, leaf_id: str | None) -> bool:
    """Whether ``entry_id`` is on the route root → ``leaf_id`` (``light_path``'s answer)."""
    if not leaf_id or not entry_id:
        return False
    # Stored ids are in their visible form (lone surrogates shown as U+FFFD).
    target_id, leaf = jsonfmt.visible(entry_id), jsonfmt.visible(leaf_id)
    settled = segment_store.on_route(session, target_id, leaf)
    if settled is not None:
        return settled
    depths = dict(
        Entry.objects.filter(session=session, entry_id__in=[target_id, leaf]).values_list(
            "entry_id", "depth"
        )
    )
    if target_id not in depths or leaf not in depths:
        return False
    steps = depths[leaf] - depths[target_id]
    if 0 <= steps <= SHORT_WALK:
        found = _short_walk(session, leaf, steps)
        if found is not None:
            return found == target_id
    return any(e.entry_id == target_id for e in light_path(session, leaf))


def _short_walk(session: Session, leaf_id: str, steps: int) -> str | None:
    """The id ``steps`` parent links above ``leaf_id`` (stored form), or None when the walk does not lower
    the depth by one per link (or stops early): then the depths do not settle it."""
    table = Entry._meta.db_table
    sql = f"""
        WITH RECURSIVE walk(entry_id, parent_id, depth, n) AS (
            SELECT entry_id, parent_id, depth, 0 FROM {table}
            WHERE session_id = %s AND entry_id = %s
            UNION ALL
            SELECT e.entry_id, e.parent_id, e.depth, walk.n + 1
            FROM {table} e JOIN walk ON e.session_id = %s AND e.entry_id = walk.parent_id
            WHERE walk.n < %s
        )
        SELECT entry_id, depth, n FROM walk ORDER BY n
    """
    with connection.cursor() as cur:
        cur.execute(sql, [session.pk, leaf_id, session.pk, steps])
        rows = cur.fetchall()
    if len(rows) != steps + 1:
        return None
    top_depth = rows[0][1]
    if any(depth != top_depth - n for _eid, depth, n in rows):
        return None
    return rows[-1][0]
