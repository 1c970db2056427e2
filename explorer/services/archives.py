"""Archived branches: site data about the tree, never written into the session file."""

from __future__ import annotations

from explorer import queries
from explorer.models import AuditEvent, Entry, Session
from explorer.services.audit import record_audit
from explorer.services.locks import _writer

# ---------------------------------------------------------------------------------------------
# Archived branches: site data about the tree, never written into the session file.

ARCHIVE_REASON_MAX = 500


class ArchiveRefused(ValueError):
    """An archive or unarchive that cannot be done, with the reason shown to the editor."""


def archive_branch(session: Session, user, entry_id: str, reason: str):
    """Set aside the branch starting at ``entry_id`` (hidden by default on the pages, left
    out of the "without archived branches" download). Refused for the route the session
    opens on (its own leaf's), for an unknown entry and for an empty reason: an archive
    without a why is a deletion nobody can review. Returns the ``ArchivedBranch``."""
    from explorer.archives import subtree_ids
    from explorer.models import ArchivedBranch

    reason = (reason or "").strip()
    if not reason:
        raise ArchiveRefused("Say why the branch is archived.")
    if len(reason) > ARCHIVE_REASON_MAX:
        raise ArchiveRefused(f"Keep the reason under {ARCHIVE_REASON_MAX} characters.")
    with _writer(session):
        if not Entry.objects.filter(session=session, entry_id=entry_id).exists():
            raise ArchiveRefused(f"This session has no entry {entry_id[:80]!r}.")
        children: dict[str | None, list[str]] = {}
        for eid, parent in Entry.objects.filter(session=session).values_list(
            "entry_id", "parent_id"
        ):
            children.setdefault(parent, []).append(eid)
        if queries.default_leaf_id(session) in subtree_ids(children, entry_id):
            raise ArchiveRefused(
                "This branch holds the session's current leaf; only an abandoned branch "
                "can be archived."
            )
        archive, created = ArchivedBranch.objects.get_or_create(
            session=session,
            entry_id=entry_id,
            defaults={"reason": reason, "archived_by": user if user and user.pk else None},
        )
        if not created:
            raise ArchiveRefused("This branch is archived already.")
        record_audit(
            user,
            AuditEvent.ARCHIVE,
            session,
            target=entry_id,
            what=f"archived the branch from {entry_id}",
            reason=reason,
        )
    return archive


def unarchive_branch(session: Session, user, entry_id: str) -> bool:
    """Bring an archived branch back on every page. Returns whether one was archived."""
    from explorer.models import ArchivedBranch

    with _writer(session):
        deleted, _ = ArchivedBranch.objects.filter(session=session, entry_id=entry_id).delete()
        if deleted:
            what = f"unarchived the branch from {entry_id}"
            record_audit(user, AuditEvent.UNARCHIVE, session, target=entry_id, what=what)
    return bool(deleted)
