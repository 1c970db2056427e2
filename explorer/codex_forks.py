"""A Codex fork file joins its parent's stored tree as a branch, its replayed prefix stored once.

Codex writes a fork (`codex fork`, `/fork`) as a new file that replays its parent's history
before its own turns. `pisession` reads each file on its own; the app stores the fork's own
entries (``pi_form.fork_branch``: the replayed prefix matched item by item against the
parent, named ``<fork thread>:L<line>``) in the parent's stored session, so the fork is one
more branch of the parent's tree and the prefix, with its token counts, is stored and counted
once. The stored form of a Codex session is therefore its own Pi form followed by the lines of
the forks that joined it, which keeps re-imports of either file idempotent and growth of either
incremental.

Both files stay exportable byte for byte: the session keeps the parent's original bytes (its
export, as for every agent session) and :class:`explorer.models.CodexFork` keeps each fork
file's own (``/sessions/<pk>/export/?fork=<thread>``). A fork whose parent is not stored yet
is a session of its own; when the parent arrives the fork joins it, and that separate
session is removed unless site data (labels, names, comments, reviews, shares, archives)
was added to it, which is never dropped.
"""

from __future__ import annotations

from collections.abc import Callable

from explorer import files, services
from explorer.files.imports import ImportResult
from explorer.models import CodexFork, Entry, Session
from explorer.session import jsonfmt
from explorer.session.formats import ForeignSession, load_foreign_bytes
from explorer.session.formats.pi_form import fork_branch, pi_bytes, stored_session_id

__all__ = ["fork_parent", "join_fork", "joined_lines", "adopt_waiting_forks"]

Describe = Callable[[ImportResult, ForeignSession], None]


def fork_parent(foreign: ForeignSession) -> str | None:
    """The parent thread of a Codex fork file (`forked_from_id`), else None."""
    if foreign.format != "codex" or not foreign.session_id:
        return None
    parent = (foreign.links.get("forkedFrom") or {}).get("threadId")
    return parent if isinstance(parent, str) and parent else None


def joined_lines(stored_id: str, leave_out: str = "") -> list[bytes]:
    """The stored lines of the forks that joined the session ``stored_id`` (their ids are
    ``<fork thread>:L<line>``, the session's own are ``L<line>``), in stored order, without
    those of the fork ``leave_out`` (a thread id)."""
    if not stored_id.startswith("codex:"):
        return []
    rows = (
        Entry.objects.filter(session__session_id=stored_id, entry_id__contains=":L")
        .order_by("position")
        .values_list("entry_id", "raw")
    )
    mine = f"{leave_out}:" if leave_out else None
    return [
        raw.encode("utf-8", errors="surrogatepass") + b"\n"
        for entry_id, raw in rows
        if mine is None or not entry_id.startswith(mine)
    ]


def _remember(foreign: ForeignSession, parent_thread: str, shown: str) -> None:
    assert foreign.session_id is not None
    CodexFork.objects.update_or_create(
        thread_id=foreign.session_id,
        defaults={
            "parent_thread_id": parent_thread,
            "source_path": shown,
            "original": foreign.original_bytes(),
        },
    )


def join_fork(
    foreign: ForeignSession, shown: str, user, source: str, describe: Describe
) -> ImportResult | None:
    """Store a Codex fork file as a branch of its parent's stored session (the result is the
    parent session's import). None when the file is no fork, its parent is not stored, or
    none of its records is found in the parent: the caller then stores it on its own. The
    fork's bytes are kept either way."""
    parent_thread = fork_parent(foreign)
    if parent_thread is None:
        return None
    _remember(foreign, parent_thread, shown)
    row = Session.objects.filter(session_id=f"codex:{parent_thread}").first()
    original = (
        Session.objects.filter(pk=row.pk).values_list("source_original", flat=True).first()
        if row is not None
        else None
    )
    if row is None or not original:
        return None
    parent = load_foreign_bytes(bytes(original), "codex", row.source_path or None)
    branch = fork_branch(parent, foreign)
    if branch is None:
        return None
    stored_id = stored_session_id(parent)
    assert foreign.session_id is not None
    own = [(jsonfmt.dumps(e) + "\n").encode("utf-8", errors="surrogatepass") for e in branch]
    data = pi_bytes(parent) + b"".join(joined_lines(stored_id, foreign.session_id) + own)
    with services.session_lock(stored_id):
        result = files.import_bytes(data, source_path=row.source_path, user=user)
        if result.ok and result.session is not None:
            describe(result, parent)
            CodexFork.objects.filter(thread_id=foreign.session_id).update(session=result.session)
    services._announce_import(result, source)
    _retire_own_session(foreign.session_id)
    return result


_SITE_TYPES = ("label", "session_info")


def _retire_own_session(thread: str) -> None:
    """Remove the fork's separate session (stored before its parent arrived), now that its
    entries are in the parent's tree, unless someone added site data to it."""
    alone = Session.objects.filter(session_id=f"codex:{thread}").first()
    if alone is None:
        return
    kept = (
        Entry.objects.filter(session=alone, type__in=_SITE_TYPES).exists()
        or alone.review_comments.exists()
        or alone.entry_reviews.exists()
        or alone.share_links.exists()
        or alone.archived.exists()
    )
    if not kept:
        services.delete_session(alone, None)


def adopt_waiting_forks(
    result: ImportResult, user, source: str, describe: Describe
) -> list[ImportResult]:
    """After a Codex session is stored: the fork files that were imported before it (kept in
    :class:`CodexFork`, not joined yet) join its tree now."""
    session = result.session
    if session is None or session.agent != "codex":
        return []
    thread = session.session_id.split(":", 1)[1]
    out = []
    for fork in CodexFork.objects.filter(parent_thread_id=thread, session__isnull=True):
        foreign = load_foreign_bytes(bytes(fork.original), "codex", fork.source_path or None)
        joined = join_fork(foreign, fork.source_path, user, source, describe)
        if joined is not None:
            out.append(joined)
    return out
