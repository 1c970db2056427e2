"""Sessions in and out: imports of bytes and files (around :mod:`explorer.files`), their
progress, the stored figures and the announcement after the commit, forks, branches and
deletes.
"""

from __future__ import annotations

from django.db import connection

from explorer import broadcast, files, queries
from explorer.models import AuditEvent, Entry, EntryText, Session
from explorer.services.audit import record_audit
from explorer.services.cursors import follow_appends
from explorer.services.locks import _writer, session_lock

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
    # The whole-session figures a big session's cold reader loads: stored here, on the
    # write path, since no reader writes (queries.figures).
    queries.refresh_figures(session)
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
