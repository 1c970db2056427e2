"""Line scanning: one streaming pass over a file's lines (:class:`_Scan`), the header's
search, the fields of an entry as stored, and the problems found on the way.

Each line keeps its original text, so an export gives back the bytes imported. Files up to
``FULL_VALIDATION_LIMIT`` also get the engine's full diagnostics report, merged here.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from explorer.files.progress import _progress
from explorer.session import jsonfmt
from explorer.session.describe import COSTED_TYPES, cost_of
from explorer.session.loading import is_falsy

logger = logging.getLogger(__name__)


# Files up to this size also get the engine's full diagnostics report (it holds the parsed
# file in memory); larger files rely on the streaming checks here alone.
FULL_VALIDATION_LIMIT = 32 * 1024 * 1024
MAX_PROBLEMS = 500
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


def changed_entry(line_no: int, entry_id: str) -> Problem:
    """The blocking problem of a line whose id is stored with other content."""
    return Problem(
        line_no,
        "error",
        "conflict",
        f"Entry {entry_id} differs from the stored copy; stored history is never changed.",
        entry_id,
    )


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
