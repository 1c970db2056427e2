"""Whole-session figures stored with the session, the tier under the process's copy and the
shared cache that ``queries.grown`` reads.

A cold reader (the first request after an import, a restart, a cleared cache) of a
50,000-entry session used to build the skeleton and the tree checks from every row: 0.1-0.3 s
each, pure Python proportional to the session. They are stored with the session and a cold
reader loads one row and extends it, in its own memory, by the entries appended since.

Only write paths store (issue 27: no GET writes a row): the import, and every append once the
stored copies are :data:`STORE_LAG` positions behind, both through
:func:`explorer.queries.figures.refresh`, which runs the builders inside :func:`writing`. A
reader only loads: what it extends stays in its process (and the shared cache).

A stored figure is never wrong, only behind: a session only grows, and a figure stored up
to position P stays right for the entries up to P. So the rows need no stamps and survive
cache clears. Writing is best effort: a copy that cannot be written (a full disk) leaves the
older one, and the next append tries again.

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

from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone

from explorer.models import Session, StoredFigure
from explorer.session.gcpause import gc_paused

logger = logging.getLogger(__name__)

STORE_FROM = 2000  # entries a session needs before its figures are stored
# Part of every stored name. Raise it when what a stored figure holds changes meaning or
# form (a class pickled differently, a figure counted another way), or when a migration
# changes stored rows in place: copies under the old number are then never read again.
FORMAT = 1
# Positions the session may be ahead of its stored copies before a write path stores them
# again: a cold reader extends (in memory) by at most about this many entries.
STORE_LAG = 512

_writing: ContextVar[bool] = ContextVar("stored_figures_writing", default=False)


@contextmanager
def writing() -> Iterator[None]:
    """Figures built in this block are stored when their copy is behind (``queries.grown``
    stores nowhere else): entered by :func:`explorer.queries.figures.refresh`, on the write
    paths only, never by a reader."""
    token = _writing.set(True)
    try:
        yield
    finally:
        _writing.reset(token)


def writes() -> bool:
    """Whether this is a write path's :func:`writing` block."""
    return _writing.get()


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


def positions(session: Session) -> dict[str, int]:
    """The position each kind of figure is stored up to (a kind is a name before its
    ``|variant``): what a write path reads to decide whether its copies are behind, one
    query without the figures' bytes."""
    out: dict[str, int] = {}
    prefix = _stored("")
    for name, upto in StoredFigure.objects.filter(
        session=session, name__startswith=prefix
    ).values_list("name", "upto"):
        kind = name.removeprefix(prefix).split("|", 1)[0]
        out[kind] = max(upto, out.get(kind, -1))
    return out


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
        with transaction.atomic():
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
        return True
    except IntegrityError:  # another writer stored it first: its copy serves as well
        return False
    except DatabaseError:
        logger.warning(
            "stored figure %s of session %s not written", name, session.pk, exc_info=True
        )
        return False
