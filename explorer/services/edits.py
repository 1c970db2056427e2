"""Appends through the engine: the form edits (labels, names, context edits, branch
summaries, compactions), turn messages and verbatim lines of a followed file.

Inside the session's lock the engine's ``SessionManager`` appends through
``DatabaseStorage``, loaded with only the header and the path to the writer's cursor, so an
edit on a 50,000-entry session never reads the whole session. Broadcasts are scheduled for
after the commit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from explorer import broadcast, conf, files, queries
from explorer.models import Entry, Leaf, Session
from explorer.services.cursors import cursor_for, follow_appends
from explorer.services.locks import _lock_row, session_lock
from explorer.session.errors import SessionError
from explorer.session.sentinel import UNSET
from explorer.storage import DatabaseStorage, IdCollision, append_lines

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
                queries.refresh_figures(session)  # after the commit, still the writer
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
    with session_lock(session.session_id):
        with transaction.atomic():
            locked = _lock_row(session)
            if Entry.objects.filter(session=locked, entry_id__in=ids).exists():
                return None
            created = append_lines(locked, ("\n".join(lines) + "\n").encode("utf-8"))
            files.index_new_entries(locked)
            broadcast.entries_appended(locked, created, source=source)
            follow_appends(locked, created)
        session.refresh_from_db()
        queries.refresh_figures(session)  # after the commit, still the writer
    return len(created)
