"""Secret findings: a status change, a reveal (audited) and a rescan."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from explorer import conf, files, secrets
from explorer.models import AuditEvent, Entry, SecretFinding, SecretReveal, Session
from explorer.services.audit import record_audit
from explorer.services.locks import _writer
from explorer.session import jsonfmt

# ---------------------------------------------------------------------------------------------
# Secrets found in sessions: decisions, audited reveals, rescans


def set_finding_status(finding: SecretFinding, user, status: str) -> SecretFinding:
    """Record the team's decision on a finding. A false positive is shown in clear on every
    page from then on (the masking edge reads the statuses fresh); open and rotated stay
    masked. Nothing is appended to the session, so nothing is broadcast."""
    if status not in dict(SecretFinding.STATUSES):
        raise ValueError(f"unknown status {status!r}")
    with _writer(finding.session):
        SecretFinding.objects.filter(pk=finding.pk).update(
            status=status, status_by=user, updated=timezone.now()
        )
    finding.refresh_from_db()
    return finding


def reveal_finding(finding: SecretFinding, user, reason: str = "") -> str | None:
    """The secret of one finding, for the one response that shows it; the reveal is
    recorded first (with the reason its reader gave, on the finding and in the audit list),
    so no secret is ever shown without an audit row. None when the entry no longer holds
    that secret at that place (a stale finding reveals nothing)."""
    with transaction.atomic():
        SecretReveal.objects.create(finding=finding, user=user, reason=reason)
        where = f"entry {finding.entry_id}" if finding.entry_id else "the session header"
        record_audit(
            user, AuditEvent.REVEAL, finding.session, target=f"finding {finding.pk}",
            what=f"Revealed a {finding.kind} in {where} (line {finding.line_no}, {finding.path})",
            reason=reason,
        )  # fmt: skip
    if finding.entry_id == files.HEADER_FINDING:  # a secret in the header (its cwd, say)
        raw = (
            Session.objects.filter(pk=finding.session_id)
            .values_list("header_raw", flat=True)
            .first()
        )
    else:
        raw = (
            Entry.objects.filter(session_id=finding.session_id, entry_id=finding.entry_id)
            .values_list("raw", flat=True)
            .first()
        )
    if raw is None:
        return None
    stored = secrets.Finding(
        kind=finding.kind,
        path=finding.path,
        start=finding.start,
        end=finding.end,
        preview=finding.preview,
        fingerprint=finding.fingerprint,
        rules_version=finding.rules_version,
    )
    try:
        entry = jsonfmt.loads(raw)
    except ValueError:
        entry = raw
    return secrets.reveal(entry, stored, key=conf.secrets_key())


def rescan_secrets(session: Session, *, force: bool = False) -> int | None:
    """Bring a session's findings up to the current rules (statuses survive); returns the
    number of findings, or None when they were already current and ``force`` is off."""
    with _writer(session) as locked:
        if not force and locked.secrets_rules == secrets.RULES_VERSION:
            return None
        count = files.rescan_session(locked)
    session.secrets_rules = secrets.RULES_VERSION
    return count
