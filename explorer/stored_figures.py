"""Whole-session figures stored with the session, the tier under the process's copy and the
shared cache that ``queries.grown`` reads.

A cold reader (the first request after an import, a restart, a cleared cache) of a
50,000-entry session used to build the tree shape, the skeleton and the tree checks from
every row: 0.1-0.3 s each, pure Python proportional to the session. The import stores them
(:func:`explorer.queries.store_figures`) and a cold reader loads one row and extends it by
the entries appended since, which is what "extended on append, not rebuilt" means here.

A stored figure is never wrong, only behind: a session only grows, and a figure stored up
to position P stays right for the entries up to P. So the rows need no stamps and survive
cache clears; a copy is written again once the reader's copy is :data:`STORE_LAG` positions
ahead of it, so a cold reader extends by a bounded number of entries. Writing is best
effort: a reader that cannot write (a locked SQLite file, a read-only replica) goes on with
its answer, and the next one tries again.

Only sessions of :data:`STORE_FROM` entries or more are stored: below that, building the
figure costs about what loading it does.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.db import DatabaseError, IntegrityError, connection, transaction
from django.utils import timezone

from explorer.models import Session, StoredFigure
from explorer.session.gcpause import gc_paused

logger = logging.getLogger(__name__)

STORE_FROM = 2000  # entries a session needs before its figures are stored
# Part of every stored name. Raise it when what a stored figure holds changes meaning or
# form (a class pickled differently, a figure counted another way), or when a migration
# changes stored rows in place: copies under the old number are then never read again.
FORMAT = 1
STORE_LAG = 512  # positions a reader's copy may be ahead of the stored one before a rewrite
# How long a reader's write waits for SQLite's write lock (milliseconds). A reader stores a
# copy on the way to its answer, while an import may hold the lock for minutes: it must not
# wait the connection's 30 s for a copy the next reader can write as well.
READER_WAIT_MS = 50
# Figures that depend on one entry's ancestors (``queries.kept_below``: a branch
# summary's detail, a compared pair of routes) are stored per entry, so a session would gain a row
# for every pair ever compared: the most recently written this many are kept per session,
# and a dropped one is built again when asked for (it can never be wrong, only missing).
BELOW_KEPT = 64
BELOW = "below:"  # the name prefix of those figures

_patient: ContextVar[bool] = ContextVar("stored_figures_patient", default=False)


@contextmanager
def patiently() -> Iterator[None]:
    """Writes in this block wait for the database as every other write does: the import's
    own stores (:func:`explorer.queries.store_figures`), which no reader is waiting on."""
    token = _patient.set(True)
    try:
        yield
    finally:
        _patient.reset(token)


@contextmanager
def _briefly() -> Iterator[None]:
    """SQLite's busy timeout cut to :data:`READER_WAIT_MS` for one write of a reader (not
    inside a transaction, which would hold the lock already, nor on other databases, whose
    writers lock rows, not the file)."""
    if _patient.get() or connection.vendor != "sqlite" or connection.in_atomic_block:
        yield
        return
    connection.ensure_connection()
    raw = connection.connection
    before = raw.execute("PRAGMA busy_timeout").fetchone()[0]
    raw.execute(f"PRAGMA busy_timeout = {int(READER_WAIT_MS)}")
    try:
        yield
    finally:
        raw.execute(f"PRAGMA busy_timeout = {int(before)}")


def _stored(name: str) -> str:
    return f"{FORMAT}:{name}"


def wanted(session: Session) -> bool:
    """Whether ``session`` is big enough for its figures to be stored."""
    return (session.entry_count or 0) >= STORE_FROM


def load(session: Session, name: str, last: int) -> tuple[int, Any] | None:
    """(position, figure) stored under ``name``, or None when there is none usable (none
    stored, a copy ahead of ``last``, a copy that no longer unpickles after an upgrade)."""
    row = (
        StoredFigure.objects.filter(session=session, name=_stored(name), upto__lte=last)
        .values_list("upto", "data")
        .first()
    )
    if row is None:
        return None
    upto, data = row
    try:
        # Paused collector: a young collection's passes over the 50,000 objects being made
        # would cost as much as the unpickling itself, and what is made here is kept.
        with gc_paused():
            return upto, pickle.loads(data)
    except Exception:  # an older version's classes: build afresh, the next write mends it
        logger.warning("stored figure %s of session %s does not load", name, session.pk)
        return None


def position(session: Session, name: str) -> int:
    """The position the stored copy of ``name`` covers up to, -1 when none is stored: what a
    process that adopted a figure from the shared cache checks before writing its own."""
    upto = (
        StoredFigure.objects.filter(session=session, name=_stored(name))
        .values_list("upto", flat=True)
        .first()
    )
    return -1 if upto is None else upto


def store(session: Session, name: str, upto: int, value: Any) -> bool:
    """Store ``value`` as ``name`` up to ``upto`` unless a copy at least as new is there.

    Figures named ``kind|variant`` (a masking digest) replace the other variants of their
    kind, so a session keeps one copy per kind. False when it could not be written."""
    # Not compressed: decompressing the 2-3 MB of a 50,000-entry figure cost a cold reader
    # a quarter of what unpickling it does, for rows the database holds either way.
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    name = _stored(name)
    kind = name.split("|", 1)[0]
    try:
        with _briefly(), transaction.atomic():
            done = StoredFigure.objects.filter(session=session, name=name, upto__lt=upto).update(
                upto=upto, data=data, written=timezone.now()
            )
            if not done and not StoredFigure.objects.filter(session=session, name=name).exists():
                StoredFigure.objects.create(session=session, name=name, upto=upto, data=data)
            if kind != name:
                StoredFigure.objects.filter(session=session, name__startswith=kind + "|").exclude(
                    name=name
                ).delete()
            # Copies of an earlier FORMAT are never read again.
            StoredFigure.objects.filter(session=session).exclude(
                name__startswith=f"{FORMAT}:"
            ).delete()
            if name.startswith(_stored(BELOW)):
                _prune_below(session)
        return True
    except IntegrityError:  # another worker stored it first: its copy serves as well
        return False
    except DatabaseError:
        logger.warning(
            "stored figure %s of session %s not written", name, session.pk, exc_info=True
        )
        return False


def _prune_below(session: Session) -> None:
    """Drop all but the :data:`BELOW_KEPT` most recently written per-entry figures."""
    stale = list(
        StoredFigure.objects.filter(session=session, name__startswith=_stored(BELOW))
        .order_by("-written", "-pk")
        .values_list("pk", flat=True)[BELOW_KEPT:]
    )
    if stale:
        StoredFigure.objects.filter(pk__in=stale).delete()
