"""The whole-session tree skeleton (index columns only), read by the integrity checks and
the Tree tab's view without archived branches. The Tree tab's other views fold from the
segments (:mod:`explorer.queries.tree_segments`), and what an archived branch hides is read
from them too (:mod:`explorer.archives`).
"""

from __future__ import annotations

from explorer.models import Entry, Session
from explorer.queries.keep import grown
from explorer.session.gcpause import gc_paused


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
    """(id, parent, type, role) of every entry in file order.

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
