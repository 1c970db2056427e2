"""Every write to stored sessions; after each one, one call to ``explorer.broadcast``.

One writer per session (SPEC section 9.3): a process lock serialises threads of this process,
the transaction (``BEGIN IMMEDIATE`` on SQLite, a row lock on PostgreSQL) serialises
processes. Inside it the engine's ``SessionManager`` appends through ``DatabaseStorage``,
loaded with only the header and the path to the writer's cursor, so an edit on a 50,000-entry
session never reads the whole session. Broadcasts are scheduled for after the commit.

A newcomer looking for "where is an append written and sent" reads this module: imports
(``import_bytes`` / ``import_file`` around ``explorer.files``), form edits, follow appends,
turn messages, cursor moves, forks, deletes and the turn lock all live here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.dispatch import Signal
from django.utils import timezone

from explorer import broadcast, conf, files, queries, secrets
from explorer.models import (
    AuditEvent,
    Entry,
    EntryText,
    Leaf,
    SecretFinding,
    SecretReveal,
    Session,
    TurnLock,
)
from explorer.session import jsonfmt
from explorer.session.errors import SessionError
from explorer.session.sentinel import UNSET
from explorer.storage import DatabaseStorage, IdCollision, append_lines

__all__ = [
    "AppendResult",
    "StaleLeaf",
    "add_context_edit",
    "append_lines_verbatim",
    "append_message",
    "append_via_manager",
    "branch_session",
    "branch_with_summary",
    "compact_now",
    "store_compaction",
    "cursor_for",
    "delete_session",
    "follow_appends",
    "follow_stopped",
    "fork_session",
    "import_bytes",
    "import_file",
    "move_cursor",
    "rename_session",
    "rescan_secrets",
    "reveal_finding",
    "session_imported",
    "session_lock",
    "set_finding_status",
    "set_label",
]

_registry_lock = threading.Lock()
_locks: dict[str, threading.RLock] = {}

# Sent after an import committed and stored its figures, with ``session``: receivers (the
# views, connected in ``ExplorerConfig.ready``) store what they draw for its first reader.
session_imported = Signal()


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


# ---------------------------------------------------------------------------------------------
# Cursors


def cursor_for(session: Session, user) -> Leaf:
    """The user's navigation cursor row, created at the file's leaf on first use; anonymous
    or missing users get the file's own leaf. (Reads use ``queries.cursor_id``.)"""
    if user is None or not getattr(user, "is_authenticated", False):
        leaf = Leaf.objects.filter(session=session, name=Leaf.DEFAULT).first()
        return leaf or files.sync_default_leaf(session)
    leaf, _ = Leaf.objects.get_or_create(
        session=session,
        name=f"user:{user.pk}",
        defaults={"user": user, "entry_id": queries.default_leaf_id(session)},
    )
    return leaf


def move_cursor(session: Session, user, entry_id: str | None) -> Leaf:
    """Point the user's cursor at ``entry_id`` (None: before the first entry). Appends
    nothing, like the engine's ``branch`` / ``reset_leaf``."""
    if entry_id is not None and not queries.entry_exists(session, entry_id):
        raise SessionError(f"Entry {entry_id} not found")
    with transaction.atomic():
        leaf = cursor_for(session, user)
        leaf.entry_id = entry_id
        leaf.save(update_fields=["entry_id", "updated"])
        broadcast.cursor_moved(session, leaf, user)
    return leaf


def follow_appends(session: Session, entries: list[Entry]) -> list[Leaf]:
    """Cursors that sat on the tip of a branch follow the entries appended below it.

    Pi's leaf moves with every append; a reader whose cursor was at the end of a route
    expects the same when someone else extends it (a grown import, a followed file, another
    user's turn). A cursor on an entry that already had other children stays where it is
    (its page then says how many newer entries there are). Call inside the writing
    transaction; the moves are broadcast after the commit.
    """
    if not entries:
        return []
    new_ids = {e.entry_id for e in entries}
    attached_to: dict[str, str | None] = {}  # new entry → the old entry its chain hangs from
    for e in sorted(entries, key=lambda x: x.position):
        parent = e.parent_id
        attached_to[e.entry_id] = attached_to.get(parent) if parent in new_ids else parent
    points = {p for p in attached_to.values() if p}
    if not points:
        return []
    moved: list[Leaf] = []
    leaves = Leaf.objects.filter(session=session, entry_id__in=points).exclude(name=Leaf.DEFAULT)
    for leaf in leaves.select_related("user"):
        had_children = (
            Entry.objects.filter(session=session, parent_id=leaf.entry_id)
            .exclude(entry_id__in=new_ids)
            .exists()
        )
        if had_children:
            continue
        below = [eid for eid, point in attached_to.items() if point == leaf.entry_id]
        leaf.entry_id = below[-1]  # the newest entry of what was appended under it
        leaf.save(update_fields=["entry_id", "updated"])
        broadcast.cursor_moved(session, leaf, leaf.user)
        moved.append(leaf)
    return moved


def follow_stopped(session_pk: int, message: str) -> None:
    """The follower stopped reading a session's file: tell its viewers (nothing is written;
    the stored session stays as it was)."""
    session = Session.objects.filter(pk=session_pk).first()
    if session is not None:
        broadcast.follow_stopped(session, message)


# ---------------------------------------------------------------------------------------------
# Appends through the engine


class StaleLeaf(SessionError):
    """A write was aimed at a leaf the user's cursor has left since the page was shown.

    Two editors (or two tabs) posting at the same tip would otherwise both append: the
    second one under an entry its author never saw. The write is refused with nothing
    stored; the author reloads, sees the new entries and decides again (or asks for a
    branch at the old leaf explicitly).
    """

    def __init__(self, expected: str | None, current: str | None) -> None:
        self.expected = expected
        self.current = current
        super().__init__(
            f"The session changed while you were looking at it: your cursor moved from "
            f"{expected or '(the start)'} to {current or '(the start)'}. Nothing was "
            "written; look at the new entries and try again."
        )


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
    session: Session,
    leaf_id: str | None,
    author,
    path_only: bool = True,
    targets: tuple = (),
    lean: bool = False,
) -> tuple[Any, DatabaseStorage]:
    """A manager with its leaf at ``leaf_id`` that knows the header, the path to it and the
    ``targets`` (entries an operation names) — or the whole session when not ``path_only``,
    or only the leaf and the targets when ``lean`` (see ``DatabaseStorage``)."""
    from explorer.session.manager import SessionManager

    store = DatabaseStorage(
        session,
        author=author,
        view_leaf=leaf_id,
        path_only=path_only,
        lean=lean,
        extra_ids=targets,
    )
    manager = SessionManager.from_storage(store, cwd=session.cwd or None)
    if leaf_id is None:
        manager.reset_leaf()
    elif manager.get_entry(leaf_id) is None:
        raise SessionError(f"Entry {leaf_id} not found")
    else:
        manager.branch(leaf_id)  # extra entries or a whole-session read move the file's leaf
    return manager, store


def _resolve_leaf(session: Session, user, leaf_id) -> str | None:
    if leaf_id is UNSET:
        return cursor_for(session, user).entry_id
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
    expected_leaf: Any = UNSET,
    lean: bool = False,
) -> AppendResult:
    """Run ``fn(manager)`` with the manager's leaf at ``leaf_id`` (``UNSET``: the user's
    cursor; ``None``: no leaf, the next append is a new root) and store what it appends.

    ``targets``: ids of other entries ``fn`` refers to (the manager loads only the path and
    these; with ``lean`` only the leaf and these, for appends that need no route: labels,
    renames, context edits). The user's cursor follows the manager's new leaf. Engine errors
    (``SessionError``) propagate with nothing written.

    ``expected_leaf``: the leaf the author's page showed. The leaf is read under the row
    lock (with the next position, in ``append_lines``), and when it differs the write is
    refused with :class:`StaleLeaf`, so no entry is attached to a leaf its author did not see.
    """
    last_error: Exception | None = None
    # The process lock spans the transaction, the broadcasts sent at its commit and the final
    # refresh: every database access of a write happens while this thread is the writer.
    with session_lock(session.session_id):
        for _attempt in range(5):
            try:
                with transaction.atomic():
                    locked = _lock_row(session)
                    target = _resolve_leaf(locked, user, leaf_id)
                    if expected_leaf is not UNSET and target != expected_leaf:
                        raise StaleLeaf(expected_leaf, target)
                    manager, store = _manager_for(
                        locked, target, user, path_only, targets, lean=lean
                    )
                    value = fn(manager)
                    _refuse_model_edits_of_foreign(locked, store.appended)
                    files.index_new_entries(locked)
                    leaf = None
                    if move_cursor and user is not None and user.is_authenticated:
                        leaf = cursor_for(locked, user)
                        leaf.entry_id = manager.get_leaf_id()
                        leaf.save(update_fields=["entry_id", "updated"])
                    result = AppendResult(locked, list(store.appended), leaf, value)
                    broadcast.entries_appended(locked, result.entries, source=source)
                    if leaf is not None:
                        broadcast.cursor_moved(locked, leaf, user)
                    follow_appends(locked, result.entries)  # other readers at that tip
                session.refresh_from_db()
                return result
            except IdCollision as exc:  # an 8-hex id already used off this path
                last_error = exc
    raise RuntimeError(f"could not allocate a unique entry id: {last_error}")


# What the model sees of a Claude Code or Codex session is what its agent sent: it is edited on a
# Pi session made from one of its routes (the route's download, stored as a new session), never
# in the stored copy of the agent's file. Labels and names are site data and stay allowed.
MODEL_EDIT_TYPES = frozenset(
    {
        "message",
        "context_edit",
        "compaction",
        "branch_summary",
        "custom_message",
        "model_change",
        "thinking_level_change",
    }
)


def foreign_edit_refusal(session: Session, what: str) -> str | None:
    """Why ``what`` (an edit of the model's context) is refused on this session, or None."""
    if session.agent == "pi":
        return None
    return (
        f"This is a {session.agent_name} session: what its model saw is not edited here "
        f"({what}). Store a route as a new Pi session (Download this branch, then store it) "
        "and edit that one."
    )


def _refuse_model_edits_of_foreign(session: Session, appended: list) -> None:
    """Inside the write's transaction: a foreign session refuses what changes its context
    (the ``SessionError`` rolls everything back)."""
    refused = sorted({e.type for e in appended if e.type in MODEL_EDIT_TYPES})
    reason = foreign_edit_refusal(session, ", ".join(refused)) if refused else None
    if reason is not None:
        raise SessionError(reason)


def add_context_edit(
    session: Session,
    user,
    target_id: str,
    replacement: Any,
    *,
    leaf_id: Any = UNSET,
    expected_leaf: Any = UNSET,
) -> AppendResult:
    """Append a ``context_edit`` (``replacement`` None omits the target, or ``{"content": …}``)."""
    return append_via_manager(
        session,
        user,
        leaf_id,
        lambda m: m.append_context_edit(target_id, replacement),
        targets=(target_id,),
        expected_leaf=expected_leaf,
        lean=True,
    )


def set_label(
    session: Session,
    user,
    target_id: str,
    label: str | None,
    *,
    leaf_id: Any = UNSET,
    expected_leaf: Any = UNSET,
) -> AppendResult:
    """Append a ``label`` entry; ``None`` or ``""`` clears the label."""
    return append_via_manager(
        session,
        user,
        leaf_id,
        lambda m: m.append_label_change(target_id, label),
        targets=(target_id,),
        expected_leaf=expected_leaf,
        lean=True,
    )


def rename_session(
    session: Session, user, name: str, *, leaf_id: Any = UNSET, expected_leaf: Any = UNSET
) -> AppendResult:
    """Append a ``session_info`` entry (the engine sanitises the name)."""
    return append_via_manager(
        session,
        user,
        leaf_id,
        lambda m: m.append_session_info(name),
        expected_leaf=expected_leaf,
        lean=True,
    )


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
    expected_leaf: Any = UNSET,
) -> AppendResult:
    """Leave the current route for ``branch_from_id`` with a ``branch_summary`` entry; its
    ``fromId`` is the cursor the user was on (``leaf_id``)."""
    return append_via_manager(
        session,
        user,
        leaf_id,
        lambda m: m.branch_with_summary(branch_from_id, summary, details, from_hook, usage),
        targets=(branch_from_id,) if branch_from_id else (),  # may be on another route
        expected_leaf=expected_leaf,
    )


def append_message(
    session: Session,
    user,
    message: dict,
    *,
    leaf_id: Any = UNSET,
    source: str = "turn",
    expected_leaf: Any = UNSET,
) -> AppendResult:
    """Append one agent message (used by the turn runner)."""
    return append_via_manager(
        session,
        user,
        leaf_id,
        lambda m: m.append_message(message),
        source=source,
        expected_leaf=expected_leaf,
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
    from explorer import conf
    from explorer.session import compaction, tokens

    reason = foreign_edit_refusal(session, "compaction")
    if reason is not None:  # before the summary is paid for
        raise SessionError(reason)
    target = _resolve_leaf(session, user, leaf_id)
    path = queries.path_to(session, target)
    prep = compaction.prepare_compaction(path, settings or tokens.DEFAULT_COMPACTION_SETTINGS)
    if prep is None:
        if path and path[-1].get("type") == "compaction":
            raise SessionError("Already compacted")
        raise SessionError("Nothing to compact (session too small)")
    if summarizer is None:
        summarizer = conf.summarizer()
    result = compaction.compact(prep, summarizer, custom_instructions=custom_instructions)
    return append_via_manager(
        session,
        user,
        target,
        lambda m: compaction.append_compaction_result(m, result),
        source="compaction",
    )


def store_compaction(
    session: Session, user, result: Any, *, leaf_id: Any = UNSET, expected_leaf: Any = UNSET
) -> AppendResult:
    """Append an already computed compaction (the one a reviewer previewed) at ``leaf_id``."""
    from explorer.session import compaction

    return append_via_manager(
        session,
        user,
        leaf_id,
        lambda m: compaction.append_compaction_result(m, result),
        source="compaction",
        expected_leaf=expected_leaf,
    )


def append_lines_verbatim(
    session: Session, lines: list[str], ids: list[str], *, source: str
) -> int | None:
    """Store complete entry lines (with these ``ids``) exactly as another writer wrote them:
    the follower's fast path. None, with nothing written, when an id is already stored."""
    with session_lock(session.session_id), transaction.atomic():
        locked = _lock_row(session)
        if Entry.objects.filter(session=locked, entry_id__in=ids).exists():
            return None
        created = append_lines(locked, ("\n".join(lines) + "\n").encode("utf-8"))
        files.index_new_entries(locked)
        broadcast.entries_appended(locked, created, source=source)
        follow_appends(locked, created)
    session.refresh_from_db()
    return len(created)


# ---------------------------------------------------------------------------------------------
# Files in: imports, forks and branches as new sessions


def _newest_entries(
    session: Session, added: int, *, limit: int = 200, max_bytes: int = 8 * 1024 * 1024
) -> list[Entry]:
    """The newest rows of a big import, bounded in count and in payload size, so the
    broadcast never pulls a whole 200 MB import into memory."""
    picked: list[int] = []
    total = 0
    rows = Entry.objects.filter(session=session).order_by("-position").values_list("pk", "size")
    for pk, size in rows[: min(added, limit)]:
        if picked and total + size > max_bytes:
            break
        picked.append(pk)
        total += size
    return list(Entry.objects.filter(pk__in=picked).order_by("position"))


# After this many new rows PostgreSQL's planner statistics are refreshed at once: with the
# stale estimate of a just-filled table it walks a route by scanning the whole table at every
# step (minutes for a 50,000-entry route) instead of one index lookup per step.
ANALYZE_AFTER_ROWS = 1000


def _refresh_planner_statistics(added: int) -> None:
    if added < ANALYZE_AFTER_ROWS or connection.vendor != "postgresql":
        return
    tables = [Entry._meta.db_table, EntryText._meta.db_table]
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE " + ", ".join(connection.ops.quote_name(t) for t in tables))


def _announce_import(result: files.ImportResult, source: str) -> None:
    session = result.session
    if session is None or not result.added:
        return
    _refresh_planner_statistics(result.added)
    queries.store_figures(session)
    # What the pages keep drawn for a big session's first reader (the Compactions tab's
    # opening detail): the views draw it, on this signal.
    with queries.one_step_at_a_time():  # their figures are stored; this process lets go
        session_imported.send(sender=Session, session=session)
    entries = result.new_entries
    if entries is None:
        entries = _newest_entries(session, result.added)
    broadcast.entries_appended(session, entries, source=source)
    if not result.created:
        # A grown file: readers at its old end follow (the whole addition, by index rows).
        with _writer(session) as locked:  # the row lock, as for every other write
            follow_appends(locked, _added_rows(locked, result.added))


def _added_rows(session: Session, added: int) -> list[Entry]:
    """The index rows (no payload) of the ``added`` newest entries."""
    rows = Entry.objects.filter(session=session).order_by("-position").light()
    return list(rows[:added])


def import_bytes(
    data: bytes, *, source_path: str = "", user=None, source: str = "import", **kwargs
) -> files.ImportResult:
    """Import one file's content under the single-writer lock of its session, then tell
    its viewers (``source`` says who wrote it: import, follow, fork, branch)."""
    header, _i, _l, _p = files.find_header(bytes(data[: 1024 * 1024]))
    key = header["id"] if header else "-"
    with session_lock(key):
        result = files.import_bytes(data, source_path=source_path, user=user, **kwargs)
    _announce_import(result, source)
    return result


def import_file(
    path: str,
    *,
    source_path: str | None = None,
    user=None,
    source: str = "import",
    progress: files.ImportProgress | None = None,
    **kwargs,
) -> files.ImportResult:
    """Import a file from disk under the single-writer lock of its session (``progress``:
    where the streaming pass reports entries and bytes while it runs)."""
    with open(path, "rb") as fh:
        first = fh.read(1024 * 1024)
    header, _i, _l, _p = files.find_header(first)
    key = header["id"] if header else "-"
    with session_lock(key), files.reporting(progress):
        result = files.import_file(path, source_path=source_path, user=user, **kwargs)
    _announce_import(result, source)
    return result


IMPORT_PROGRESS_SECONDS = 3600


def import_progress_tracker(user, token: str, name: str, total: int) -> files.ImportProgress:
    """A progress record for one uploaded file that lands in the shared cache as it moves,
    so the page's poll reads it from whichever worker answers (Redis or the file cache)."""
    from django.core.cache import cache

    key = queries.import_progress_key(user, token)

    def report(p: files.ImportProgress) -> None:
        state = {"name": name, "phase": p.phase, "entries": p.entries, "bytes": p.bytes}
        cache.set(key, {**state, "total": p.total}, IMPORT_PROGRESS_SECONDS)

    progress = files.ImportProgress(total=total, report=report)
    progress.tick(force=True)
    return progress


def import_progress_done(user, token: str, progress: files.ImportProgress) -> None:
    """Mark the upload's import finished (the response carries the result itself)."""
    progress.phase = "done"
    progress.tick(force=True)


def record_audit(
    user,
    action: str,
    session: Session | None,
    *,
    target: str = "",
    what: str = "",
    reason: str = "",
) -> AuditEvent:
    """One row of the audit list (``AuditEvent``): who did what to which session, when and
    why. The session and the user are named as text, so the row outlives both."""
    author = user if user is not None and user.is_authenticated else None
    return AuditEvent.objects.create(
        user=author,
        username=author.get_username() if author is not None else "",
        action=action,
        session_ref=session.session_id if session is not None else "",
        session_name=session.display_name if session is not None else "",
        target=target[:200],
        what=what,
        reason=reason,
    )  # fmt: skip


def delete_session(session: Session, user) -> None:
    with _writer(session) as locked:
        what = f"Deleted session {locked.display_name} ({locked.entry_count} entries)"
        record_audit(user, AuditEvent.DELETE, locked, what=what)
        locked.delete()


def fork_session(session: Session, user, *, cwd: str | None = None) -> Session:
    """A new stored session holding every entry of this one under a new header (the
    ``fork_from`` semantics)."""
    result = import_bytes(files.fork_bytes(session, cwd=cwd), user=user, source="fork")
    if not result.ok or result.session is None:
        raise ValueError("; ".join(str(p) for p in result.errors))
    return result.session


def branch_session(session: Session, user, leaf_id: str) -> Session:
    """A new stored session holding only the path to ``leaf_id`` (``create_branched_session``)."""
    result = import_bytes(files.branch_bytes(session, leaf_id), user=user, source="branch")
    if not result.ok or result.session is None:
        raise ValueError("; ".join(str(p) for p in result.errors))
    return result.session


# ---------------------------------------------------------------------------------------------
# The turn lock: one running turn per session across every worker


class TurnLockBusy(Exception):
    """Another turn holds the session's lock (and refreshed it recently)."""


def acquire_turn_lock(session: Session, turn_id: str, *, stale_after: float) -> None:
    """Take the session's turn lock for ``turn_id``; a lock nobody refreshed for
    ``stale_after`` seconds belongs to a dead worker and is taken over."""
    for _attempt in range(2):
        try:
            with transaction.atomic():
                TurnLock.objects.create(session=session, turn_id=turn_id)
            return
        except IntegrityError:
            stale = timezone.now() - timezone.timedelta(seconds=stale_after)
            if not TurnLock.objects.filter(session=session, updated__lt=stale).delete()[0]:
                raise TurnLockBusy() from None
    raise TurnLockBusy()


def release_turn_lock(session_pk: int, turn_id: str) -> None:
    TurnLock.objects.filter(session_id=session_pk, turn_id=turn_id).delete()


def refresh_turn_lock(session_pk: int, turn_id: str) -> bool:
    """The running turn's heartbeat; True when another worker asked it to stop."""
    row = TurnLock.objects.filter(session_id=session_pk, turn_id=turn_id).first()
    if row is None:
        return False
    row.save(update_fields=["updated"])
    return row.cancel_requested


def request_turn_cancel(session_pk: int) -> bool:
    """Flag the running turn (on whichever worker runs it); True when there was one."""
    return bool(
        TurnLock.objects.filter(session_id=session_pk, cancel_requested=False).update(
            cancel_requested=True
        )
    )


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


# ---------------------------------------------------------------------------------------------
# Review comments: site data about entries, never written into the session file. Like the
# findings' statuses they append nothing, so nothing is broadcast.


def _review_models():
    from explorer.models import EntryReview, ReviewComment

    return EntryReview, ReviewComment


def add_comment(session: Session, user, entry_id: str, body: str, parent=None):
    """A new thread on an entry, or a reply to one (``parent``: any comment of the thread;
    replies hang off its first comment, so threads stay one level deep)."""
    _, ReviewComment = _review_models()
    with _writer(session):
        root = None
        if parent is not None:
            root = parent if parent.parent_id is None else parent.parent
            entry_id = root.entry_id
        return ReviewComment.objects.create(
            session=session, entry_id=entry_id, parent=root, author=user, body=body
        )


def edit_comment(comment, body: str):
    """Change a comment's text (the author or an admin; the view checks who)."""
    with _writer(comment.session):
        comment.body = body
        comment.edited = timezone.now()
        comment.save(update_fields=["body", "edited"])
    return comment


def delete_comment(comment, user=None) -> None:
    """Remove a comment; removing a thread's first comment removes its replies. The audit
    list keeps who removed whose comment on which entry (not its text, which may be what
    had to go)."""
    with _writer(comment.session):
        replies = comment.replies.count() if comment.parent_id is None else 0
        author = comment.author.get_username() if comment.author_id else "a deleted user"
        record_audit(
            user, AuditEvent.DELETE_COMMENT, comment.session, target=comment.entry_id,
            what=f"Deleted a comment by {author} on entry {comment.entry_id}"
            + (f" and its {replies} repl{'y' if replies == 1 else 'ies'}" if replies else ""),
        )  # fmt: skip
        comment.delete()


def resolve_thread(comment, user, resolved: bool = True):
    """Mark the thread of ``comment`` resolved (or open again)."""
    root = comment if comment.parent_id is None else comment.parent
    with _writer(root.session):
        root.resolved_by = user if resolved else None
        root.resolved_at = timezone.now() if resolved else None
        root.save(update_fields=["resolved_by", "resolved_at"])
    return root


def set_entry_review(session: Session, user, entry_id: str, status: str):
    """Approve or flag an entry (``""`` clears its status); one status per entry."""
    EntryReview, _ = _review_models()
    if status and status not in dict(EntryReview.STATUSES):
        raise ValueError(f"unknown review status {status!r}")
    with _writer(session):
        if not status:
            EntryReview.objects.filter(session=session, entry_id=entry_id).delete()
            return None
        review, _ = EntryReview.objects.update_or_create(
            session=session, entry_id=entry_id, defaults={"status": status, "by": user}
        )
        return review


# ---------------------------------------------------------------------------------------------
# Read marks ("new since you last looked")


def mark_seen(session: Session, user, position: int | None = None) -> int:
    """Record that ``user`` was shown ``session`` up to ``position`` (default: everything
    stored now). A mark only moves forward, and never past the newest entry, so a late
    POST from an old tab cannot hide what arrived since. Returns the mark."""
    from explorer.models import ReadMark
    from explorer.read_marks import newest_position

    newest = newest_position(session)
    target = newest if position is None else max(0, min(position, newest))
    with transaction.atomic():
        mark, created = ReadMark.objects.select_for_update().get_or_create(
            user=user, session=session, defaults={"position": target}
        )
        if not created and target > mark.position:
            mark.position = target
            mark.save(update_fields=["position", "updated"])
    return mark.position


# ---------------------------------------------------------------------------------------------
# Archived branches: site data about the tree, never written into the session file.

ARCHIVE_REASON_MAX = 500


class ArchiveRefused(ValueError):
    """An archive or unarchive that cannot be done, with the reason shown to the editor."""


def archive_branch(session: Session, user, entry_id: str, reason: str):
    """Set aside the branch starting at ``entry_id`` (hidden by default on the pages, left
    out of the "without archived branches" download). Refused for the route the session
    opens on (its own leaf's), for an unknown entry and for an empty reason: an archive
    without a why is a deletion nobody can review. Returns the ``ArchivedBranch``."""
    from explorer.archives import subtree_ids
    from explorer.models import ArchivedBranch

    reason = (reason or "").strip()
    if not reason:
        raise ArchiveRefused("Say why the branch is archived.")
    if len(reason) > ARCHIVE_REASON_MAX:
        raise ArchiveRefused(f"Keep the reason under {ARCHIVE_REASON_MAX} characters.")
    with _writer(session):
        if not Entry.objects.filter(session=session, entry_id=entry_id).exists():
            raise ArchiveRefused(f"This session has no entry {entry_id[:80]!r}.")
        children: dict[str | None, list[str]] = {}
        for eid, parent in Entry.objects.filter(session=session).values_list(
            "entry_id", "parent_id"
        ):
            children.setdefault(parent, []).append(eid)
        if queries.default_leaf_id(session) in subtree_ids(children, entry_id):
            raise ArchiveRefused(
                "This branch holds the session's current leaf; only an abandoned branch "
                "can be archived."
            )
        archive, created = ArchivedBranch.objects.get_or_create(
            session=session,
            entry_id=entry_id,
            defaults={"reason": reason, "archived_by": user if user and user.pk else None},
        )
        if not created:
            raise ArchiveRefused("This branch is archived already.")
        record_audit(
            user,
            AuditEvent.ARCHIVE,
            session,
            target=entry_id,
            what=f"archived the branch from {entry_id}",
            reason=reason,
        )
    return archive


def unarchive_branch(session: Session, user, entry_id: str) -> bool:
    """Bring an archived branch back on every page. Returns whether one was archived."""
    from explorer.models import ArchivedBranch

    with _writer(session):
        deleted, _ = ArchivedBranch.objects.filter(session=session, entry_id=entry_id).delete()
        if deleted:
            what = f"unarchived the branch from {entry_id}"
            record_audit(user, AuditEvent.UNARCHIVE, session, target=entry_id, what=what)
    return bool(deleted)
