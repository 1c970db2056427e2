"""Reading session files tolerantly, exactly as Pi does (SPEC section 1.7).

One pass over the bytes keeps, for every record, its parsed value, its original line text and
its 1-based line number. The original text is what makes a version-3 file reproducible byte for
byte (export, database import) without ever re-serializing what was read; diagnostics use the
same pass to name the lines Pi silently skips.

Speed matters (tens of thousands of entries per file): lines are split as bytes and decoded one
by one, so a single non-ASCII line does not widen every other line's string, and orjson parses
every line except the rare ones that may carry integer-like keys (JavaScript orders those first;
`jsonfmt.loads` handles them).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from . import jsonfmt

__all__ = [
    "HEADER_SCAN_LIMIT",
    "HeaderScanLimitError",
    "LoadedFile",
    "discover_header",
    "is_valid_header",
    "load_entries_from_file",
    "parse_bytes",
    "parse_session_entries",
    "read_session_header",
]

HEADER_SCAN_LIMIT = 1024 * 1024

# A key made of a canonical array index, possibly followed by whitespace and the colon.
_INDEX_KEY_BYTES = re.compile(rb'"(?:0|[1-9][0-9]{0,9})"[ \t\r\n]*:')
_JS_WS = jsonfmt.JS_WHITESPACE


def _is_blank(line: str) -> bool:
    return not line or not line.strip(_JS_WS)


def _is_falsy(value: Any) -> bool:
    # JSON values only: null, false, 0, -0 and "" are falsy in JavaScript.
    return value is None or value is False or value == "" or (
        type(value) in (int, float) and value == 0
    )


def is_valid_header(value: Any) -> bool:
    """A header is an object with `type == "session"` and a string `id`."""
    return type(value) is dict and value.get("type") == "session" and isinstance(value.get("id"), str)


@dataclass(slots=True)
class LoadedFile:
    """Result of one tolerant pass over a session file's bytes.

    `entries`, `raw_lines` and `line_numbers` are aligned: the kept file entries (header first,
    objects only), the exact text of each one's line (without the newline) and its 1-based
    line number. When the header check fails all three are empty and `valid` is False.
    """

    entries: list[Any] = field(default_factory=list)
    raw_lines: list[str] = field(default_factory=list)
    line_numbers: list[int] = field(default_factory=list)
    valid: bool = False
    size: int = 0
    line_count: int = 0
    missing_final_newline: bool = False
    malformed: list[tuple[int, str]] = field(default_factory=list)
    """(line number, excerpt) of lines that failed to parse."""
    invalid_utf8: list[int] = field(default_factory=list)
    falsy: list[int] = field(default_factory=list)
    non_objects: list[tuple[int, Any]] = field(default_factory=list)
    """Truthy non-object values after the header: dropped here, kept by Pi."""
    first_value: Any = None
    first_value_line: int = 0


def _excerpt(line: str, limit: int = 80) -> str:
    return line if len(line) <= limit else line[:limit] + "…"


def parse_bytes(data: bytes | bytearray | memoryview) -> LoadedFile:
    """Parse a whole file's content per SPEC section 1.7 steps 2-4, without side effects."""
    data = bytes(data)
    result = LoadedFile(size=len(data))
    if not data:
        return result
    result.missing_final_newline = not data.endswith(b"\n")
    pieces = data.split(b"\n")
    if not result.missing_final_newline:
        pieces.pop()  # the empty text after the final newline is not a line
    result.line_count = len(pieces)

    slow_lines: set[int] = set()
    if _INDEX_KEY_BYTES.search(data) is not None:
        # Map every match back to its 0-based line so only those lines take the slow path.
        starts: list[int] = []
        pos = 0
        for piece in pieces:
            starts.append(pos)
            pos += len(piece) + 1
        import bisect

        for match in _INDEX_KEY_BYTES.finditer(data):
            slow_lines.add(bisect.bisect_right(starts, match.start()) - 1)

    entries: list[Any] = []
    raws: list[str] = []
    numbers: list[int] = []
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    have_header = False
    for index, piece in enumerate(pieces):
        try:
            line = piece.decode("utf-8")
        except UnicodeDecodeError:
            line = piece.decode("utf-8", errors="replace")
            result.invalid_utf8.append(index + 1)
        if line[:1] != "{" and _is_blank(line):
            continue
        if index in slow_lines:
            try:
                value = jsonfmt.loads(line)
            except (ValueError, RecursionError):
                result.malformed.append((index + 1, _excerpt(line)))
                continue
        else:
            try:
                value = loads(line)
            except decode_error:
                try:
                    value = jsonfmt.loads(line)
                except (ValueError, RecursionError):
                    result.malformed.append((index + 1, _excerpt(line)))
                    continue
        if type(value) is not dict:
            if _is_falsy(value):
                result.falsy.append(index + 1)
                continue
            if not have_header:
                # The first kept value decides; a non-object can never be a header.
                result.first_value = value
                result.first_value_line = index + 1
                return _invalid(result)
            result.non_objects.append((index + 1, value))
            continue
        if not have_header:
            result.first_value = value
            result.first_value_line = index + 1
            if not is_valid_header(value):
                return _invalid(result)
            have_header = True
        entries.append(value)
        raws.append(line)
        numbers.append(index + 1)
    if not have_header:
        return result
    result.entries = entries
    result.raw_lines = raws
    result.line_numbers = numbers
    result.valid = True
    return result


def _invalid(result: LoadedFile) -> LoadedFile:
    result.entries = []
    result.raw_lines = []
    result.line_numbers = []
    result.valid = False
    return result


def load_entries_from_file(path: str) -> list[Any]:
    """Pi's `loadEntriesFromFile`: kept file entries, `[]` for a missing or invalid file.

    Side effect, as in Pi: a valid file without a final newline gets one appended.
    """
    if not os.path.exists(path):
        return []
    with open(path, "rb") as fh:
        data = fh.read()
    loaded = parse_bytes(data)
    if loaded.valid and loaded.missing_final_newline:
        with open(path, "ab") as fh:
            fh.write(b"\n")
    return loaded.entries


def parse_session_entries(text: str) -> list[Any]:
    """Pi's `parseSessionEntries`: every parseable line, falsy values included, no header check."""
    out: list[Any] = []
    for line in jsonfmt.js_trim(text).split("\n"):
        if _is_blank(line):
            continue
        try:
            out.append(jsonfmt.loads(line))
        except (ValueError, RecursionError):
            continue
    return out


class HeaderScanLimitError(Exception):
    """Header discovery read 1 MiB without reaching a decision."""


def _header_candidate(raw: bytes) -> tuple[bool, dict | None]:
    """(decided, header) for one physical line."""
    line = raw.decode("utf-8", errors="replace")
    if _is_blank(line):
        return False, None
    try:
        value = jsonfmt.loads(line)
    except (ValueError, RecursionError):
        return False, None
    if _is_falsy(value):
        return False, None
    return True, value if is_valid_header(value) else None


def read_session_header(path: str) -> dict | None:
    """Header discovery (SPEC section 1.7): the first truthy parsed line decides.

    Raises `HeaderScanLimitError` when 1 MiB holds no decision and the file is longer; read
    errors propagate.
    """
    with open(path, "rb") as fh:
        chunk = fh.read(HEADER_SCAN_LIMIT)
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                break
            decided, header = _header_candidate(chunk[start:nl])
            if decided:
                return header
            start = nl + 1
        rest = chunk[start:]
        if len(chunk) < HEADER_SCAN_LIMIT or not fh.read(1):
            # End of file: a final line without a newline counts.
            return _header_candidate(rest)[1]
    raise HeaderScanLimitError(path)


def discover_header(path: str) -> dict | None:
    """Best-effort discovery: unreadable, oversized or invalid files are not sessions."""
    try:
        return read_session_header(path)
    except Exception:
        return None
