"""The reader's cursor (the leaf a user is on), moved by edits and followed by appends."""

from __future__ import annotations

from django.db import transaction

from explorer import broadcast, files, queries
from explorer.models import Entry, Leaf, Session
from explorer.queries.routes import BY_PARENT_COLS
from explorer.session.errors import SessionError

# ---------------------------------------------------------------------------------------------
# Cursors


def cursor_for(session: Session, user) -> Leaf:
    """The user's navigation cursor row, created at the file's leaf on first use; anonymous
    or missing users get the file's own leaf. (Reads use ``queries.cursor_id``.)"""
    if user is None or not getattr(user, "is_authenticated", False):
        leaf = Leaf.objects.filter(session=session, name=Leaf.DEFAULT).first()
        return leaf or files.sync_default_leaf(session)
    leaf, _ = Leaf.objects.get_or_create(
        session=session,
        name=f"user:{user.pk}",
        defaults={"user": user, "entry_id": queries.default_leaf_id(session)},
    )
    return leaf


def move_cursor(session: Session, user, entry_id: str | None) -> Leaf:
    """Point the user's cursor at ``entry_id`` (None: before the first entry). Appends
    nothing, like the engine's ``branch`` / ``reset_leaf``."""
    if entry_id is not None and not queries.entry_exists(session, entry_id):
        raise SessionError(f"Entry {entry_id} not found")
    with transaction.atomic():
        leaf = cursor_for(session, user)
        leaf.entry_id = entry_id
        leaf.save(update_fields=["entry_id", "updated"])
        broadcast.cursor_moved(session, leaf, user)
    return leaf


def follow_appends(session: Session, entries: list[Entry]) -> list[Leaf]:
    """Cursors that sat on the tip of a branch follow the entries appended below it.

    Pi's leaf moves with every append; a reader whose cursor was at the end of a route
    expects the same when someone else extends it (a grown import, a followed file, another
    user's turn). A cursor on an entry that already had other children stays where it is
    (its page then says how many newer entries there are). Call inside the writing
    transaction; the moves are broadcast after the commit.
    """
    if not entries:
        return []
    new_ids = {e.entry_id for e in entries}
    attached_to: dict[str, str | None] = {}  # new entry → the old entry its chain hangs from
    for e in sorted(entries, key=lambda x: x.position):
        parent = e.parent_id
        attached_to[e.entry_id] = attached_to.get(parent) if parent in new_ids else parent
    points = {p for p in attached_to.values() if p}
    if not points:
        return []
    moved: list[Leaf] = []
    leaves = Leaf.objects.filter(session=session, entry_id__in=points).exclude(name=Leaf.DEFAULT)
    for leaf in leaves.select_related("user"):
        # A column the covering skeleton index lacks (``BY_PARENT_COLS``): else SQLite
        # walks the whole session with that index instead of looking the parent up.
        had_children = bool(
            Entry.objects.filter(session=session, parent_id=leaf.entry_id)
            .exclude(entry_id__in=new_ids)
            .values_list(*BY_PARENT_COLS)[:1]
        )
        if had_children:
            continue
        below = [eid for eid, point in attached_to.items() if point == leaf.entry_id]
        leaf.entry_id = below[-1]  # the newest entry of what was appended under it
        leaf.save(update_fields=["entry_id", "updated"])
        broadcast.cursor_moved(session, leaf, leaf.user)
        moved.append(leaf)
    return moved


def follow_stopped(session_pk: int, message: str) -> None:
    """The follower stopped reading a session's file: tell its viewers (nothing is written;
    the stored session stays as it was)."""
    session = Session.objects.filter(pk=session_pk).first()
    if session is not None:
        broadcast.follow_stopped(session, message)
