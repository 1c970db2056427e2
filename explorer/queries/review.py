"""The Review tab: comment threads on entries and their counts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count

from explorer.models import Session
from explorer.queries.keep import allowed_fingerprints
from explorer.titles import shown_text

# ---------------------------------------------------------------------------------------------
# Review comments (site data about entries): shown masked and as sanitised markdown


def _comment_row(c: Any, allow: frozenset[str]) -> dict[str, Any]:
    from explorer.rendering import render_markdown

    body = shown_text(c.body, allow)
    return {
        "pk": c.pk,
        "entry_id": c.entry_id,
        "author": c.author.get_username() if c.author else "(deleted user)",
        "author_id": c.author_id,
        "created": c.created,
        "edited": c.edited,
        "text": body,
        "html": render_markdown(body),
    }


def review_threads(
    session: Session, *, entry_id: str | None = None, state: str = ""
) -> list[dict[str, Any]]:
    """Threads of a session (or of one entry), oldest first, each with its replies.
    ``state`` "open" or "resolved" filters; comments are masked and rendered."""
    from explorer.models import ReviewComment

    roots = ReviewComment.objects.filter(session=session, parent=None).select_related(
        "author", "resolved_by"
    )
    if entry_id is not None:
        roots = roots.filter(entry_id=entry_id)
    if state == "open":
        roots = roots.filter(resolved_at__isnull=True)
    elif state == "resolved":
        roots = roots.filter(resolved_at__isnull=False)
    roots = list(roots[:500])
    replies: dict[int, list[Any]] = {}
    for r in ReviewComment.objects.filter(parent__in=roots).select_related("author"):
        replies.setdefault(r.parent_id, []).append(r)
    allow = allowed_fingerprints(session)
    return [
        {
            **_comment_row(root, allow),
            "resolved": root.resolved_at is not None,
            "resolved_by": root.resolved_by.get_username() if root.resolved_by else "",
            "resolved_at": root.resolved_at,
            "replies": [_comment_row(r, allow) for r in replies.get(root.pk, [])],
        }
        for root in roots
    ]


def review_counts(session: Session) -> dict[str, Any]:
    """Open and resolved threads, and comments per entry (the transcript's badges)."""
    from explorer.models import ReviewComment

    rows = ReviewComment.objects.filter(session=session)
    per_entry = dict(rows.values("entry_id").annotate(n=Count("id")).values_list("entry_id", "n"))
    open_n = open_thread_count(session)
    resolved = rows.filter(parent=None).count() - open_n
    return {"open": open_n, "resolved": resolved, "by_entry": per_entry}


def entry_reviews(session: Session, ids: Iterable[str] | None = None) -> dict[str, dict]:
    """Entry id → {status, by, at} for the entries that have a review status."""
    from explorer.models import EntryReview

    rows = EntryReview.objects.filter(session=session).select_related("by")
    if ids is not None:
        rows = rows.filter(entry_id__in=list(ids))
    return {
        r.entry_id: {"status": r.status, "by": r.by.get_username() if r.by else "", "at": r.at}
        for r in rows
    }


def get_comment(session: Session, comment_pk: int) -> Any:
    from explorer.models import ReviewComment

    return ReviewComment.objects.filter(session=session, pk=comment_pk).first()


def comment_counts(session: Session, ids: Iterable[str]) -> dict[str, int]:
    """Entry id → comments on it, for the given entries (a transcript window's badges)."""
    from explorer.models import ReviewComment

    wanted = list(dict.fromkeys(ids))
    out: dict[str, int] = {}
    for k in range(0, len(wanted), 500):
        rows = (
            ReviewComment.objects.filter(session=session, entry_id__in=wanted[k : k + 500])
            .values("entry_id")
            .annotate(n=Count("id"))
            .values_list("entry_id", "n")
        )
        out.update(rows)
    return out


def open_thread_count(session: Session) -> int:
    """Open review threads of a session (the Review tab's title): one count query."""
    from explorer.models import ReviewComment

    return ReviewComment.objects.filter(
        session=session, parent=None, resolved_at__isnull=True
    ).count()
