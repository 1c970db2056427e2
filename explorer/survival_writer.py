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

from explorer.queries.compactions import (
    CheckReads,
    branch_summary_check,
    compaction_check,
    compare_summaries,
    database_reads,
)
from explorer.queries.keep import allowed_fingerprints, read_memo
from explorer.survival_store import CHECKED_TYPES, encode, encode_previous, mask_stamp

logger = logging.getLogger(__name__)

# From this many checks on, the session's index rows are read once and every route walked
# in memory (``explorer.survival_batch``): an import's end. Fewer (an append, a grown file
# bringing a compaction or two) walk their routes in the database.
BATCH_FROM = 8


def write_checks(session: Any, entries: Iterable[tuple[str, str]], *, scanned: bool = False) -> int:
    """Store the checks of the just-stored ``entries`` ((entry id, type), compactions and
    branch summaries; others are skipped) of ``session``: :func:`compute_checks`, then
    :func:`store_checks`. Returns how many rows were written."""
    return store_checks(session, compute_checks(session, entries, scanned=scanned))


def compute_checks(
    session: Any,
    entries: Iterable[tuple[str, str]],
    *,
    scanned: bool = False,
    batch: bool = False,
) -> list[Any]:
    """The unsaved check rows of the stored ``entries`` ((entry id, type), compactions and
    branch summaries; others are skipped) of ``session``. Each reads what its detail's
    check reads on the page, once: its route and the newest replaced entries; many at once
    share those reads (:data:`BATCH_FROM`). ``scanned``: every entry of the session was
    just scanned for secrets by the current rules and its findings stored (a new session's
    import). ``batch``: share the reads however few the checks (the session's counters may
    not be up to date yet, which a route walked in the database needs). Reads only: a new
    session's import calls it before its last transaction (``batch=True``), so the write
    lock is not held while the checks read. A check that cannot be computed is logged and
    left to the page."""
    from explorer.models import SurvivalCheck

    wanted = [(entry_id, kind) for entry_id, kind in entries if kind in CHECKED_TYPES]
    if not wanted:  # most appends
        return []
    rows: list[SurvivalCheck] = []
    with read_memo():  # the session's false positives read once, not per entry
        mask = mask_stamp(allowed_fingerprints(session))
        reads = _reads(session, len(wanted), scanned, batch)
        for entry_id, kind in wanted:
            _check(session, entry_id, kind, mask, rows, reads)
    return rows


def store_checks(session: Any, rows: list[Any]) -> int:
    """Insert the rows :func:`compute_checks` made; never fails the write it follows (a
    failure is logged, the page checks those entries itself). Returns how many."""
    from explorer.models import SurvivalCheck

    if not rows:
        return 0
    try:
        with transaction.atomic():  # a savepoint: the write it follows goes on
            SurvivalCheck.objects.bulk_create(rows, ignore_conflicts=True)
    except DatabaseError:
        logger.exception("survival checks of session %s not stored", session.pk)
        return 0
    return len(rows)


def _reads(session: Any, count: int, scanned: bool, batch: bool) -> CheckReads:
    if count < BATCH_FROM and not batch:
        return database_reads(session)
    from explorer.survival_batch import SessionReads

    try:
        return SessionReads(session, scanned=scanned).reads()
    except DatabaseError:  # checked on the page instead
        logger.exception("index rows of session %s not read", session.pk)
        return CheckReads(
            lines=lambda ids: {}, route=lambda entry_id: [], exists=lambda entry_id: False
        )


def _check(
    session: Any, entry_id: str, kind: str, mask: str, rows: list[Any], reads: CheckReads
) -> None:
    """Add the row of one compaction or branch summary to ``rows`` (none when it cannot be
    checked: logged, left to the page)."""
    from explorer.models import SurvivalCheck

    previous: str | None = None
    try:
        light = reads.route(entry_id)
        if not light or light[-1].entry_id != entry_id or not light[-1].pk:
            return
        if kind == "compaction":
            report = compaction_check(session, light, reads)
            summary = reads.lines([entry_id]).get(entry_id, {}).get("summary")
            text = summary if isinstance(summary, str) else ""
            previous = encode_previous(compare_summaries(reads.lines, light, len(light) - 1, text))
        else:
            report = branch_summary_check(session, light, reads)
    except Exception:  # the page checks it instead
        logger.exception("survival check of %s in session %s", entry_id, session.pk)
        return
    if report is not None:
        rows.append(
            SurvivalCheck(
                entry_id=light[-1].pk,
                session_id=session.pk,
                report=encode(report),
                mask=mask,
                previous=previous,
            )
        )
