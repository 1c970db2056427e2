"""The import of a file: a new session, or more lines of one already stored.

Blocking problems ("error" severity): the bytes are not a Pi session at all (Pi would refuse
them), duplicate entry ids, parent cycles, or a file over the upload limit. Everything Pi
tolerates imports with a warning (SPEC section 1.7, Appendix D). Files stored before lines
kept their original text are grown by :mod:`.legacy`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from explorer import survival_writer
from explorer.files.findings import header_findings, secrets_current
from explorer.files.growth import grow_staged, stages_growth
from explorer.files.index import index_new_entries
from explorer.files.legacy import _import_legacy
from explorer.files.merge import merge_lines, merge_plan
from explorer.files.progress import _progress, clear_abandoned, discard, import_owner
from explorer.files.scan import (
    FULL_VALIDATION_LIMIT,
    Problem,
    _count_nl,
    _decode,
    _ends_nl,
    _FileSource,
    _full_report,
    _header_fields,
    _parse,
    _rfind_nl,
    _Scan,
    _scan_lines,
    _sha256,
    _slice,
    _version_of,
    find_header,
)
from explorer.files.store import (
    _existing_scan,
    _finish_session,
    _resolve_pending,
    _save_problems,
    _store_lines,
    _store_scanned,
    _update_warning_count,
    _Writer,
    finish_file,
)
from explorer.models import Entry, Session
from explorer.session.diagnostics import ProblemsMixin


@dataclass
class ImportResult(ProblemsMixin):
    session: Session | None = None
    created: bool = False
    added: int = 0
    unchanged: bool = False
    problems: list[Problem] = field(default_factory=list)
    source_path: str = ""
    new_entries: list[Entry] | None = None
    """Rows added (None when too many to hand to listeners one by one)."""
    shorter: bool = False
    """The file is shorter than the stored copy of the same session (truncated, or an older
    copy): stored history is kept, and the page says so rather than "nothing new"."""


def refused(code: str, message: str) -> ImportResult:
    """A result for input refused before it was read (nothing imported)."""
    return ImportResult(problems=[Problem(0, "error", code, message)])


class ImportError_(Exception):  # noqa: N801 - avoid shadowing the builtin ImportError
    """Raised inside the import transaction to roll everything back."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("; ".join(str(p) for p in problems[:5]))
        self.problems = problems


def _check_size(data_len: int, result: ImportResult) -> bool:
    limit = getattr(settings, "SESSIONS_MAX_UPLOAD_BYTES", 512 * 1024 * 1024)
    if data_len > limit:
        result.problems.append(
            Problem(
                0,
                "error",
                "too-large",
                f"The file is {data_len:,} bytes; the limit is {limit:,} bytes "
                "(setting SESSIONS_MAX_UPLOAD_BYTES).",
            )
        )
        return False
    return True


def import_bytes(
    data: bytes,
    *,
    source_path: str = "",
    user=None,
    defer_incomplete_tail: bool = False,
    rng=None,
) -> ImportResult:
    """Import one file's content; idempotent and incremental per header id.

    Atomic: on any blocking problem nothing is written and ``result.ok`` is False.
    ``defer_incomplete_tail``: leave an unterminated last line that does not parse for a
    later call (a file still being written). ``rng``: id source for migrating legacy files.
    """
    if isinstance(data, (bytearray, memoryview)):
        data = bytes(data)
    return _import_source(
        data,
        source_path=source_path,
        user=user,
        defer_incomplete_tail=defer_incomplete_tail,
        rng=rng,
    )


def _import_source(
    data, *, source_path: str, user, defer_incomplete_tail: bool, rng
) -> ImportResult:
    result = ImportResult(source_path=source_path)
    if not _check_size(len(data), result):
        return result
    header, header_index, header_line, problems = find_header(data)
    if header is None:
        result.problems.extend(problems)
        return result
    consumed = len(data)
    if defer_incomplete_tail and not _ends_nl(data, len(data)):
        tail_start = _rfind_nl(data) + 1
        tail = _slice(data, tail_start, len(data))
        ok, _ = _parse(_decode(tail)[0])
        if not ok:
            consumed = tail_start
    if _version_of(header) >= 3:
        batched = _import_new_batched(
            data, consumed, header, header_index, header_line, result, user, source_path
        )
        if batched is not None:
            return batched
        if _grew_staged(data, consumed, header, result, source_path):
            return result
    for attempt in range(2):
        try:
            with transaction.atomic():
                existing = (
                    Session.objects.select_for_update().filter(session_id=header["id"]).first()
                    if connection.features.has_select_for_update
                    else Session.objects.filter(session_id=header["id"]).first()
                )
                if _version_of(header) < 3:
                    _import_legacy(
                        _slice(data, 0, consumed), header, existing, result, user, source_path, rng
                    )
                elif existing is None:
                    _import_new(
                        data, consumed, header, header_index, header_line, result, user, source_path
                    )
                else:
                    _import_more(data, consumed, existing, result, user, source_path)
                if not result.ok:
                    raise ImportError_(result.problems)
                if result.session is not None:
                    progress = _progress.get()
                    if progress is not None:
                        progress.phase = "finishing"
                        progress.tick(force=True)
                    index_new_entries(result.session)

                    secrets_current(result.session, scanned=result.created)
            break
        except ImportError_:
            _nothing_stored(result)
            return result
        except IntegrityError:
            # Another process created the same session meanwhile: import again as growth.
            if attempt:
                raise
            result = ImportResult(source_path=source_path)
    return result


_DUPLICATES_WHY = (
    "Why a file with duplicate entry ids is not imported: Pi opens it (its index keeps the "
    "later line, while both lines stay in the file and in its tree), but this app stores each "
    "entry once under its id, and the tree, the routes and the byte-identical export depend on "
    "that, so it cannot hold both lines. Remove or rename one line of each pair and import "
    "the file again."
)


def _nothing_stored(result: ImportResult) -> None:
    """A refused file's result: its problems explained, no session, nothing added."""
    _explain_duplicates(result)
    result.session = None
    result.created = False
    result.added = 0


def _explain_duplicates(result: ImportResult) -> None:
    """Say once, on the first duplicate's error, why duplicate ids block the import (each
    per-line error says where its pair is)."""
    for i, p in enumerate(result.problems):
        if p.code == "duplicate-id":
            message = f"{p.message}. {_DUPLICATES_WHY}".replace(".. ", ". ")
            result.problems[i] = Problem(p.line, p.severity, p.code, message, p.entry_id)
            return


def import_file(path: str, *, user=None, source_path: str | None = None, **kwargs) -> ImportResult:
    """Import a file from disk (its path becomes the session's ``source_path``)."""
    import os

    result = ImportResult(source_path=source_path or path)
    try:
        size = os.path.getsize(path)
    except OSError as exc:
        result.problems.append(Problem(0, "error", "unreadable", f"Cannot read {path}: {exc}"))
        return result
    if not _check_size(size, result):
        return result
    shown = source_path or os.path.abspath(path)
    if size > FULL_VALIDATION_LIMIT:
        # Big files are read line by line: memory stays a few lines wide.
        return _import_source(
            _FileSource(path),
            source_path=shown,
            user=user,
            defer_incomplete_tail=kwargs.get("defer_incomplete_tail", False),
            rng=kwargs.get("rng"),
        )
    with open(path, "rb") as fh:
        data = fh.read()
    return import_bytes(data, source_path=shown, user=user, **kwargs)


def _import_new_batched(
    data, consumed, header, header_index, header_line, result: ImportResult, user, source_path
) -> ImportResult | None:
    """A new session's import, committed in batches while it stays hidden.

    One transaction per file would hold the database's single write lock (SQLite) for the
    whole file, minutes for a big one, and every other writer (a label on another session, a
    followed file, the shell) would fail meanwhile. Here each batch commits on its own; the
    session is ``importing`` (invisible to every page, ``Session.objects``) until the last
    step, one transaction, makes it ready. A file with a blocking problem, an exception or a
    killed process leaves nothing behind: the batches are deleted at once, or by the next
    import or ``serve`` (``clear_abandoned``). None: the session exists, grow it as before.
    """
    clear_abandoned()
    existing = Session.every.filter(session_id=header["id"]).first()
    if existing is not None and existing.state == Session.READY:
        return None
    if existing is None:
        try:
            with transaction.atomic():
                session = _new_session(
                    header,
                    header_index,
                    header_line,
                    user,
                    source_path,
                    state=Session.IMPORTING,
                    import_owner=import_owner(),
                    import_heartbeat=timezone.now(),
                )
        except IntegrityError:
            existing = Session.every.filter(session_id=header["id"]).first()
            if existing is None or existing.state == Session.READY:
                return None
    if existing is not None:  # someone else's import of the same file is running
        result.problems.append(
            Problem(
                0,
                "error",
                "import-running",
                f"Session {header['id']} is being imported by another process right now; "
                "import the file again when that has finished.",
            )
        )
        return result
    try:
        _import_new(
            data,
            consumed,
            header,
            header_index,
            header_line,
            result,
            user,
            source_path,
            session=session,
        )
    except BaseException:
        discard(session)
        raise
    if not result.ok:
        discard(session)
        _nothing_stored(result)
    return result


def _grew_staged(data, consumed, header, result: ImportResult, source_path: str) -> bool:
    """A stored session's file grown (or changed) by enough to stage (``growth``): add its
    new entries that way and say True; False leaves it to the one-transaction path
    (PostgreSQL, a few lines, a legacy session, a stored copy that ended mid-line)."""
    session = Session.objects.filter(session_id=header["id"]).first()
    if session is None or session.source_version < 3 or not stages_growth(session, consumed):
        return False
    size = session.source_size
    if not (size and session.source_sha256 and _ends_nl(data, size)):
        return False
    if _sha256(data, size) == session.source_sha256:
        grow_staged(data, consumed, session, result, source_path)
    else:
        # Rewritten rather than grown: compare by id first (reads only), then stage.
        plan = merge_plan(data, consumed, session, result)
        if plan is None:
            if result.ok:
                result.session = session  # nothing new
            else:
                _nothing_stored(result)
            return True
        grow_staged(data, consumed, session, result, source_path, plan=plan)
    if not result.ok:
        _nothing_stored(result)
    return True


def _new_session(header, header_index, header_line, user, source_path, **state) -> Session:
    return Session.every.create(
        session_id=header["id"],
        version=3,
        source_version=_version_of(header),
        header_raw=header_line,
        header_position=header_index,
        source_path=source_path,
        imported_by=user,
        **_header_fields(header),
        **state,
    )


def _import_new(
    data,
    consumed,
    header,
    header_index,
    header_line,
    result,
    user,
    source_path,
    *,
    session: Session | None = None,
) -> None:
    scan = _Scan()
    if session is None:
        session = _new_session(header, header_index, header_line, user, source_path)
    writer = _Writer(session, None, commit=session.state == Session.IMPORTING)
    writer.findings.extend(header_findings(session, writer.secrets_key))
    lines = _scan_lines(data, 0, consumed, 0, header_index, scan)
    stats = _store_lines(lines, session, scan, writer, position_of=lambda index: index)
    writer.flush()
    _report_new(data, consumed, session, scan, result)
    if not result.ok:
        return
    session.missing_final_newline = bool(consumed) and not _ends_nl(data, consumed)
    session.source_size = consumed
    session.source_sha256 = _sha256(data, consumed)
    if session.state != Session.IMPORTING:
        _store_new(session, scan, writer, stats, result)
        return
    # The last step is one transaction: the session appears with everything a page needs
    # (counters, cursor, search index, secrets), or not at all.
    progress = _progress.get()
    if progress is not None:
        progress.phase = "finishing"
        progress.tick(force=True)
    # The survival checks read only the committed rows of the hidden session: computed
    # here, the last transaction only inserts them, and the write lock every other writer
    # waits for is not held while they read (seconds for a big session).
    writer.check_rows = survival_writer.compute_checks(
        session, writer.checked, scanned=True, batch=True
    )
    with transaction.atomic():
        session.state = Session.READY
        session.import_owner = ""
        session.import_heartbeat = None
        writer.commit = False
        _store_new(session, scan, writer, stats, result)
        index_new_entries(session)
        secrets_current(session, scanned=True)


def _report_new(data, consumed, session: Session, scan: _Scan, result: ImportResult) -> None:
    """Settle late parents and list the file's problems (no database work)."""
    _resolve_pending(session, scan)
    if consumed and not _ends_nl(data, consumed):
        scan.add(
            Problem(
                _count_nl(data, 0, consumed) + 1,
                "warning",
                "missing-final-newline",
                "The file does not end with a newline (Pi appends one on open).",
            )
        )
    result.problems.extend(_full_report(data, consumed, scan.problems))


def _store_new(session: Session, scan: _Scan, writer: _Writer, stats, result: ImportResult) -> None:
    """The rows that finish a new session: counters, depths, cursor, problems."""
    _finish_session(session, scan, writer)
    session.name = stats["name"] or ""
    session.save()
    _save_problems(session, result.problems)
    _update_warning_count(session)
    result.session = session
    result.created = True
    result.added = stats["entries"]
    result.new_entries = writer.created(result.added)


def _import_more(data, consumed, session: Session, result, user, source_path):
    """The same header id again: append what the file has beyond what we stored."""
    result.session = session
    size = session.source_size
    prefix_ok = (
        consumed >= size and session.source_sha256 and _sha256(data, size) == session.source_sha256
    )
    if consumed < size:
        result.shorter = True
        result.problems.append(
            Problem(
                0,
                "warning",
                "shorter-than-stored",
                f"The file is {consumed:,} bytes, shorter than the stored copy of this session "
                f"({size:,} bytes): a truncated or older copy. Stored entries are never removed; "
                "only entries the stored copy lacks are added.",
            )
        )
    if not prefix_ok:
        _merge_by_id(data, consumed, session, result, user)
        return
    if consumed == size:
        result.unchanged = True
        return
    start = size
    progress = _progress.get()
    if progress is not None:
        progress.bytes = size  # the stored prefix counts as read
    if size and not _ends_nl(data, size):
        # The stored copy ended without a newline. Growth that starts by ending that line
        # continues it; anything else changed the last line and is merged by id instead.
        if _slice(data, size, size + 1) != b"\n":
            _merge_by_id(data, consumed, session, result, user)
            return
        start = size + 1
    scan = _existing_scan(session)
    first_index = _count_nl(data, 0, start)
    base = session.next_position - first_index
    lines = _scan_lines(data, start, consumed, first_index, None, scan)
    stored = _store_scanned(session, scan, lines, base, result)
    if stored is None:
        return
    stats, writer = stored
    finish_file(
        session,
        data,
        consumed,
        scan.problems,
        source_path=source_path,
        missing_final_newline=not _ends_nl(data, consumed),
    )
    result.added = stats["entries"]
    result.new_entries = writer.created(result.added)


def _merge_by_id(data, consumed, session: Session, result, user):
    """The file changed other than by growing (e.g. rewritten elsewhere): add the entries
    whose ids we do not have; an id we have with different content is a conflict."""
    plan = merge_plan(data, consumed, session, result)
    if plan is None:
        return
    scan = plan.scan
    writer = _Writer(session, None)
    lines, position_of = merge_lines(data, consumed, plan, session.next_position)
    stats = _store_lines(lines, session, scan, writer, position_of=position_of)
    writer.flush()
    _resolve_pending(session, scan)
    result.problems.extend(scan.problems)
    if not result.ok:
        return
    _finish_session(session, scan, writer)
    if stats["name"] is not None:
        session.name = stats["name"]
    # The merged lines were stored whole, each with its newline.
    finish_file(session, data, consumed, scan.problems, missing_final_newline=False)
    result.added = stats["entries"]
    result.new_entries = writer.created(result.added)
