"""The Secrets tab: a session's findings, the overview across sessions and their counts."""

from __future__ import annotations

from django.db.models import Count, Prefetch

from explorer.models import SecretFinding, SecretReveal, Session
from explorer.queries.entries import with_first_message

# ---------------------------------------------------------------------------------------------
# Secret findings (where secrets are; never the secrets)

FINDINGS_SHOWN = 500


def session_findings(session: Session, status: str = "") -> list[SecretFinding]:
    """One session's findings in file order (at most ``FINDINGS_SHOWN``)."""
    qs = SecretFinding.objects.filter(session=session)
    if status:
        qs = qs.filter(status=status)
    qs = qs.prefetch_related(Prefetch("reveals", SecretReveal.objects.select_related("user")))
    return list(qs.order_by("line_no", "path", "start")[:FINDINGS_SHOWN])


def findings_overview(status: str = "") -> list[SecretFinding]:
    """Findings across every session, newest first, with their session (one query)."""
    qs = SecretFinding.objects.select_related("session").filter(session__state=Session.READY)
    if status:
        qs = qs.filter(status=status)
    findings = list(qs.order_by("-created", "session_id", "line_no", "pk")[:FINDINGS_SHOWN])
    # Each row names its session by its title: one query for all their first messages.
    titled = with_first_message(Session.objects.all()).in_bulk({f.session_id for f in findings})
    for f in findings:
        f.session = titled.get(f.session_id, f.session)
    return findings


def finding_counts(session: Session | None = None) -> dict[str, int]:
    """How many findings have each status (all sessions when ``session`` is None)."""
    qs = (
        SecretFinding.objects.filter(session__state=Session.READY)
        if session is None
        else SecretFinding.objects.filter(session=session)
    )
    counts = {key: 0 for key, _ in SecretFinding.STATUSES}
    for status, n in qs.values_list("status").annotate(n=Count("pk")).values_list("status", "n"):
        counts[status] = n
    return counts


def get_finding(session: Session, finding_pk: int) -> SecretFinding | None:
    return SecretFinding.objects.filter(session=session, pk=finding_pk).first()
