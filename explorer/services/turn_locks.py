"""The turn lock: one running turn per session, refreshed while it runs, cancellable."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from explorer.models import Session, TurnLock

# ---------------------------------------------------------------------------------------------
# The turn lock: one running turn per session across every worker


class TurnLockBusy(Exception):
    """Another turn holds the session's lock (and refreshed it recently)."""


def acquire_turn_lock(session: Session, turn_id: str, *, stale_after: float) -> None:
    """Take the session's turn lock for ``turn_id``; a lock nobody refreshed for
    ``stale_after`` seconds belongs to a dead worker and is taken over."""
    for _attempt in range(2):
        try:
            with transaction.atomic():
                TurnLock.objects.create(session=session, turn_id=turn_id)
            return
        except IntegrityError:
            stale = timezone.now() - timezone.timedelta(seconds=stale_after)
            if not TurnLock.objects.filter(session=session, updated__lt=stale).delete()[0]:
                raise TurnLockBusy() from None
    raise TurnLockBusy()


def release_turn_lock(session_pk: int, turn_id: str) -> None:
    TurnLock.objects.filter(session_id=session_pk, turn_id=turn_id).delete()


def refresh_turn_lock(session_pk: int, turn_id: str) -> bool:
    """The running turn's heartbeat; True when another worker asked it to stop."""
    row = TurnLock.objects.filter(session_id=session_pk, turn_id=turn_id).first()
    if row is None:
        return False
    row.save(update_fields=["updated"])
    return row.cancel_requested


def request_turn_cancel(session_pk: int) -> bool:
    """Flag the running turn (on whichever worker runs it); True when there was one."""
    return bool(
        TurnLock.objects.filter(session_id=session_pk, cancel_requested=False).update(
            cancel_requested=True
        )
    )
