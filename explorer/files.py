"""Session files in and out of the database: import (new, grown, legacy), export, and the
files derived from a stored session (one branch, a fork).

Import parses each file once, in one streaming pass over its lines, and keeps every line's
original text, so an export is byte-identical to what was imported plus what was appended
since. This module returns results and calls nothing above it: ``explorer.services`` wraps
each import in the session's writer lock and broadcasts what it added.

Blocking problems ("error" severity): the bytes are not a Pi session at all (Pi would refuse
them), duplicate entry ids, parent cycles, or a file over the upload limit. Everything Pi
tolerates imports with a warning (SPEC section 1.7, Appendix D).
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import orjson
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Max
from django.utils import timezone

from explorer import conf, route_store
from explorer.models import Entry, EntryText, ExtraLine, ImportProblem, Leaf, SecretFinding, Session
from explorer.queries import path_pks
from explorer.secrets import RULES_VERSION, redact_bytes, redact_for_search, scan_entry
from explorer.session import jsonfmt
from explorer.session.describe import COSTED_TYPES, cost_of, entry_text
from explorer.session.diagnostics import ProblemsMixin
from explorer.session.loading import is_falsy

logger = logging.getLogger(__name__)

__all__ = [
    "ImportError_",
    "ImportProgress",
    "ImportResult",
    "Problem",
    "branch_bytes",
    "export_bytes",
    "export_filename",
    "find_header",
    "fork_bytes",
    "import_bytes",
    "import_file",
    "iter_export",
    "redact_chunks",
    "reporting",
    "rescan_session",
    "secrets_current",
]

# Files up to this size also get the engine's full diagnostics report (it holds the parsed
# file in memory); larger files rely on the streaming checks here alone.
FULL_VALIDATION_LIMIT = 32 * 1024 * 1024
MAX_PROBLEMS = 500
# Characters of stored lines plus their search text held before a batch is written: it bounds
# the importer's memory (with the few lines in flight), not its speed (fewer rows per
# statement cost nothing measurable above a few MB).
_BATCH_BYTES = 4 * 1024 * 1024
_BATCH_ROWS = 2000
_JS_WS = jsonfmt.JS_WHITESPACE


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding with its 1-based file line (0 = the file as a whole)."""

    line: int
    severity: str  # "error" | "warning"
    code: str
    message: str
    entry_id: str | None = None

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line else "file"
        return f"{where}: {self.severity}: {self.message}"


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


# ---------------------------------------------------------------------------------------------
# Progress of a running import


@dataclass
class ImportProgress:
    """How far the running import got: entries stored so far and bytes of the file read.

    A big upload takes minutes; the page shows these figures (not an indeterminate bar), so
    the importer reports them to ``report`` at most every ``every`` seconds while it streams.
    """

    total: int = 0
    entries: int = 0
    bytes: int = 0
    phase: str = "importing"
    report: Callable[[ImportProgress], None] | None = None
    every: float = 0.25
    _last: float = 0.0

    def tick(self, *, force: bool = False) -> None:
        if self.report is None:
            return
        now = time.monotonic()
        if force or now - self._last >= self.every:
            self._last = now
            self.report(self)


_progress: ContextVar[ImportProgress | None] = ContextVar("import_progress", default=None)


@contextmanager
def reporting(progress: ImportProgress | None) -> Iterator[None]:
    """Let the imports run inside this block report to ``progress``."""
    token = _progress.set(progress)
    try:
        yield
    finally:
        _progress.reset(token)


# ---------------------------------------------------------------------------------------------
# Line scanning


class _FileSource:
    """A session file read in pieces, for files too big to hold in memory next to their
    parsed lines (the importer's memory stays a few lines wide)."""

    CHUNK = 1024 * 1024

    def __init__(self, path: str) -> None:
        import os

        self.path = path
        self.size = os.path.getsize(path)

    def __len__(self) -> int:
        return self.size

    def read(self, start: int, end: int) -> bytes:
        with open(self.path, "rb") as fh:
            fh.seek(start)
            return fh.read(max(0, end - start))

    def chunks(self, start: int, end: int) -> Iterator[bytes]:
        with open(self.path, "rb") as fh:
            fh.seek(start)
            left = end - start
            while left > 0:
                block = fh.read(min(self.CHUNK, left))
                if not block:
                    return
                left -= len(block)
                yield block

    def lines(self, start: int, end: int) -> Iterator[tuple[int, bytes, bool]]:
        with open(self.path, "rb") as fh:
            fh.seek(start)
            pos = start
            index = 0
            while pos < end:
                line = fh.readline(end - pos)
                if not line:
                    return
                pos += len(line)
                if not line.endswith(b"\n"):
                    yield index, line, False
                    return
                # Handed over, not kept: while the consumer works on a multi-MB line this
                # frame holds no second copy of it (the consumer drops its own once decoded).
                held = [line[:-1]]
                del line
                yield index, held.pop(), True
                index += 1


def _slice(src, start: int, end: int) -> bytes:
    return src.read(start, end) if isinstance(src, _FileSource) else src[start:end]


def _count_nl(src, start: int, end: int) -> int:
    if isinstance(src, _FileSource):
        return sum(block.count(b"\n") for block in src.chunks(start, end))
    return src.count(b"\n", start, end)


def _sha256(src, end: int) -> str:
    digest = hashlib.sha256()
    if isinstance(src, _FileSource):
        for block in src.chunks(0, end):
            digest.update(block)
    else:
        digest.update(memoryview(src)[:end])
    return digest.hexdigest()


def _rfind_nl(src) -> int:
    if not isinstance(src, _FileSource):
        return src.rfind(b"\n")
    end = src.size
    while end > 0:
        start = max(0, end - src.CHUNK)
        found = src.read(start, end).rfind(b"\n")
        if found != -1:
            return start + found
        end = start
    return -1


def _iter_lines(data, start: int = 0, end: int | None = None) -> Iterator[tuple[int, bytes, bool]]:
    """(0-based index from ``start``, line bytes without "\\n", terminated) for each line of
    ``data[start:end]``, without copying or splitting the whole buffer (a 200 MB file must not
    become a list of pieces)."""
    n = len(data) if end is None else end
    if isinstance(data, _FileSource):
        yield from data.lines(start, n)
        return
    pos = start
    index = 0
    while pos < n:
        nl = data.find(b"\n", pos, n)
        if nl == -1:
            yield index, data[pos:n], False
            return
        yield index, data[pos:nl], True
        pos = nl + 1
        index += 1


def _decode(piece: bytes) -> tuple[str, bool]:
    try:
        return piece.decode("utf-8"), True
    except UnicodeDecodeError:
        return piece.decode("utf-8", errors="replace"), False


def _parse(line: str) -> tuple[bool, Any]:
    try:
        return True, orjson.loads(line)
    except orjson.JSONDecodeError:
        pass
    try:
        return True, jsonfmt.loads(line)
    except ValueError:
        return False, None
    except RecursionError:
        return False, _TOO_DEEP


# ``_parse``'s answer for valid JSON nested deeper than Python's parsers go (JavaScript's has
# no such limit, so Pi keeps the line): reported with its depth rather than as malformed.
_TOO_DEEP = "too-deep"


def _excerpt(line: str, limit: int = 60) -> str:
    line = line.strip()
    return line if len(line) <= limit else line[:limit] + "…"


# The id columns' width. Pi accepts ids of any length; a longer one is refused at import
# with its line number rather than cut (a cut id no longer finds its row or its children).
MAX_ID_LENGTH = 200


def _long_id(line_no: int, what: str, value: str) -> Problem:
    return Problem(
        line_no,
        "error",
        "id-too-long",
        f"The {what} is {len(value)} characters long; ids of up to {MAX_ID_LENGTH} "
        f"characters can be stored: {_excerpt(jsonfmt.visible(value))}",
    )


def _text(value: Any, limit: int) -> str:
    if type(value) is not str:
        return ""
    return value if len(value) <= limit else value[:limit]


def entry_fields(value: dict) -> dict[str, Any]:
    """The indexed columns of one entry (what pages filter and sort on), and its cost.

    Every write of an entry (an import, an append through the engine) takes its columns
    from here, so the stored cost is the one figure the whole-session sums read
    (``queries.entry_costs``): the first page after an import adds up a column instead of
    parsing every assistant line again."""
    get = value.get
    entry_type = get("type")
    role = ""
    if entry_type == "message":
        message = get("message")
        if type(message) is dict:
            role = _text(message.get("role"), 64)
    parent = get("parentId")
    costed = (entry_type == "message" and role == "assistant") or entry_type in COSTED_TYPES
    return {
        "type": _text(entry_type, 64),
        "parent_id": parent if type(parent) is str and parent else None,
        "timestamp": _text(get("timestamp"), 64),
        "role": role,
        "custom_type": _text(get("customType"), 200),
        "target_id": _text(get("targetId"), 200),
        "cost": cost_of(value) if costed else 0.0,
    }


def session_name_of(value: dict) -> str | None:
    """Name set by a ``session_info`` entry ("" clears it), as Pi's ``getSessionName``."""
    name = value.get("name")
    if not isinstance(name, str):
        return ""
    return jsonfmt.js_trim(name)


# ---------------------------------------------------------------------------------------------
# The import pass


@dataclass
class _Line:
    index: int
    raw: str
    raw_bytes: bytes | None
    value: Any  # parsed dict, or None for extra lines
    kind: str  # "entry" | extra-line kind
    original: bytes | None = None  # bytes to store for extra lines
    nbytes: int = 0


@dataclass
class _Scan:
    """What the streaming pass learned, across an initial import and its later increments."""

    problems: list[Problem] = field(default_factory=list)
    ids: dict[str, str | None] = field(default_factory=dict)  # id -> parent id
    depth: dict[str, int] = field(default_factory=dict)
    pending_depth: set[str] = field(default_factory=set)
    first_line: dict[str, int] = field(default_factory=dict)
    fixed: dict[str, int] = field(default_factory=dict)  # depths settled after the pass
    existing: set[str] = field(default_factory=set)  # ids stored before this import
    # Visible form -> id, for ids holding lone surrogates or NUL (see ``_unstorable``).
    visible_ids: dict[str, str] = field(default_factory=dict)
    session_pk: int | None = None

    has_error: bool = False

    def add(self, problem: Problem) -> None:
        if problem.severity == "error":
            self.has_error = True
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(problem)
        elif len(self.problems) == MAX_PROBLEMS:
            self.problems.append(
                Problem(
                    0, problem.severity, "truncated", "Too many problems; the rest are not listed."
                )
            )

    @property
    def failed(self) -> bool:
        return self.has_error


_ENTRY_COLUMNS = (
    "session_id",
    "entry_id",
    "parent_id",
    "type",
    "timestamp",
    "position",
    "line_no",
    "depth",
    "raw",
    "raw_bytes",
    "role",
    "custom_type",
    "target_id",
    "size",
    "child_count",
    "author_id",
    "cost",
)


class _Writer:
    """Buffers rows and inserts them in batches inside the import transaction.

    Plain ``executemany`` on the driver's cursor: model instances and the debug cursor (which
    formats every statement with its parameters, several MB per line here) would cost more
    than the insert itself.
    """

    def __init__(self, session: Session, author, *, commit: bool = False) -> None:
        self.session = session
        self.author_id = getattr(author, "pk", None)
        # Each batch its own transaction (a new session's import, ``_import_new_batched``):
        # the write lock is held for one batch at a time, never for the whole file.
        self.commit = commit
        self.rows: list[list] = []
        # Child counts are counted while streaming: a parent still in the unflushed batch is
        # bumped in place, others (branch points far back, earlier imports) at the end.
        self.pending: dict[str, list] = {}
        self.late: dict[str, int] = {}
        self.extras: list[ExtraLine] = []
        self.findings: list[SecretFinding] = []
        # The search index is filled from the entries parsed here, in the same pass: reading
        # every stored line back and parsing it again doubled the import's time.
        self.texts: list[tuple] = []
        self.secrets_key = conf.secrets_key()
        self.buffered = 0
        self.first_position: int | None = None
        self.total = 0
        # Route figures of each entry, computed as the lines stream (``explorer.route_store``).
        self.figures = route_store.FigureWriter(
            session.pk, flush_entries=self.flush, unflushed=self._unflushed
        )
        mark = "?" if connection.vendor == "sqlite" else "%s"
        table = connection.ops.quote_name(Entry._meta.db_table)
        columns = ", ".join(connection.ops.quote_name(c) for c in _ENTRY_COLUMNS)
        self.sql = (
            f"INSERT INTO {table} ({columns}) VALUES ({', '.join([mark] * len(_ENTRY_COLUMNS))})"
        )

    def entry(
        self,
        *,
        entry_id: str,
        position: int,
        depth: int,
        raw: str,
        raw_bytes: bytes | None,
        size: int,
        fields: dict[str, Any],
        value: Any = None,
    ) -> None:
        if self.first_position is None:
            self.first_position = position
        if self.rows and self.buffered + 2 * len(raw) > _BATCH_BYTES:
            # A line that would overflow the batch goes into the next one: a multi-MB line
            # is then scanned, held and written next to a few rows, not next to a full batch.
            self.flush()
        escaped = "\\u" in raw
        if escaped:
            # A \\u escape may decode to a lone surrogate or NUL, which the driver refuses.
            entry_id = jsonfmt.visible(entry_id)
            fields = {k: jsonfmt.visible(v) if type(v) is str else v for k, v in fields.items()}
        parent = fields["parent_id"]
        if parent is not None:
            parent_row = self.pending.get(parent)
            if parent_row is not None:
                parent_row[14] += 1
            else:
                self.late[parent] = self.late.get(parent, 0) + 1
        row = [
            self.session.pk,
            entry_id,
            parent,
            fields["type"],
            fields["timestamp"],
            position,
            position + 1,
            depth,
            raw,
            raw_bytes,
            fields["role"],
            fields["custom_type"],
            fields["target_id"],
            size,
            0,
            self.author_id,
            fields["cost"],
        ]
        self.rows.append(row)
        self.pending[entry_id] = row
        self.figures.add(entry_id, parent, position, value if type(value) is dict else {})
        if value is not None:
            self.findings.extend(
                findings_for(self.session, entry_id, position + 1, value, self.secrets_key)
            )
            row_text = search_row(
                self.session.pk, entry_id, position, fields, value, escaped=escaped
            )
            if row_text is not None:
                self.texts.append(row_text)
                self.buffered += len(row_text[5])  # the text is a second copy of the line
        self.buffered += len(raw)
        self.total += size
        if self.buffered >= _BATCH_BYTES or len(self.rows) >= _BATCH_ROWS:
            self.flush()

    def _unflushed(self, entry_id: str) -> str | None:
        """The raw line of an entry of the batch not inserted yet (for route figures)."""
        row = self.pending.get(entry_id)
        return row[8] if row is not None else None

    def extra(self, row: ExtraLine) -> None:
        self.extras.append(row)

    def flush(self) -> None:
        if not self.commit:
            self._flush()
            return
        with transaction.atomic():
            self._flush()
            Session.every.filter(pk=self.session.pk).update(import_heartbeat=timezone.now())

    def _flush(self) -> None:
        if self.rows:
            connection.ensure_connection()
            cursor = connection.connection.cursor()
            try:
                cursor.executemany(self.sql, self.rows)
            finally:
                cursor.close()
            self.rows = []
            self.figures.write()
            self.pending = {}
            self.buffered = 0
        if self.extras:
            ExtraLine.objects.bulk_create(self.extras)
            self.extras = []
        if self.findings:
            SecretFinding.objects.bulk_create(self.findings)
            self.findings = []
        if self.texts:
            store_search_rows(self.texts)
            self.texts = []

    def finish_child_counts(self) -> None:
        """Add the children whose parent row was already written."""
        if not self.late:
            return
        mark = "?" if connection.vendor == "sqlite" else "%s"
        table = connection.ops.quote_name(Entry._meta.db_table)
        sql = (
            f"UPDATE {table} SET child_count = child_count + {mark} "
            f"WHERE session_id = {mark} AND entry_id = {mark}"
        )
        connection.ensure_connection()
        cursor = connection.connection.cursor()
        try:
            cursor.executemany(sql, [(n, self.session.pk, pid) for pid, n in self.late.items()])
        finally:
            cursor.close()
        self.late = {}

    def created(self, added: int) -> list[Entry] | None:
        """The new rows for signal listeners (None when there are too many to hand over)."""
        if self.first_position is None or added > 1000 or self.total > 8 * 1024 * 1024:
            return None
        return list(
            Entry.objects.filter(session=self.session, position__gte=self.first_position).order_by(
                "position"
            )
        )


def findings_for(
    session: Session, entry_id: str, line_no: int, value: Any, key: bytes
) -> list[SecretFinding]:
    """Unsaved finding rows for one entry: where each secret is, never the secret."""
    return [
        SecretFinding(
            session=session,
            entry_id=entry_id[:200],
            line_no=line_no,
            kind=f.kind[:64],
            path=f.path,
            start=f.start,
            end=f.end,
            fingerprint=f.fingerprint,
            preview=f.preview,
            rules_version=f.rules_version,
        )
        for f in scan_entry(value, key=key)
    ]


# The entry id of a finding in the session's header (the header is no entry): its cwd or
# parentSession may hold a secret as well as any entry.
HEADER_FINDING = ""


def header_findings(session: Session, key: bytes) -> list[SecretFinding]:
    """Unsaved finding rows for the session's header line (``cwd``, ``parentSession`` and
    whatever else a file writes there)."""
    try:
        header = jsonfmt.loads(session.header_raw)
    except ValueError:
        return []
    if not isinstance(header, dict):
        return []
    return findings_for(session, HEADER_FINDING, session.header_position + 1, header, key)


def secrets_current(session: Session, *, scanned: bool = False) -> bool:
    """Make the session's findings match the current rules; True when it rescanned.

    ``scanned``: every entry was just scanned by the import (a new session), so only the
    version is recorded. Runs inside the caller's transaction.
    """
    if session.secrets_rules == RULES_VERSION:
        return False
    if not scanned:
        rescan_session(session)
    session.secrets_rules = RULES_VERSION
    Session.objects.filter(pk=session.pk).update(secrets_rules=RULES_VERSION)
    return not scanned


def rescan_session(session: Session) -> int:
    """Scan every stored entry again with the current rules; decisions survive.

    A new finding takes the status of the old one at the same (entry id, path,
    fingerprint), so a false positive stays one after a rules change. Returns the count.
    """
    key = conf.secrets_key()
    old = {
        (f.entry_id, f.path, f.fingerprint): (f.status, f.status_by_id)
        for f in SecretFinding.objects.filter(session=session)
    }
    new: list[SecretFinding] = []
    for f in header_findings(session, key):
        f.status, f.status_by_id = old.get(
            (f.entry_id, f.path, f.fingerprint), (SecretFinding.OPEN, None)
        )
        new.append(f)
    rows = Entry.objects.filter(session=session).order_by("position")
    for entry_id, line_no, raw in rows.values_list("entry_id", "line_no", "raw").iterator(500):
        try:
            value = jsonfmt.loads(raw)
        except ValueError:
            continue
        for f in findings_for(session, entry_id, line_no, value, key):
            f.status, f.status_by_id = old.get(
                (f.entry_id, f.path, f.fingerprint), (SecretFinding.OPEN, None)
            )
            new.append(f)
    SecretFinding.objects.filter(session=session).delete()
    SecretFinding.objects.bulk_create(new, batch_size=500)
    Session.objects.filter(pk=session.pk).update(secrets_rules=RULES_VERSION)
    session.secrets_rules = RULES_VERSION
    return len(new)


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


_BOM_NOTE = (
    " The file starts with a UTF-8 byte order mark (bytes EF BB BF), which Pi's JSON parser "
    "refuses, so Pi skips line 1; save the file without it."
)


def find_header(data: bytes) -> tuple[dict | None, int, str, list[Problem]]:
    """Locate the header the way Pi does: the first kept value decides."""
    header, index, line, problems = _find_header(data)
    if header is None and _slice(data, 0, 3) == b"\xef\xbb\xbf":
        problems = [
            Problem(p.line, p.severity, p.code, p.message + _BOM_NOTE, p.entry_id) for p in problems
        ]
    return header, index, line, problems


def _find_header(data: bytes) -> tuple[dict | None, int, str, list[Problem]]:
    problems: list[Problem] = []
    for index, piece, _terminated in _iter_lines(data):
        line, _ok = _decode(piece)
        if line[:1] != "{" and not line.strip(_JS_WS):
            continue
        ok, value = _parse(line)
        if not ok:
            continue
        if is_falsy(value):
            continue
        if (
            isinstance(value, dict)
            and value.get("type") == "session"
            and isinstance(value.get("id"), str)
        ):
            if len(value["id"]) > MAX_ID_LENGTH:
                problems.append(_long_id(index + 1, "session id", value["id"]))
                return None, index, line, problems
            return value, index, line, problems
        what = "an object" if isinstance(value, dict) else f"a {type(value).__name__} value"
        problems.append(
            Problem(
                index + 1,
                "error",
                "not-a-session",
                f"Not a Pi session: the first record is {what}, not a session header "
                '(an object with "type":"session" and a string "id").',
            )
        )
        return None, index, line, problems
    problems.append(
        Problem(0, "error", "not-a-session", "Not a Pi session: the file holds no JSON record.")
    )
    return None, -1, "", problems


def _ends_nl(data: bytes, end: int) -> bool:
    return end > 0 and _slice(data, end - 1, end) == b"\n"


def _version_of(header: dict) -> int:
    version = header.get("version")
    if version is None:
        return 1
    if isinstance(version, bool) or not isinstance(version, (int, float)):
        return 1
    return int(version) if version == version else 1


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


def _full_report(data, consumed: int, scan_problems: list[Problem]) -> list[Problem]:
    """Merge the engine's diagnostics (small files) with the streaming pass's findings."""
    if consumed > FULL_VALIDATION_LIMIT:
        return scan_problems
    if isinstance(data, _FileSource) or consumed != len(data):
        data = _slice(data, 0, consumed)
    try:
        from explorer.session import diagnostics
    except ImportError:
        return scan_problems
    validate = getattr(diagnostics, "validate_bytes", None)
    if validate is None:
        return scan_problems
    try:
        report = validate(data)
    except Exception:  # a diagnostics bug must not block an otherwise good import
        logger.exception("validate_bytes failed; using the importer's own checks")
        return scan_problems
    merged: list[Problem] = []
    seen: set[tuple[int, str]] = set()
    # The engine calls a line too deep for Python's parser malformed; ours names the depth.
    deep = {p.line for p in scan_problems if p.code == "too-deep"}
    for p in report.problems:
        if p.line in deep and p.code == "malformed-line":
            continue
        problem = Problem(p.line, p.severity, p.code, p.message, getattr(p, "entry_id", None))
        merged.append(problem)
        seen.add((problem.line, problem.severity))
    for p in scan_problems:
        # Ours count where the engine reported nothing of that severity on that line.
        if (p.line, p.severity) not in seen:
            merged.append(p)
    merged.sort(key=lambda p: (p.line, p.severity != "error"))
    return merged


def _scan_lines(
    data: bytes,
    start: int,
    consumed: int,
    first_index: int,
    header_index: int | None,
    scan: _Scan,
) -> Iterator[_Line]:
    """Classify each line after ``start`` (byte offset); ``first_index`` is its line index."""
    progress = _progress.get()
    for rel_index, piece, _terminated in _iter_lines(data, start, consumed):
        index = first_index + rel_index
        if progress is not None:
            progress.bytes += len(piece) + 1
            progress.tick()
        if header_index is not None and index == header_index:
            continue
        line, valid_utf8 = _decode(piece)
        raw_bytes = None if valid_utf8 else piece
        if not valid_utf8:
            scan.add(
                Problem(
                    index + 1,
                    "warning",
                    "invalid-utf8",
                    "Line is not valid UTF-8; invalid bytes read as U+FFFD (original bytes kept).",
                )
            )
        if line[:1] != "{" and not line.strip(_JS_WS):
            yield _Line(index, line, raw_bytes, None, "blank", piece)
            continue
        ok, value = _parse(line)
        if not ok and value == _TOO_DEEP:
            scan.add(
                Problem(
                    index + 1,
                    "warning",
                    "too-deep",
                    f"JSON nested {jsonfmt.nesting_depth(line):,} levels deep: Pi reads it, "
                    "this app reads about 1,000 levels, so the line is kept verbatim (the "
                    "export is unchanged) but is not part of the tree here.",
                )
            )
        elif not ok:
            scan.add(
                Problem(
                    index + 1,
                    "warning",
                    "malformed-line",
                    f"Malformed JSON, skipped by Pi: {_excerpt(line)}",
                )
            )
        if not ok:
            yield _Line(index, line, raw_bytes, None, "malformed", piece)
            continue
        if header_index is not None and index < header_index:
            # Before the header only blank, malformed and falsy lines can occur.
            yield _Line(index, line, raw_bytes, None, "falsy", piece)
            continue
        if not isinstance(value, dict):
            if is_falsy(value):
                yield _Line(index, line, raw_bytes, None, "falsy", piece)
            else:
                scan.add(
                    Problem(
                        index + 1,
                        "warning",
                        "non-object-line",
                        f"A {type(value).__name__} value, not an entry; dropped "
                        "(Pi keeps it and its index breaks).",
                    )
                )
                yield _Line(index, line, raw_bytes, None, "non_object", piece)
            continue
        if value.get("type") == "session":
            scan.add(
                Problem(
                    index + 1,
                    "warning",
                    "extra-header",
                    "A second session header; Pi ignores it in the tree.",
                )
            )
            yield _Line(index, line, raw_bytes, None, "session", piece)
            continue
        entry_id = value.get("id")
        if not isinstance(entry_id, str) or not entry_id:
            scan.add(
                Problem(
                    index + 1,
                    "warning",
                    "bad-id",
                    "Entry without a string id; kept but not part of the tree.",
                )
            )
            yield _Line(index, line, raw_bytes, value=None, kind="no_id", original=piece)
            continue
        nbytes = len(piece)
        del piece  # decoded and parsed: the bytes are not needed while the entry is stored
        yield _Line(index, line, raw_bytes, value, "entry", nbytes=nbytes)


def _store_lines(
    lines: Iterable[_Line],
    session: Session,
    scan: _Scan,
    writer: _Writer,
    position_of,
) -> dict[str, Any]:
    """Turn classified lines into rows; returns counters for the session."""
    stats = {"entries": 0, "compactions": 0, "context_edits": 0, "name": None}
    progress = _progress.get()
    for item in lines:
        position = position_of(item.index)
        if item.kind != "entry":
            if not scan.failed:
                writer.extra(
                    ExtraLine(
                        session=session,
                        position=position,
                        line_no=position + 1,
                        kind=item.kind,
                        raw=item.original or b"",
                    )
                )
            continue
        value = item.value
        entry_id = value["id"]
        fields = entry_fields(value)
        line_no = item.index + 1
        if "\\u" in item.raw and _unstorable(entry_id, line_no, scan):
            continue
        for key, what in ((entry_id, "entry id"), (fields["parent_id"], "parentId")):
            if key is not None and len(key) > MAX_ID_LENGTH:
                scan.add(_long_id(line_no, what, key))
        target = value.get("targetId")
        if isinstance(target, str) and len(target) > MAX_ID_LENGTH:
            scan.add(_long_id(line_no, "targetId", target))
        if entry_id in scan.existing:
            # Already stored (e.g. appended live while Pi wrote the file): the same line is
            # fine, a different one would rewrite history.
            stored = (
                Entry.objects.filter(session_id=scan.session_pk, entry_id=entry_id)
                .values_list("raw", flat=True)
                .first()
            )
            if stored != item.raw:
                scan.add(
                    Problem(
                        line_no,
                        "error",
                        "conflict",
                        f"Entry {entry_id} differs from the stored copy; "
                        "stored history is never changed.",
                        entry_id,
                    )
                )
            continue
        if entry_id in scan.ids:
            scan.add(
                Problem(
                    line_no,
                    "error",
                    "duplicate-id",
                    f"Duplicate entry id {entry_id} (first on line {scan.first_line[entry_id]}); "
                    "Pi would keep only the later one in its index.",
                    entry_id,
                )
            )
            continue
        parent = fields["parent_id"]
        scan.ids[entry_id] = parent
        scan.first_line[entry_id] = line_no
        if parent is None:
            depth = 0
        elif parent in scan.depth and parent not in scan.pending_depth:
            depth = scan.depth[parent] + 1
        else:
            # The parent comes later in the file (or never): settled after the pass.
            depth = 0
            scan.pending_depth.add(entry_id)
        scan.depth[entry_id] = depth
        stats["entries"] += 1
        if progress is not None:
            progress.entries += 1
        if fields["type"] == "compaction":
            stats["compactions"] += 1
        elif fields["type"] == "context_edit":
            stats["context_edits"] += 1
        elif fields["type"] == "session_info":
            stats["name"] = session_name_of(value)
        if scan.failed:
            continue
        writer.entry(
            entry_id=entry_id,
            position=position,
            depth=depth,
            raw=item.raw,
            raw_bytes=item.raw_bytes,
            size=item.nbytes,
            fields=fields,
            value=value,
        )
    return stats


def _unstorable(entry_id: str, line_no: int, scan: _Scan) -> bool:
    """Columns hold the visible form of an id (lone surrogates and NUL as U+FFFD, see
    ``explorer.dbtext``); two ids Pi tells apart that look the same there cannot both be
    stored, so the second is refused with its line."""
    shown = jsonfmt.visible(entry_id)
    first = scan.visible_ids.setdefault(shown, entry_id)
    if first == entry_id:
        return False
    scan.add(
        Problem(
            line_no,
            "error",
            "duplicate-id",
            f"Entry id {shown} differs from the id on line {scan.first_line.get(first, 0)} "
            "only in invalid Unicode (lone surrogates or NUL), which cannot be stored apart.",
            shown,
        )
    )
    return True


def _resolve_pending(session: Session, scan: _Scan) -> None:
    """Depths of entries whose parent came later in the file, and parent problems."""
    # In file order, so the same file always gives the same report (a set's order varies).
    for entry_id in sorted(scan.pending_depth, key=lambda e: scan.first_line.get(e, 0)):
        chain: list[str] = []
        seen: set[str] = set()
        current: str | None = entry_id
        depth_base = None
        while current is not None:
            if current in seen:
                members = " → ".join(chain[chain.index(current) :] + [current])
                scan.add(
                    Problem(
                        scan.first_line.get(entry_id, 0),
                        "error",
                        "parent-cycle",
                        f"Parent cycle: {members}; Pi would loop forever.",
                        entry_id,
                    )
                )
                depth_base = 0
                break
            seen.add(current)
            chain.append(current)
            parent = scan.ids.get(current)
            if parent is None:
                depth_base = 0
                break
            if parent not in scan.ids:
                scan.add(
                    Problem(
                        scan.first_line.get(current, 0),
                        "warning",
                        "dangling-parent",
                        f"Entry {current} names a parent {parent} that does not exist; "
                        "its path stops there.",
                        current,
                    )
                )
                depth_base = 0
                break
            if parent not in scan.pending_depth and parent in scan.depth:
                depth_base = scan.depth[parent] + 1
                break
            current = parent
        if scan.failed:
            return
        # chain[0] is entry_id; the last element has depth depth_base.
        for offset, member in enumerate(reversed(chain)):
            depth = (depth_base or 0) + offset
            scan.depth[member] = depth
            scan.pending_depth.discard(member)
            if depth:
                scan.fixed[member] = depth


def _finish_session(session: Session, scan: _Scan, writer: _Writer) -> None:
    writer.finish_child_counts()
    writer.figures.finish()
    for entry_id, depth in scan.fixed.items():
        Entry.objects.filter(session=session, entry_id=entry_id).update(depth=depth)
    refresh_counters(session, scan)


def refresh_counters(session: Session, scan: _Scan | None = None) -> None:
    """Recount what the list page shows. After an import the scan knows every id and parent,
    which spares a pass over the table."""
    entries = Entry.objects.filter(session=session)
    if scan is not None:
        ids = scan.ids
        session.entry_count = len(ids)
        session.leaf_count = len(ids) - len({p for p in ids.values() if p is not None and p in ids})
    else:
        session.entry_count = entries.count()
        session.leaf_count = entries.filter(child_count=0).count()
    session.compaction_count = entries.filter(type="compaction").count()
    session.context_edit_count = entries.filter(type="context_edit").count()
    last = entries.order_by("-position").values_list("position", flat=True).first()
    extra_last = ExtraLine.objects.filter(session=session).aggregate(m=Max("position"))["m"]
    highest = max(x for x in (last, extra_last, session.header_position) if x is not None)
    session.next_position = highest + 1
    session.warning_count = ImportProblem.objects.filter(session=session).count()
    session.save()
    sync_default_leaf(session)


def _update_warning_count(session: Session) -> None:
    session.warning_count = ImportProblem.objects.filter(session=session).count()
    session.save(update_fields=["warning_count"])


def sync_default_leaf(session: Session) -> Leaf:
    """Point the file's own cursor ("default") at its last entry."""
    last = (
        Entry.objects.filter(session=session)
        .order_by("-position")
        .values_list("entry_id", flat=True)
        .first()
    )
    leaf, _ = Leaf.objects.update_or_create(
        session=session, name=Leaf.DEFAULT, defaults={"entry_id": last, "user": None}
    )
    return leaf


def _save_problems(session: Session, problems: list[Problem]) -> None:
    ImportProblem.objects.bulk_create(
        [
            ImportProblem(
                session=session,
                line=p.line,
                severity=p.severity,
                code=p.code[:64],
                message=p.message,
                entry_id=(p.entry_id or "")[:200],
            )
            for p in problems
            if p.severity == "warning"
        ]
    )


def _header_fields(header: dict) -> dict[str, Any]:
    def text(key: str) -> str:
        value = header.get(key)
        return value if isinstance(value, str) else ""

    from explorer.session.formats.pi_form import agent_of_stored_id

    return {
        "cwd": text("cwd"),
        "header_timestamp": text("timestamp")[:64],
        "parent_session": text("parentSession"),
        "agent": agent_of_stored_id(text("id")),  # Session.agent: a Claude Code/Codex form
    }


# An import whose process is gone, or that has not committed a batch for this long, is
# abandoned: its hidden rows are deleted by the next import or by ``serve`` starting.
IMPORT_STALE_SECONDS = 600


def import_owner() -> str:
    """Who runs an import: this host and process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _abandoned(session: Session) -> bool:
    host, _, pid = session.import_owner.rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True  # killed (kill -9, a crash, a full disk that ended the process)
        except PermissionError:
            pass
    beat = session.import_heartbeat or session.created
    return (timezone.now() - beat).total_seconds() > IMPORT_STALE_SECONDS


def discard(session: Session) -> None:
    """Delete a session whose first import did not finish (its committed batches)."""
    with transaction.atomic():
        Session.every.filter(pk=session.pk).delete()


def clear_abandoned() -> int:
    """Delete the hidden rows of imports that will never finish; returns how many."""
    gone = 0
    for session in Session.every.filter(state=Session.IMPORTING):
        if _abandoned(session):
            logger.warning("removing the unfinished import of session %s", session.session_id)
            discard(session)
            gone += 1
    return gone


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


def _existing_scan(session: Session) -> _Scan:
    scan = _Scan(session_pk=session.pk)
    for entry_id, parent, depth, line_no in Entry.objects.filter(session=session).values_list(
        "entry_id", "parent_id", "depth", "line_no"
    ):
        scan.ids[entry_id] = parent
        scan.depth[entry_id] = depth
        scan.first_line[entry_id] = line_no
    scan.existing = set(scan.ids)
    return scan


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
    session.missing_final_newline = not _ends_nl(data, consumed)
    session.source_size = consumed
    session.source_sha256 = _sha256(data, consumed)
    if source_path:
        session.source_path = source_path
    session.save()
    _save_problems(session, scan.problems)
    _update_warning_count(session)
    result.added = stats["entries"]
    result.new_entries = writer.created(result.added)


def _digest(raw: str) -> bytes:
    return hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _merge_by_id(data, consumed, session: Session, result, user):
    """The file changed other than by growing (e.g. rewritten elsewhere): add the entries
    whose ids we do not have; an id we have with different content is a conflict."""
    if session.source_version < 3:
        result.problems.append(
            Problem(
                0,
                "error",
                "legacy-changed",
                f"This session was imported from a version {session.source_version} file and "
                "stored migrated; the file has changed since (Pi rewrites such files with new "
                "entry ids when it opens them), so it cannot be merged. Delete the stored session "
                "and import the file again.",
            )
        )
        return
    # Digests, not the stored lines: a 2 GB session is compared without holding it.
    stored = {
        entry_id: _digest(raw)
        for entry_id, raw in Entry.objects.filter(session=session)
        .values_list("entry_id", "raw")
        .iterator(chunk_size=200)
    }
    scan = _existing_scan(session)
    header_index = None
    fresh: set[str] = set()
    fresh_count = 0
    common = 0
    progress = _progress.get()
    for item in _scan_lines(data, 0, consumed, 0, header_index, _Scan()):
        if item.kind != "entry":
            continue
        entry_id = item.value["id"]
        if entry_id in stored:
            common += 1
            if stored[entry_id] != _digest(item.raw):
                scan.add(
                    Problem(
                        item.index + 1,
                        "error",
                        "conflict",
                        f"Entry {entry_id} differs from the stored copy; "
                        "stored history is never changed.",
                        entry_id,
                    )
                )
            continue
        fresh.add(entry_id)
        fresh_count += 1
    if stored and fresh and not common:
        scan.add(
            Problem(
                0,
                "error",
                "conflict",
                "The file shares no entry with the stored session of the same id; "
                "it is another history, not a newer copy. Nothing was imported.",
            )
        )
    if not fresh or scan.failed:
        if not scan.failed:
            result.unchanged = True
        result.problems.extend(scan.problems)
        return
    base = session.next_position
    counter = iter(range(base, base + fresh_count))
    writer = _Writer(session, None)
    if progress is not None:
        progress.bytes = 0  # the second pass stores the new entries, in file order
    again = (
        item
        for item in _scan_lines(data, 0, consumed, 0, header_index, _Scan())
        if item.kind == "entry" and item.value["id"] in fresh
    )
    stats = _store_lines(again, session, scan, writer, position_of=lambda index: next(counter))
    writer.flush()
    _resolve_pending(session, scan)
    result.problems.extend(scan.problems)
    if not result.ok:
        return
    _finish_session(session, scan, writer)
    if stats["name"] is not None:
        session.name = stats["name"]
    session.missing_final_newline = False
    session.source_size = consumed
    session.source_sha256 = _sha256(data, consumed)
    session.save()
    _save_problems(session, scan.problems)
    _update_warning_count(session)
    result.added = stats["entries"]
    result.new_entries = writer.created(result.added)


def _import_legacy(data, header, existing, result, user, source_path, rng):
    """Version 1/2 files are stored in their migrated version-3 form, as Pi rewrites them
    on open; the original bytes are kept on the session."""
    from explorer.session import entries as entry_mod
    from explorer.session import loading

    if existing is not None:
        original = bytes(existing.source_original or b"")
        if data == original:
            result.session = existing
            result.unchanged = True
            return
        if data.startswith(original) and original.endswith(b"\n"):
            _legacy_more(data, original, existing, result, rng)
            return
        result.session = existing
        result.problems.append(
            Problem(
                0,
                "error",
                "legacy-changed",
                "This legacy-version session was imported before and the file has changed "
                "other than by growing; it cannot be merged.",
            )
        )
        return
    loaded = loading.parse_bytes(data)
    scan_problems = _full_report(data, len(data), [])
    if not any(p.code == "legacy-version" for p in scan_problems):
        scan_problems.append(
            Problem(
                0,
                "warning",
                "legacy-version",
                f"Legacy version {_version_of(header)} file; stored migrated to version 3 "
                "(original bytes kept).",
            )
        )
    result.problems.extend(scan_problems)
    if not result.ok:
        return
    entries = loaded.entries
    if rng is None:
        # The ids `pisession` derives when it migrates the same bytes in memory (seeded by
        # their hash): an id copied from a page works on the CLI with the original file.
        from explorer.session.ids import deterministic_rng

        rng = deterministic_rng(hashlib.sha256(data).digest())
    entry_mod.migrate_session_entries(entries, rng)
    lines = [jsonfmt.dumps(e) for e in entries]
    migrated = ("\n".join(lines) + "\n").encode("utf-8", errors="surrogatepass")
    session = Session.objects.create(
        session_id=header["id"],
        version=3,
        source_version=_version_of(header),
        header_raw=lines[0],
        header_position=0,
        source_path=source_path,
        imported_by=user,
        source_original=data,
        **_header_fields(entries[0]),
    )
    scan = _Scan()
    writer = _Writer(session, None)
    writer.findings.extend(header_findings(session, writer.secrets_key))
    items = _scan_lines(migrated, 0, len(migrated), 0, 0, scan)
    stats = _store_lines(items, session, scan, writer, position_of=lambda index: index)
    writer.flush()
    _resolve_pending(session, scan)
    result.problems.extend(p for p in scan.problems if p.severity == "error")
    if not result.ok:
        return
    _finish_session(session, scan, writer)
    session.name = stats["name"] or ""
    session.source_size = len(data)
    session.source_sha256 = hashlib.sha256(data).hexdigest()
    session.save()
    _save_problems(session, result.problems)
    _update_warning_count(session)
    result.session = session
    result.created = True
    result.added = stats["entries"]
    result.new_entries = writer.created(result.added)


def _store_scanned(
    session: Session, scan: Any, lines: Any, base: int, result: Any
) -> tuple[dict[str, Any], _Writer] | None:
    """Store scanned lines after position `base` of an existing session.

    Returns None, with the problems recorded on `result` and the session left unfinished,
    when the scan found a blocking problem (the caller's transaction then rolls back).
    """
    writer = _Writer(session, None)
    stats = _store_lines(lines, session, scan, writer, position_of=lambda index: base + index)
    writer.flush()
    _resolve_pending(session, scan)
    result.problems.extend(scan.problems)
    if not result.ok:
        return None
    _finish_session(session, scan, writer)
    if stats["name"] is not None:
        session.name = stats["name"]
    return stats, writer


def _legacy_more(data, original, session: Session, result, rng):
    """A legacy file that grew: migrate only the new lines, continuing the parent chain."""
    from explorer.session import entries as entry_mod
    from explorer.session import loading

    result.session = session
    tail = data[len(original) :]
    loaded = loading.parse_bytes(b'{"type":"session","id":"continuation"}\n' + tail)
    new = loaded.entries[1:]
    if not new:
        session.source_original = data
        session.source_size = len(data)
        session.save(update_fields=["source_original", "source_size"])
        result.unchanged = True
        return
    fake = [{"type": "session", "version": 1, "id": session.session_id}, *new]
    entry_mod.migrate_session_entries(fake, rng)
    previous = (
        Entry.objects.filter(session=session, author__isnull=True)
        .order_by("-position")
        .values_list("entry_id", flat=True)
        .first()
    )
    if new and previous is not None:
        new[0]["parentId"] = previous
    text = "\n".join(jsonfmt.dumps(e) for e in new) + "\n"
    scan = _existing_scan(session)
    base = session.next_position
    encoded = text.encode("utf-8", errors="surrogatepass")
    items = _scan_lines(encoded, 0, len(encoded), 0, None, scan)
    stored = _store_scanned(session, scan, items, base, result)
    if stored is None:
        return
    stats, writer = stored
    session.source_original = data
    session.source_size = len(data)
    session.source_sha256 = hashlib.sha256(data).hexdigest()
    session.save()
    result.added = stats["entries"]
    result.new_entries = writer.created(result.added)


# ---------------------------------------------------------------------------------------------
# Export


def iter_export(session: Session) -> Iterator[bytes]:
    """The session's file, chunk by chunk (a 200 MB session is never joined in memory)."""
    extras = list(
        ExtraLine.objects.filter(session=session)
        .order_by("position")
        .values_list("position", "raw")
    )
    header = (session.header_position, session.header_raw.encode("utf-8", errors="surrogatepass"))
    pending = sorted([header, *((p, bytes(r)) for p, r in extras)])
    rows = (
        Entry.objects.filter(session=session)
        .order_by("position")
        .values_list("position", "raw", "raw_bytes")
        .iterator(chunk_size=500)
    )
    out: list[bytes] = []
    size = 0
    first = True

    def emit(line: bytes) -> None:
        nonlocal first, size
        if not first:
            out.append(b"\n")
        first = False
        out.append(line)
        size += len(line) + 1

    i = 0
    for position, raw, raw_bytes in rows:
        while i < len(pending) and pending[i][0] < position:
            emit(pending[i][1])
            i += 1
        emit(
            bytes(raw_bytes)
            if raw_bytes is not None
            else raw.encode("utf-8", errors="surrogatepass")
        )
        if size >= 1024 * 1024:
            yield b"".join(out)
            out = []
            size = 0
    while i < len(pending):
        emit(pending[i][1])
        i += 1
    if not session.missing_final_newline:
        out.append(b"\n")
    if out:
        yield b"".join(out)


def export_bytes(session: Session) -> bytes:
    return b"".join(iter_export(session))


def redact_chunks(chunks: Iterable[bytes], *, allow: Iterable[str], key: bytes) -> Iterator[bytes]:
    """A session file's chunks with every secret masked, line by line (the download for
    viewers and editors). Still a valid session: only masked lines change; ``allow`` holds
    the fingerprints left in clear (false positives)."""
    allowed = frozenset(allow)
    rest = b""
    for chunk in chunks:
        data = rest + chunk
        cut = data.rfind(b"\n") + 1
        if cut:
            yield redact_bytes(data[:cut], allow=allowed, key=key)
        rest = data[cut:]
    if rest:
        yield redact_bytes(rest, allow=allowed, key=key)


def export_filename(session: Session) -> str:
    from explorer.session.paths import file_timestamp

    stamp = file_timestamp(session.header_timestamp) if session.header_timestamp else "session"
    safe_id = "".join(c for c in session.session_id if c.isalnum() or c in "-_.")[:80]
    return f"{stamp}_{safe_id}.jsonl"


# ---------------------------------------------------------------------------------------------
# Derived sessions


def _source_label(session: Session) -> str:
    return session.source_path or f"db:{session.session_id}"


def _lines_bytes(entries: Iterable[Any]) -> bytes:
    return "".join(jsonfmt.dumps(e) + "\n" for e in entries).encode("utf-8", errors="surrogatepass")


def branch_bytes(session: Session, leaf_id: str, *, clock=None, rng=None) -> bytes:
    """A new session file holding only root → ``leaf_id``, built by the engine's
    ``create_branched_session`` (labels on the route re-created). Only the path and the
    session's label entries are read, which is all that operation looks at."""
    from explorer.session.errors import SessionError
    from explorer.session.manager import SessionManager

    pks = path_pks(session, leaf_id)
    if not pks:
        raise SessionError(f"Entry {leaf_id} not found")
    rows = (
        (
            Entry.objects.filter(session=session, pk__in=pks)
            | Entry.objects.filter(session=session, type="label")
        )
        .order_by("position")
        .values_list("raw", flat=True)
    )
    entries = [session.header(), *(jsonfmt.loads(raw) for raw in rows.iterator(chunk_size=500))]
    manager = SessionManager.in_memory(session.cwd or None, None, entries, clock=clock, rng=rng)
    manager.create_branched_session(leaf_id)
    header = dict(manager.get_header())
    with_parent: dict[str, Any] = {}
    for key, value in header.items():
        with_parent[key] = value
        if key == "cwd":
            with_parent["parentSession"] = _source_label(session)
    if "parentSession" not in with_parent:
        with_parent["parentSession"] = _source_label(session)
    return _lines_bytes([with_parent, *manager.get_entries()])


def fork_bytes(session: Session, *, cwd: str | None = None, clock=None, rng=None) -> bytes:
    """A new session file with every entry of this one (all branches) under a new header for
    ``cwd``: the ``fork_from`` semantics (entries re-serialized, no migration)."""
    from explorer.session import ids

    now = ids.now_ms() if clock is None else clock()
    header = {
        "type": "session",
        "version": 3,
        "id": ids.uuid7(now, rng),
        "timestamp": jsonfmt.iso_from_ms(now),
        "cwd": cwd if cwd is not None else session.cwd,
        "parentSession": _source_label(session),
    }
    no_id = dict(
        ExtraLine.objects.filter(session=session, kind="no_id").values_list("position", "raw")
    )
    chunks = [jsonfmt.dumps(header).encode() + b"\n"]
    rows = (
        Entry.objects.filter(session=session)
        .order_by("position")
        .values_list("position", "raw")
        .iterator(chunk_size=500)
    )
    pending = sorted(no_id.items())
    i = 0
    for position, raw in rows:
        while i < len(pending) and pending[i][0] < position:
            chunks.append(_lines_bytes([jsonfmt.loads(bytes(pending[i][1]))]))
            i += 1
        chunks.append(_lines_bytes([jsonfmt.loads(raw)]))
    for _pos, raw in pending[i:]:
        chunks.append(_lines_bytes([jsonfmt.loads(bytes(raw))]))
    return b"".join(chunks)


# ---------------------------------------------------------------------------------------------
# The search index: each entry's visible text, stored once when it arrives


_TEXT_COLUMNS = ("session_id", "entry_id", "position", "type", "role", "text")


def search_row(
    session_pk: int,
    entry_id: str,
    position: int,
    fields: dict[str, Any],
    value: Any,
    *,
    escaped: bool = True,
) -> tuple | None:
    """One search-index row for a parsed entry, or None when it shows no text.

    Secrets never enter the index: no query can match inside one or show it in a snippet.
    Raw SQL skips the fields' conversion, so lone surrogates / NUL show as U+FFFD here too.
    ``escaped=False`` (the line has no ``\\u`` escape, so it cannot hold either) skips that
    pass over texts of several MB.
    """
    text = redact_for_search(entry_text(value)) if isinstance(value, dict) else ""
    if not text:
        return None
    if not escaped:
        return (
            session_pk,
            entry_id,
            position,
            fields.get("type") or "",
            fields.get("role") or "",
            text,
        )
    v = jsonfmt.visible
    kind = fields.get("type") or ""
    role = fields.get("role") or ""
    return (session_pk, v(entry_id), position, v(kind), v(role), v(text))


_FTS_TABLE = "explorer_entrytext_fts"  # SQLite's trigram index over EntryText (0008, 0012)


def store_search_rows(rows: list[tuple]) -> None:
    """Store these search rows (``search_row``'s tuples) and index them, as one step.

    The only writer of ``EntryText``: every path that stores entries (the importer's batches,
    and ``index_new_entries`` after web appends, follow and turns) comes through here, so
    none can store text that search cannot find. On SQLite the FTS5 trigram table is filled
    with one ``INSERT … SELECT`` over the rows just stored (migration 0012 dropped the
    per-row trigger, which made every multi-MB text its own FTS5 insert and was most of a
    big import's time). The rows are the ids above the highest one before the insert: the
    transaction holds SQLite's single write lock (``BEGIN IMMEDIATE``; in a deferred one a
    writer that committed after the read makes this insert fail), so no other writer's rows
    can land in between.
    PostgreSQL's pg_trgm index (0011) follows the table by itself. A session's rows come in
    file order (both callers store positions above every stored one, in order), so their
    ids run in file order too.
    """
    if not rows:
        return
    if any(a[0] == b[0] and a[2] >= b[2] for a, b in pairwise(rows)):
        # Search pages walk a session's rows in id order as file order (queries'
        # _first_hit_ids): a batch out of order would list its hits out of order.
        raise ValueError("search rows must be stored in file order")
    sqlite = connection.vendor == "sqlite"
    q = "?" if sqlite else "%s"
    table = connection.ops.quote_name(EntryText._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(c) for c in _TEXT_COLUMNS)
    sql = f"INSERT INTO {table} ({columns}) VALUES ({', '.join([q] * len(_TEXT_COLUMNS))})"
    with transaction.atomic():
        connection.ensure_connection()
        cursor = connection.connection.cursor()
        try:
            if sqlite:
                cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {table}")
                (before,) = cursor.fetchone()
            cursor.executemany(sql, rows)
            if sqlite:
                cursor.execute(
                    f"INSERT INTO {_FTS_TABLE}(rowid, text) SELECT id, text FROM {table}"
                    " WHERE id > ?",
                    (before,),
                )
        finally:
            cursor.close()


def index_new_entries(session: Session) -> int:
    """Store the visible text of every entry not indexed yet; returns how many rows.

    Entries only ever arrive with higher positions, so everything above the highest indexed
    position is new (entries without text are skipped, so a trailing textless entry is read
    again next time and skipped again; that is cheap). Called inside the transaction that
    stored the entries, so the index never lags behind what a page can show. The importer
    fills the index itself while it streams (``search_row``); this catches what other writers
    (edits, follow appends, turns) stored.
    """
    mark = EntryText.objects.filter(session=session).aggregate(m=Max("position"))["m"]
    rows = Entry.objects.filter(session=session)
    if mark is not None:
        rows = rows.filter(position__gt=mark)
    batch: list[tuple] = []
    added = 0
    for eid, position, kind, role, raw in (
        rows.order_by("position")
        .values_list("entry_id", "position", "type", "role", "raw")
        .iterator(chunk_size=2000)
    ):
        try:
            data = jsonfmt.loads(raw)
        except ValueError:
            continue
        row = search_row(session.pk, eid, position, {"type": kind, "role": role}, data)
        if row is not None:
            batch.append(row)
        if len(batch) >= 500:
            store_search_rows(batch)
            added += len(batch)
            batch = []
    if batch:
        store_search_rows(batch)
        added += len(batch)
    return added
