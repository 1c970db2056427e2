"""Every write to stored sessions; after each one, one call to ``explorer.broadcast``.

One writer per session (SPEC section 9.3): a process lock serialises threads of this process,
the transaction (``BEGIN IMMEDIATE`` on SQLite, a row lock on PostgreSQL) serialises
processes (:mod:`.locks`). Inside it the engine's ``SessionManager`` appends through
``DatabaseStorage``, loaded with only the header and the path to the writer's cursor, so an
edit on a 50,000-entry session never reads the whole session. Broadcasts are scheduled for
after the commit.

A newcomer looking for "where is an append written and sent" reads this package, one module
per job: :mod:`.imports` (``import_bytes`` / ``import_file`` around ``explorer.files``,
forks, branches, deletes), :mod:`.edits` (form edits, follow appends, turn messages),
:mod:`.cursors` (cursor moves), :mod:`.turn_locks`, :mod:`.findings`, :mod:`.review`,
:mod:`.read_marks`, :mod:`.archives`, over :mod:`.locks` and :mod:`.audit`.

The names callers use are re-exported here, so ``services.import_bytes(...)`` keeps working;
a test that patches a name must patch the module the code under test reads it from.
"""

from __future__ import annotations

from explorer.services.archives import (
    ARCHIVE_REASON_MAX,
    ArchiveRefused,
    archive_branch,
    unarchive_branch,
)
from explorer.services.audit import (
    record_audit,
)
from explorer.services.cursors import (
    cursor_for,
    follow_appends,
    follow_stopped,
    move_cursor,
)
from explorer.services.edits import (
    AppendResult,
    StaleLeaf,
    add_context_edit,
    append_lines_verbatim,
    append_message,
    append_via_manager,
    branch_with_summary,
    compact_now,
    foreign_edit_refusal,
    rename_session,
    set_label,
    store_compaction,
)
from explorer.services.findings import (
    rescan_secrets,
    reveal_finding,
    set_finding_status,
)
from explorer.services.imports import (
    _announce_import,
    branch_session,
    delete_session,
    fork_session,
    import_bytes,
    import_file,
    import_progress_done,
    import_progress_tracker,
)
from explorer.services.locks import (
    session_lock,
)
from explorer.services.read_marks import (
    mark_seen,
)
from explorer.services.review import (
    add_comment,
    delete_comment,
    edit_comment,
    resolve_thread,
    set_entry_review,
)
from explorer.services.turn_locks import (
    TurnLockBusy,
    acquire_turn_lock,
    refresh_turn_lock,
    release_turn_lock,
    request_turn_cancel,
)

__all__ = [
    "ARCHIVE_REASON_MAX",
    "AppendResult",
    "ArchiveRefused",
    "StaleLeaf",
    "TurnLockBusy",
    "_announce_import",
    "acquire_turn_lock",
    "add_comment",
    "add_context_edit",
    "append_lines_verbatim",
    "append_message",
    "append_via_manager",
    "archive_branch",
    "branch_session",
    "branch_with_summary",
    "compact_now",
    "cursor_for",
    "delete_comment",
    "delete_session",
    "edit_comment",
    "follow_appends",
    "follow_stopped",
    "foreign_edit_refusal",
    "fork_session",
    "import_bytes",
    "import_file",
    "import_progress_done",
    "import_progress_tracker",
    "mark_seen",
    "move_cursor",
    "record_audit",
    "refresh_turn_lock",
    "release_turn_lock",
    "rename_session",
    "request_turn_cancel",
    "rescan_secrets",
    "resolve_thread",
    "reveal_finding",
    "session_lock",
    "set_entry_review",
    "set_finding_status",
    "set_label",
    "store_compaction",
    "unarchive_branch",
]
