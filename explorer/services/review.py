"""Review comments and per-entry review marks."""

from __future__ import annotations

from django.utils import timezone

from explorer.models import AuditEvent, Session
from explorer.services.audit import record_audit
from explorer.services.locks import _writer

# ---------------------------------------------------------------------------------------------
# Review comments: site data about entries, never written into the session file. Like the
# findings' statuses they append nothing, so nothing is broadcast.


def _review_models():
    from explorer.models import EntryReview, ReviewComment

    return EntryReview, ReviewComment


def add_comment(session: Session, user, entry_id: str, body: str, parent=None):
    """A new thread on an entry, or a reply to one (``parent``: any comment of the thread;
    replies hang off its first comment, so threads stay one level deep)."""
    _, ReviewComment = _review_models()
    with _writer(session):
        root = None
        if parent is not None:
            root = parent if parent.parent_id is None else parent.parent
            entry_id = root.entry_id
        return ReviewComment.objects.create(
            session=session, entry_id=entry_id, parent=root, author=user, body=body
        )


def edit_comment(comment, body: str):
    """Change a comment's text (the author or an admin; the view checks who)."""
    with _writer(comment.session):
        comment.body = body
        comment.edited = timezone.now()
        comment.save(update_fields=["body", "edited"])
    return comment


def delete_comment(comment, user=None) -> None:
    """Remove a comment; removing a thread's first comment removes its replies. The audit
    list keeps who removed whose comment on which entry (not its text, which may be what
    had to go)."""
    with _writer(comment.session):
        replies = comment.replies.count() if comment.parent_id is None else 0
        author = comment.author.get_username() if comment.author_id else "a deleted user"
        record_audit(
            user, AuditEvent.DELETE_COMMENT, comment.session, target=comment.entry_id,
            what=f"Deleted a comment by {author} on entry {comment.entry_id}"
            + (f" and its {replies} repl{'y' if replies == 1 else 'ies'}" if replies else ""),
        )  # fmt: skip
        comment.delete()


def resolve_thread(comment, user, resolved: bool = True):
    """Mark the thread of ``comment`` resolved (or open again)."""
    root = comment if comment.parent_id is None else comment.parent
    with _writer(root.session):
        root.resolved_by = user if resolved else None
        root.resolved_at = timezone.now() if resolved else None
        root.save(update_fields=["resolved_by", "resolved_at"])
    return root


def set_entry_review(session: Session, user, entry_id: str, status: str):
    """Approve or flag an entry (``""`` clears its status); one status per entry."""
    EntryReview, _ = _review_models()
    if status and status not in dict(EntryReview.STATUSES):
        raise ValueError(f"unknown review status {status!r}")
    with _writer(session):
        if not status:
            EntryReview.objects.filter(session=session, entry_id=entry_id).delete()
            return None
        review, _ = EntryReview.objects.update_or_create(
            session=session, entry_id=entry_id, defaults={"status": status, "by": user}
        )
        return review
