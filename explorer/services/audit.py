"""The audit trail: one row per sensitive action (a reveal, a delete, an archive)."""

from __future__ import annotations

from explorer.models import AuditEvent, Session


def record_audit(
    user,
    action: str,
    session: Session | None,
    *,
    target: str = "",
    what: str = "",
    reason: str = "",
) -> AuditEvent:
    """One row of the audit list (``AuditEvent``): who did what to which session, when and
    why. The session and the user are named as text, so the row outlives both."""
    author = user if user is not None and user.is_authenticated else None
    return AuditEvent.objects.create(
        user=author,
        username=author.get_username() if author is not None else "",
        action=action,
        session_ref=session.session_id if session is not None else "",
        session_name=session.display_name if session is not None else "",
        target=target[:200],
        what=what,
        reason=reason,
    )  # fmt: skip
