"""One writer per session (SPEC section 9.3): a process lock serialises threads of this
process, the transaction (``BEGIN IMMEDIATE`` on SQLite, a row lock on PostgreSQL)
serialises processes. Every write module takes its lock through :func:`session_lock` or
:func:`_writer`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction

from explorer import queries
from explorer.models import Session

_registry_lock = threading.Lock()
_locks: dict[str, threading.RLock] = {}


def _lock_for(key: str) -> threading.RLock:
    with _registry_lock:
        lock = _locks.get(key)
        if lock is None:
            lock = _locks[key] = threading.RLock()
        return lock


@contextmanager
def session_lock(session_id: str) -> Iterator[None]:
    """The in-process half of the single-writer rule (by header id)."""
    lock = _lock_for(session_id)
    with lock:
        yield


def _lock_row(session: Session) -> Session:
    """Inside a transaction: the session row, locked on databases that can (PostgreSQL);
    SQLite's ``BEGIN IMMEDIATE`` already holds the write lock."""
    if connection.features.has_select_for_update:
        return Session.objects.select_for_update().get(pk=session.pk)
    return Session.objects.get(pk=session.pk)


@contextmanager
def _writer(session: Session) -> Iterator[Session]:
    try:
        with session_lock(session.session_id), transaction.atomic():
            yield _lock_row(session)
    finally:
        queries.forget_reads()  # what this request read before the write is not read again
