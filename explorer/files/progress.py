"""Progress of a running import, and imports that were abandoned.

A running import reports its lines through the :func:`reporting` context; a big new session
commits in batches while hidden, and one whose process is gone or that stopped committing is
abandoned: :func:`clear_abandoned` deletes its hidden rows.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from explorer.models import Session

logger = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------
# Progress of a running import


@dataclass
class ImportProgress:
    """How far the running import got: entries stored so far and bytes of the file read.

    A big upload takes minutes; the page shows these figures (not an indeterminate bar), so
    the importer reports them to ``report`` at most every ``every`` seconds while it streams.
    """

    total: int = 0
    entries: int = 0
    bytes: int = 0
    phase: str = "importing"
    report: Callable[[ImportProgress], None] | None = None
    every: float = 0.25
    _last: float = 0.0

    def tick(self, *, force: bool = False) -> None:
        if self.report is None:
            return
        now = time.monotonic()
        if force or now - self._last >= self.every:
            self._last = now
            self.report(self)


_progress: ContextVar[ImportProgress | None] = ContextVar("import_progress", default=None)


@contextmanager
def reporting(progress: ImportProgress | None) -> Iterator[None]:
    """Let the imports run inside this block report to ``progress``."""
    token = _progress.set(progress)
    try:
        yield
    finally:
        _progress.reset(token)


# An import whose process is gone, or that has not committed a batch for this long, is
# abandoned: its hidden rows are deleted by the next import or by ``serve`` starting.
IMPORT_STALE_SECONDS = 600


def import_owner() -> str:
    """Who runs an import: this host and process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _abandoned(session: Session) -> bool:
    host, _, pid = session.import_owner.rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True  # killed (kill -9, a crash, a full disk that ended the process)
        except PermissionError:
            pass
    beat = session.import_heartbeat or session.created
    return (timezone.now() - beat).total_seconds() > IMPORT_STALE_SECONDS


def discard(session: Session) -> None:
    """Delete a session whose first import did not finish (its committed batches)."""
    with transaction.atomic():
        Session.every.filter(pk=session.pk).delete()


def clear_abandoned() -> int:
    """Delete the hidden rows of imports that will never finish; returns how many."""
    gone = 0
    for session in Session.every.filter(state=Session.IMPORTING):
        if _abandoned(session):
            logger.warning("removing the unfinished import of session %s", session.session_id)
            discard(session)
            gone += 1
    return gone
