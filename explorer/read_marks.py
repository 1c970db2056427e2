"""What each reader has not seen yet: "N new" in the list, new entries marked on the
Transcript and the tree, "Mark as read".

A reader's mark (``models.ReadMark``) is the newest entry position the app showed them on
their last visit. Positions only grow (entries are appended), so "new" is simply "position
above the mark": one indexed count per session, nothing to invalidate. Reads only here; the
mark is written by ``services.mark_seen``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db.models import Count, Q

from explorer.models import Entry, ReadMark, Session

# Ids listed to a page as new at most (the page marks the ones it shows).
NEW_IDS_SHOWN = 2000


@dataclass(frozen=True)
class Seen:
    """A reader's standing on one session: ``mark`` None when they never opened it."""

    mark: int | None
    newest: int
    new: int

    @property
    def has_new(self) -> bool:
        return self.mark is not None and self.new > 0


def _user_pk(user) -> int | None:
    return getattr(user, "pk", None) if getattr(user, "is_authenticated", False) else None


def mark_of(user, session: Session) -> int | None:
    pk = _user_pk(user)
    if pk is None:
        return None
    return (
        ReadMark.objects.filter(user_id=pk, session=session)
        .values_list("position", flat=True)
        .first()
    )


def newest_position(session: Session) -> int:
    from explorer.queries.routes import last_position

    return last_position(session)


def seen(user, session: Session) -> Seen:
    """The reader's mark, the newest position now and how many entries arrived since."""
    mark = mark_of(user, session)
    newest = newest_position(session)
    new = 0
    if mark is not None and newest > mark:
        new = Entry.objects.filter(session=session, position__gt=mark).count()
    return Seen(mark, newest, new)


def new_ids(session: Session, mark: int | None, ids: Iterable[str]) -> list[str]:
    """Which of ``ids`` (the entries a page shows) arrived after ``mark``."""
    wanted = list(dict.fromkeys(ids))[:NEW_IDS_SHOWN]
    if mark is None or not wanted:
        return []
    return list(
        Entry.objects.filter(session=session, position__gt=mark, entry_id__in=wanted).values_list(
            "entry_id", flat=True
        )
    )


def new_counts(user, sessions: list[Session]) -> dict[int, int]:
    """Entries new to ``user`` per session of a list page (sessions never opened: none), in
    two queries whatever the page's length."""
    pk = _user_pk(user)
    if pk is None or not sessions:
        return {}
    marks = dict(
        ReadMark.objects.filter(user_id=pk, session__in=sessions).values_list(
            "session_id", "position"
        )
    )
    if not marks:
        return {}
    where = Q()
    for session_pk, position in marks.items():
        where |= Q(session_id=session_pk, position__gt=position)
    rows = Entry.objects.filter(where).order_by().values("session_id").annotate(n=Count("pk"))
    return {row["session_id"]: row["n"] for row in rows}
