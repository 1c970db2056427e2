"""Secret findings of a session: found as lines are imported, for the header as well as
the entries, and found again when the rules change.
"""

from __future__ import annotations

from typing import Any

from explorer import conf
from explorer.models import Entry, SecretFinding, Session
from explorer.secrets import RULES_VERSION, scan_entry
from explorer.session import jsonfmt


def findings_for(
    session: Session, entry_id: str, line_no: int, value: Any, key: bytes
) -> list[SecretFinding]:
    """Unsaved finding rows for one entry: where each secret is, never the secret."""
    return [
        SecretFinding(
            session=session,
            entry_id=entry_id[:200],
            line_no=line_no,
            kind=f.kind[:64],
            path=f.path,
            start=f.start,
            end=f.end,
            fingerprint=f.fingerprint,
            preview=f.preview,
            rules_version=f.rules_version,
        )
        for f in scan_entry(value, key=key)
    ]


# The entry id of a finding in the session's header (the header is no entry): its cwd or
# parentSession may hold a secret as well as any entry.
HEADER_FINDING = ""


def header_findings(session: Session, key: bytes) -> list[SecretFinding]:
    """Unsaved finding rows for the session's header line (``cwd``, ``parentSession`` and
    whatever else a file writes there)."""
    try:
        header = jsonfmt.loads(session.header_raw)
    except ValueError:
        return []
    if not isinstance(header, dict):
        return []
    return findings_for(session, HEADER_FINDING, session.header_position + 1, header, key)


def secrets_current(session: Session, *, scanned: bool = False) -> bool:
    """Make the session's findings match the current rules; True when it rescanned.

    ``scanned``: every entry was just scanned by the import (a new session), so only the
    version is recorded. Runs inside the caller's transaction.
    """
    if session.secrets_rules == RULES_VERSION:
        return False
    if not scanned:
        rescan_session(session)
    session.secrets_rules = RULES_VERSION
    Session.objects.filter(pk=session.pk).update(secrets_rules=RULES_VERSION)
    return not scanned


def rescan_session(session: Session) -> int:
    """Scan every stored entry again with the current rules; decisions survive.

    A new finding takes the status of the old one at the same (entry id, path,
    fingerprint), so a false positive stays one after a rules change. Returns the count.
    """
    key = conf.secrets_key()
    old = {
        (f.entry_id, f.path, f.fingerprint): (f.status, f.status_by_id)
        for f in SecretFinding.objects.filter(session=session)
    }
    new: list[SecretFinding] = []
    for f in header_findings(session, key):
        f.status, f.status_by_id = old.get(
            (f.entry_id, f.path, f.fingerprint), (SecretFinding.OPEN, None)
        )
        new.append(f)
    rows = Entry.objects.filter(session=session).order_by("position")
    for entry_id, line_no, raw in rows.values_list("entry_id", "line_no", "raw").iterator(500):
        try:
            value = jsonfmt.loads(raw)
        except ValueError:
            continue
        for f in findings_for(session, entry_id, line_no, value, key):
            f.status, f.status_by_id = old.get(
                (f.entry_id, f.path, f.fingerprint), (SecretFinding.OPEN, None)
            )
            new.append(f)
    SecretFinding.objects.filter(session=session).delete()
    SecretFinding.objects.bulk_create(new, batch_size=500)
    Session.objects.filter(pk=session.pk).update(secrets_rules=RULES_VERSION)
    session.secrets_rules = RULES_VERSION
    return len(new)
