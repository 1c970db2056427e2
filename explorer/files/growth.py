"""A grown file's import on SQLite: its new entries staged in a hidden session, in batches,
and moved into the stored session by one short transaction at the end.

Why: SQLite has one write lock for the whole database. Adding a file's growth to a visible
session in one transaction (all or nothing to readers) held that lock for the whole growth,
half a minute for 27,000 entries, and a label on another session waited as long. A new
session's import already commits in batches while its session is hidden
(``imports._import_new_batched``); a grown file's entries cannot be hidden that way, since
their session is visible. So they are written, batch by batch, to a *staging* session of
their own (``importing``: no page, search or list sees it), with their parents read from the
stored session where they are there; the last transaction moves every staged row into the
stored session with one statement per table, places the entries in the tree's segments and
brings the counters, cursor and problems up to date. Readers see the growth whole or not
at all; a failed or killed import leaves a hidden session that is deleted at once, or by the
next import or ``serve`` (``progress.clear_abandoned``), and nothing in the stored one.

PostgreSQL keeps the one-transaction growth: its writers to other sessions never wait for
it (row locks), and moving rows there would rebuild their trigram index entries.
"""

from __future__ import annotations

import secrets
import uuid
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from explorer import segment_store, survival_writer
from explorer.files.findings import secrets_current
from explorer.files.merge import MergePlan, merge_lines
from explorer.files.progress import _progress, clear_abandoned, discard, import_owner
from explorer.files.scan import Problem, _count_nl, _ends_nl, _scan_lines
from explorer.files.store import (
    _existing_scan,
    _resolve_pending,
    _store_lines,
    _Writer,
    finish_file,
    refresh_counters,
)
from explorer.models import (
    BigLineText,
    Entry,
    EntryText,
    ExtraLine,
    FileUse,
    RouteFigure,
    SecretFinding,
    Session,
)

# Growth below this many bytes keeps the one-transaction path: a followed file's few lines
# hold the lock for milliseconds there, and staging would only add its fixed costs.
STAGE_FROM_BYTES = 1024 * 1024

# Every table the staged writer fills, keyed by session (the tree's segments and the
# survival checks are written after the move, in the stored session).
_STAGED_TABLES = (Entry, ExtraLine, RouteFigure, FileUse, BigLineText, SecretFinding, EntryText)


def stages_growth(session: Session, consumed: int) -> bool:
    """Whether the growth of ``session``'s file to ``consumed`` bytes is staged."""
    return connection.vendor == "sqlite" and consumed - session.source_size >= STAGE_FROM_BYTES


def grow_staged(
    data: Any,
    consumed: int,
    session: Session,
    result: Any,
    source_path: str,
    *,
    plan: MergePlan | None = None,
) -> None:
    """Add the file's new entries to ``session``, staged: without ``plan``, its lines after
    the stored prefix (``session.source_size`` bytes, whose digest the caller checked and
    which ends with a newline); with one, the fresh entries of a file that changed other
    than by growing (``merge.merge_plan``).

    Fills ``result`` as ``imports._import_more`` does; on a blocking problem nothing is
    added. Runs outside any transaction: each batch commits on its own."""
    clear_abandoned()
    progress = _progress.get()
    if progress is not None and plan is None:
        progress.bytes = session.source_size  # the stored prefix counts as read
    stage = _staging_session(session)
    try:
        _stage_and_move(data, consumed, session, stage, result, source_path, plan)
    except BaseException:
        discard(stage)
        raise
    if not result.ok:
        discard(stage)


def _staging_session(session: Session) -> Session:
    """The hidden session the growth is staged in, keyed so that moving a row costs a read.

    SQLite stores an integer in as few bytes as it needs (none for 0 and 1, one byte up to
    127, two up to 32,767, ...). When an update leaves a row's record the same size, SQLite
    overwrites it in place and writes only the pages whose bytes changed; otherwise it
    rewrites the whole record, multi-MB lines included. So the staging session takes a key
    as wide as the stored session's: 0 for session 1, else a negative one of the same width
    (autoincrement never hands those out). A key already taken (another staged import)
    is tried again; after a few tries any key will do (only the move is slower)."""
    width = _int_width(session.pk)
    for attempt in range(8):
        if attempt == 7:
            pk = None
        elif width == 0:
            pk = 0 if session.pk == 1 else 1
        else:
            low = -(1 << (8 * width - 1))
            high = -(1 << (8 * (width - 1) - 1)) - 1 if width > 1 else -1
            pk = secrets.choice(range(low, high + 1))
        try:
            with transaction.atomic():
                return Session.every.create(
                    pk=pk,
                    session_id=f"staging:{uuid.uuid4().hex}",
                    header_raw=session.header_raw,
                    source_version=session.source_version,
                    agent=session.agent,
                    state=Session.IMPORTING,
                    import_owner=import_owner(),
                    import_heartbeat=timezone.now(),
                )
        except IntegrityError:
            continue
    raise AssertionError("unreachable: the last try takes any key")


def _int_width(value: int) -> int:
    """Bytes SQLite stores the integer in (0 for 0 and 1)."""
    if value in (0, 1):
        return 0
    for width in (1, 2, 3, 4, 6):
        if -(1 << (8 * width - 1)) <= value < (1 << (8 * width - 1)):
            return width
    return 8


def _stage_and_move(data, consumed, session, stage, result, source_path, plan) -> None:
    start_position = session.next_position
    if plan is None:
        size = session.source_size
        scan = _existing_scan(session)
        first_index = _count_nl(data, 0, size)
        base = start_position - first_index
        lines = _scan_lines(data, size, consumed, first_index, None, scan)
        position_of = lambda index: base + index  # noqa: E731
    else:
        scan = plan.scan
        lines, position_of = merge_lines(data, consumed, plan, start_position)
    writer = _Writer(stage, None, commit=True, also_reads=session.pk, segments=False)
    stats = _store_lines(lines, stage, scan, writer, position_of=position_of)
    writer.flush()
    _resolve_pending(session, scan)
    result.problems.extend(scan.problems)
    if not result.ok:
        return
    # Figures of entries whose parent came later: still in the staging session.
    writer.figures.finish()
    progress = _progress.get()
    if progress is not None:
        progress.phase = "finishing"
        progress.tick(force=True)
    with transaction.atomic():
        digest = session.source_sha256
        session.refresh_from_db()  # under the write lock: what no other writer can change now
        if (session.next_position, session.source_sha256) != (start_position, digest):
            result.problems.append(
                Problem(
                    0,
                    "error",
                    "changed-meanwhile",
                    "The stored session changed while this file was being imported (an "
                    "entry was added to it, or another import of it finished first), so "
                    "nothing was added. Import the file again.",
                )
            )
            return
        _move(stage, session)
        segment_store.extend_segments(session.pk, start_position - 1)
        writer.session = session
        writer.finish_child_counts()
        for entry_id, depth in scan.fixed.items():
            Entry.objects.filter(session=session, entry_id=entry_id).update(depth=depth)
        refresh_counters(session, scan)
        if stats["name"] is not None:
            session.name = stats["name"]
        finish_file(
            session,
            data,
            consumed,
            scan.problems,
            source_path=source_path,
            # A merged file's lines were stored whole, each with its newline.
            missing_final_newline=plan is None and not _ends_nl(data, consumed),
        )
        secrets_current(session)
    # The survival checks of the new compactions read the routes now stored: computed and
    # stored after the move, so the lock every writer waits for is not held meanwhile. Until
    # they are (or if this process dies first), a page checks those entries itself.
    survival_writer.write_checks(session, writer.checked, scanned=False)
    result.session = session
    result.added = stats["entries"]
    result.new_entries = writer.created(result.added)


def _move(stage: Session, session: Session) -> None:
    """Every staged row into the stored session, one statement per table, then the staging
    session's own row deleted (nothing refers to it any more)."""
    quote = connection.ops.quote_name
    with connection.cursor() as cur:
        for model in _STAGED_TABLES:
            cur.execute(
                f"UPDATE {quote(model._meta.db_table)} SET session_id = %s WHERE session_id = %s",
                [session.pk, stage.pk],
            )
    Session.every.filter(pk=stage.pk).delete()
