"""The stored survival checks of compactions and branch summaries
(:class:`explorer.models.SurvivalCheck`).

A check depends only on what lies above its entry (the entries it replaced and its summary;
for a branch summary, the route it summarised), so it is computed once, when the entry is
stored (:func:`write_checks`, from an import's end and from an append), and read by every
Compactions page after (:func:`stored_report`). The values are the masked ones a page
shows, so a row holds the masking it was read with (:func:`mask_stamp`). Nothing here
writes from a page: an entry without a row, or with one read under another masking (a
finding marked a false positive since), is checked on the page, with the same figures.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from typing import Any

from django.db import DatabaseError, transaction

from explorer import conf
from explorer.analysis.compactions import SurvivalItem, SurvivalReport
from explorer.session import jsonfmt

CHECKED_TYPES = ("compaction", "branch_summary")

logger = logging.getLogger(__name__)


def encode(report: SurvivalReport) -> str:
    return jsonfmt.dumps([[i.kind, i.value, i.survived, i.partial] for i in report.items])


def decode(text: str) -> SurvivalReport:
    items = jsonfmt.loads(text)
    return SurvivalReport([SurvivalItem(str(k), str(v), bool(s), bool(p)) for k, v, s, p in items])


def mask_stamp(allowed: Iterable[str]) -> str:
    """What decides how the check's values were masked: the rules (an entry without a
    finding under them has nothing to mask), the fingerprint key and the fingerprints
    shown in clear (``allowed``: the session's findings marked false positive)."""
    from explorer.secrets import RULES_VERSION

    digest = hashlib.sha256(RULES_VERSION.encode() + b"\n" + conf.secrets_key())
    for fingerprint in sorted(allowed):
        digest.update(b"\n" + fingerprint.encode())
    return digest.hexdigest()[:32]


def stored_report(session: Any, entry_pk: int) -> SurvivalReport | None:
    """The stored check of the entry with primary key ``entry_pk``, read under the masking
    the page has now (None: not stored, or stored under another masking)."""
    from explorer.models import SurvivalCheck
    from explorer.queries.keep import allowed_fingerprints

    if not entry_pk:
        return None
    row = SurvivalCheck.objects.filter(pk=entry_pk).values_list("report", "mask").first()
    if row is None or row[1] != mask_stamp(allowed_fingerprints(session)):
        return None
    return decode(row[0])


def write_checks(session: Any, entries: Iterable[tuple[str, str]]) -> int:
    """Store the checks of the just-stored ``entries`` ((entry id, type), compactions and
    branch summaries; others are skipped) of ``session``, whose counters are up to date.
    Each costs what its detail's check costs on the page, once: a walk of its route and the
    newest replaced entries it reads. Never fails the write it follows: a check that
    cannot be computed or stored is logged and left to the page. Returns how many rows
    were written."""
    from explorer.models import SurvivalCheck
    from explorer.queries.keep import allowed_fingerprints, read_memo

    wanted = [(entry_id, kind) for entry_id, kind in entries if kind in CHECKED_TYPES]
    if not wanted:  # most appends
        return 0
    rows: list[SurvivalCheck] = []
    with read_memo():  # the session's false positives read once, not per entry
        mask = mask_stamp(allowed_fingerprints(session))
        for entry_id, kind in wanted:
            _check(session, entry_id, kind, mask, rows)
    if not rows:
        return 0
    try:
        with transaction.atomic():  # a savepoint: the write it follows goes on
            SurvivalCheck.objects.bulk_create(rows, ignore_conflicts=True)
    except DatabaseError:
        logger.exception("survival checks of session %s not stored", session.pk)
        return 0
    return len(rows)


def _check(session: Any, entry_id: str, kind: str, mask: str, rows: list[Any]) -> None:
    """Add the row of one compaction or branch summary to ``rows`` (none when it cannot be
    checked: logged, left to the page)."""
    from explorer.models import SurvivalCheck
    from explorer.queries.compactions import branch_summary_check, compaction_check
    from explorer.queries.routes import light_path

    try:
        light = light_path(session, entry_id)
        if not light or light[-1].entry_id != entry_id or not light[-1].pk:
            return
        if kind == "compaction":
            report = compaction_check(session, light)
        else:
            report = branch_summary_check(session, light)
    except Exception:  # the page checks it instead
        logger.exception("survival check of %s in session %s", entry_id, session.pk)
        return
    if report is not None:
        rows.append(
            SurvivalCheck(
                entry_id=light[-1].pk, session_id=session.pk, report=encode(report), mask=mask
            )
        )
