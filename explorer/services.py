"""Every write to stored sessions, and the signals that follow it.

One writer per session (SPEC section 9.3): a process lock serialises threads of this process,
the transaction (``BEGIN IMMEDIATE`` on SQLite, a row lock on PostgreSQL) serialises
processes. Inside it the engine's ``SessionManager`` appends through ``DatabaseStorage``,
loaded with only the header and the path to the writer's cursor, so an edit on a 50,000-entry
session never reads the whole session. Signals are sent after the commit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction

from explorer import signals, store
from explorer.models import Entry, Leaf, Session
from explorer.session.sentinel import UNSET

__all__ = [
    "AppendResult",
    "add_context_edit",
    "append_via_manager",
    "branch_session",
    "branch_with_summary",
    "compact_now",
    "delete_session",
    "fork_session",
    "move_cursor",
    "notify_import",
    "rename_session",
    "session_lock",
    "set_label",
]

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
    with session_lock(session.session_id), transaction.atomic():
        yield _lock_row(session)


@dataclass
class AppendResult:
    session: Session
    entries: list[Entry] = field(default_factory=list)
    leaf: Leaf | None = None
    value: Any = None

    @property
    def entry(self) -> Entry | None:
        return self.entries[-1] if self.entries else None


def _manager_for(
    session: Session, leaf_id: str | None, author, path_only: bool = True, targets: tuple = ()
) -> tuple[Any, store.DatabaseStorage]:
    """A manager with its leaf at ``leaf_id`` that knows the header, the path to it and the
    ``targets`` (entries an operation names) — or the whole session when not ``path_only``."""
    from explorer.session.errors import SessionError
    from explorer.session.manager import SessionManager

    storage = store.DatabaseStorage(
        session, author=author, view_leaf=leaf_id, path_only=path_only, extra_ids=targets
    )
    manager = SessionManager.from_storage(storage, cwd=session.cwd or None)
    if leaf_id is None:
        manager.reset_leaf()
    elif manager.get_entry(leaf_id) is None:
        raise SessionError(f"Entry {leaf_id} not found")
    else:
        manager.branch(leaf_id)  # extra entries or a whole-session read move the file's leaf
    return manager, storage


def _resolve_leaf(session: Session, user, leaf_id) -> str | None:
    if leaf_id is UNSET:
        return store.cursor_for(session, user).entry_id
    return leaf_id


def append_via_manager(
    session: Session,
    user,
    leaf_id: Any,
    fn: Callable[[Any], Any],
    *,
    source: str = "edit",
    move_cursor: bool = True,
    path_only: bool = True,
    targets: tuple = (),
) -> AppendResult:
    """Run ``fn(manager)`` with the manager's leaf at ``leaf_id`` (``UNSET``: the user's
    cursor; ``None``: no leaf, the next append is a new root) and store what it appends.

    ``targets``: ids of other entries ``fn`` refers to (the manager loads only the path and
    these). The user's cursor follows the manager's new leaf. Engine errors
    (``SessionError``) propagate with nothing written.
    """
    last_error: Exception | None = None
    # The process lock spans the transaction, the signals sent at its commit and the final
    # refresh: every database access of a write happens while this thread is the writer.
    with session_lock(session.session_id):
        for _attempt in range(5):
            try:
                with transaction.atomic():
                    locked = _lock_row(session)
                    target = _resolve_leaf(locked, user, leaf_id)
                    manager, storage = _manager_for(locked, target, user, path_only, targets)
                    value = fn(manager)
                    leaf = None
                    if (
                        move_cursor
                        and user is not None
                        and getattr(user, "is_authenticated", False)
                    ):
                        leaf = store.cursor_for(locked, user)
                        leaf.entry_id = manager.get_leaf_id()
                        leaf.save(update_fields=["entry_id", "updated"])
                    result = AppendResult(locked, list(storage.appended), leaf, value)
                    _on_commit_appended(result, user, source)
                session.refresh_from_db()
                return result
            except store.IdCollision as exc:  # an 8-hex id already used off this path
                last_error = exc
    raise RuntimeError(f"could not allocate a unique entry id: {last_error}")


def _on_commit_appended(result: AppendResult, user, source: str) -> None:
    session, entries, leaf = result.session, result.entries, result.leaf

    def send() -> None:
        if entries:
            signals.entries_appended.send(
                sender=Session, session=session, entries=entries, source=source
            )
        if leaf is not None:
            signals.cursor_moved.send(sender=Session, session=session, leaf=leaf, user=user)

    transaction.on_commit(send)


def add_context_edit(
    session: Session, user, target_id: str, replacement: Any, *, leaf_id: Any = UNSET
) -> AppendResult:
    """Append a ``context_edit`` (``replacement`` None omits the target, or ``{"content": …}``)."""
    return append_via_manager(
        session,
        user,
        leaf_id,
        lambda m: m.append_context_edit(target_id, replacement),
        targets=(target_id,),
    )


def set_label(
    session: Session, user, target_id: str, label: str | None, *, leaf_id: Any = UNSET
) -> AppendResult:
    """Append a ``label`` entry; ``None`` or ``""`` clears the label."""
    return append_via_manager(
        session,
        user,
        leaf_id,
        lambda m: m.append_label_change(target_id, label),
        targets=(target_id,),
    )


def rename_session(session: Session, user, name: str, *, leaf_id: Any = UNSET) -> AppendResult:
    """Append a ``session_info`` entry (the engine sanitises the name)."""
    return append_via_manager(session, user, leaf_id, lambda m: m.append_session_info(name))


def branch_with_summary(
    session: Session,
    user,
    branch_from_id: str | None,
    summary: str,
    *,
    details: Any = None,
    from_hook: bool | None = None,
    usage: Any = None,
    leaf_id: Any = UNSET,
) -> AppendResult:
    """Leave the current route for ``branch_from_id`` with a ``branch_summary`` entry; its
    ``fromId`` is the cursor the user was on (``leaf_id``)."""
    return append_via_manager(
        session,
        user,
        leaf_id,
        lambda m: m.branch_with_summary(branch_from_id, summary, details, from_hook, usage),
        targets=(branch_from_id,) if branch_from_id else (),  # may be on another route
    )


def append_message(
    session: Session, user, message: dict, *, leaf_id: Any = UNSET, source: str = "turn"
) -> AppendResult:
    """Append one agent message (used by the turn runner)."""
    return append_via_manager(
        session, user, leaf_id, lambda m: m.append_message(message), source=source
    )


def compact_now(
    session: Session,
    user,
    *,
    leaf_id: Any = UNSET,
    summarizer=None,
    settings=None,
    custom_instructions: str | None = None,
) -> AppendResult:
    """Compact the path at ``leaf_id`` with the engine. The summary is computed outside the
    writer lock (a model call may take minutes); the compaction is then appended at that same
    entry, so concurrent appends elsewhere do not interfere."""
    from explorer.session import compaction, tokens
    from explorer.session.errors import SessionError

    target = _resolve_leaf(session, user, leaf_id)
    path = store.path_to(session, target)
    prep = compaction.prepare_compaction(path, settings or tokens.DEFAULT_COMPACTION_SETTINGS)
    if prep is None:
        if path and path[-1].get("type") == "compaction":
            raise SessionError("Already compacted")
        raise SessionError("Nothing to compact (session too small)")
    if summarizer is None:
        from explorer.session.summarizers import summarizer_from_env

        summarizer = summarizer_from_env()
    result = compaction.compact(prep, summarizer, custom_instructions=custom_instructions)
    return append_via_manager(
        session,
        user,
        target,
        lambda m: m.append_compaction(
            result.summary,
            result.first_kept_entry_id,
            result.tokens_before,
            result.details,
            False,
            result.usage,
        ),
        source="compaction",
    )


def move_cursor(session: Session, user, entry_id: str | None) -> Leaf:
    """Point the user's cursor at ``entry_id`` (None: before the first entry). Appends
    nothing, like the engine's ``branch`` / ``reset_leaf``."""
    from explorer.session.errors import SessionError

    if (
        entry_id is not None
        and not Entry.objects.filter(session=session, entry_id=entry_id).exists()
    ):
        raise SessionError(f"Entry {entry_id} not found")
    with transaction.atomic():
        leaf = store.cursor_for(session, user)
        leaf.entry_id = entry_id
        leaf.save(update_fields=["entry_id", "updated"])
        transaction.on_commit(
            lambda: signals.cursor_moved.send(sender=Session, session=session, leaf=leaf, user=user)
        )
    return leaf


def notify_import(result: store.ImportResult, source: str = "import") -> None:
    """Signals for an import that has committed."""
    session = result.session
    if session is None:
        return

    def send() -> None:
        if result.created:
            signals.session_created.send(sender=Session, session=session, source=source)
        if result.added:
            entries = result.new_entries
            if entries is None:
                entries = _newest_entries(session, result.added)
            signals.entries_appended.send(
                sender=Session, session=session, entries=entries, source=source
            )

    transaction.on_commit(send)


def _newest_entries(
    session: Session, added: int, *, limit: int = 200, max_bytes: int = 8 * 1024 * 1024
) -> list[Entry]:
    """The newest rows of a big import, bounded in count and in payload size, so listeners
    never pull a whole 200 MB import into memory."""
    picked: list[int] = []
    total = 0
    rows = Entry.objects.filter(session=session).order_by("-position").values_list("pk", "size")
    for pk, size in rows[: min(added, limit)]:
        if picked and total + size > max_bytes:
            break
        picked.append(pk)
        total += size
    return list(Entry.objects.filter(pk__in=picked).order_by("position"))


def import_file(
    path: str, *, source_path: str | None = None, user=None, **kwargs
) -> store.ImportResult:
    """Import a file from disk under the single-writer lock of its session."""
    with open(path, "rb") as fh:
        first = fh.read(1024 * 1024)
    header, _i, _l, _p = store._find_header(first)
    key = header["id"] if header else "-"
    with session_lock(key):
        return store.import_file(path, source_path=source_path, user=user, **kwargs)


def import_bytes(data: bytes, *, source_path: str = "", user=None, **kwargs) -> store.ImportResult:
    """Import under the single-writer lock of the file's session."""
    header, _i, _l, _p = store._find_header(data)
    key = header["id"] if header else "-"
    with session_lock(key):
        return store.import_bytes(data, source_path=source_path, user=user, **kwargs)


def delete_session(session: Session, user) -> None:
    pk, session_id = session.pk, session.session_id
    with _writer(session) as locked:
        locked.delete()
        transaction.on_commit(
            lambda: signals.session_deleted.send(
                sender=Session, session_pk=pk, session_id=session_id
            )
        )


def fork_session(session: Session, user, *, cwd: str | None = None) -> Session:
    """A new stored session holding every entry of this one under a new header (the
    ``fork_from`` semantics)."""
    data = store.fork_bytes(session, cwd=cwd)
    result = import_bytes(data, source_path="", user=user, signal_source="fork")
    if not result.ok or result.session is None:
        raise ValueError("; ".join(str(p) for p in result.errors))
    return result.session


def branch_session(session: Session, user, leaf_id: str) -> Session:
    """A new stored session holding only the path to ``leaf_id`` (``create_branched_session``)."""
    data = store.branch_bytes(session, leaf_id)
    result = import_bytes(data, source_path="", user=user, signal_source="branch")
    if not result.ok or result.session is None:
        raise ValueError("; ".join(str(p) for p in result.errors))
    return result.session
