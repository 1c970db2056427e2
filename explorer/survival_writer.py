"""Survival checks computed and stored when a compaction or branch summary arrives: the
write side of :mod:`explorer.survival_store` (which reads them), called by the two entry
writers (the import's end, appends). Apart from the table's module so that the reads the
Compactions tab makes (``queries.compactions``, which computes a check when none is stored)
and the writes that store its answer do not import each other."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.db import DatabaseError, transaction

from explorer.queries.compactions import branch_summary_check, compaction_check
from explorer.queries.keep import allowed_fingerprints, read_memo
from explorer.queries.routes import light_path
from explorer.survival_store import CHECKED_TYPES, encode, mask_stamp

logger = logging.getLogger(__name__)


def write_checks(session: Any, entries: Iterable[tuple[str, str]]) -> int:
    """Store the checks of the just-stored ``entries`` ((entry id, type), compactions and
    branch summaries; others are skipped) of ``session``, whose counters are up to date.
    Each costs what its detail's check costs on the page, once: a walk of its route and the
    newest replaced entries it reads. Never fails the write it follows: a check that
    cannot be computed or stored is logged and left to the page. Returns how many rows
    were written."""
    from explorer.models import SurvivalCheck

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
