"""Read marks: how far each user has seen a session ("new since you last looked")."""

from __future__ import annotations

from django.db import transaction

from explorer.models import Session

# ---------------------------------------------------------------------------------------------
# Read marks ("new since you last looked")


def mark_seen(session: Session, user, position: int | None = None) -> int:
    """Record that ``user`` was shown ``session`` up to ``position`` (default: everything
    stored now). A mark only moves forward, and never past the newest entry, so a late
    POST from an old tab cannot hide what arrived since. Returns the mark."""
    from explorer.models import ReadMark
    from explorer.read_marks import newest_position

    newest = newest_position(session)
    target = newest if position is None else max(0, min(position, newest))
    with transaction.atomic():
        mark, created = ReadMark.objects.select_for_update().get_or_create(
            user=user, session=session, defaults={"position": target}
        )
        if not created and target > mark.position:
            mark.position = target
            mark.save(update_fields=["position", "updated"])
    return mark.position
