"""Validation report for a session file (SPEC Appendix D).

Pi is deliberately tolerant: it skips what it cannot parse and keeps going. A tool that
explores sessions must compute what Pi computes, yet tell the user what Pi silently absorbed.
This module only reports; it never changes what the loader or the projection compute, and it
never writes.

Severity: "error" when Pi would refuse the file, or when our importer cannot trust the tree
(duplicate ids, parentId cycles); "warning" for everything Pi tolerates.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from . import jsonfmt
from .entries import (
    CURRENT_SESSION_VERSION,
    migrate_session_entries,
    session_version,
    version_number,
)
from .gcpause import gc_paused
from .ids import deterministic_rng
from .loading import LoadedFile, parse_bytes

__all__ = [
    "KNOWN_ENTRY_TYPES",
    "Problem",
    "ValidationReport",
    "diagnose_tree",
    "index_ids",
    "validate_bytes",
    "validate_file",
]

Severity = Literal["error", "warning"]

KNOWN_ENTRY_TYPES = frozenset(
    {
        "message",
        "thinking_level_change",
        "model_change",
        "usage",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "context_edit",
        "label",
        "session_info",
    }
)
_EDITABLE_ROLES = ("user", "assistant", "toolResult")
_CONTENT_ROLES = ("user", "assistant", "toolResult", "system", "custom")


@dataclass(frozen=True, slots=True)
class Problem:
    line: int
    severity: Severity
    code: str
    message: str
    entry_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "line": self.line,
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
        }
        if self.entry_id is not None:
            out["entryId"] = self.entry_id
        return out


class ProblemsMixin:
    """Errors, warnings and "ok" of anything that carries a list of ``problems``."""

    problems: list[Problem]

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "error"]

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    @property
    def ok(self) -> bool:
        return not any(p.severity == "error" for p in self.problems)


@dataclass
class ValidationReport(ProblemsMixin):
    path: str = ""
    problems: list[Problem] = field(default_factory=list)
    version: int | None = None
    header: dict[str, Any] | None = None
    entry_count: int = 0
    line_count: int = 0

    def codes(self) -> list[str]:
        return [p.code for p in self.problems]

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "version": self.version,
            "entryCount": self.entry_count,
            "lineCount": self.line_count,
            "problems": [p.to_json() for p in self.problems],
        }


def validate_file(path: str) -> ValidationReport:
    with open(path, "rb") as fh:
        data = fh.read()
    return validate_bytes(data, path=path)


def _sid(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else jsonfmt.dumps(value)


def _short(value: Any, limit: int = 60) -> str:
    try:
        text = jsonfmt.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


class _Checker:
    def __init__(self, loaded: LoadedFile, report: ValidationReport) -> None:
        self.loaded = loaded
        self.report = report

    def add(
        self, line: int, severity: Severity, code: str, message: str, entry_id: Any = None
    ) -> None:
        self.report.problems.append(Problem(line, severity, code, message, _sid(entry_id)))


def validate_bytes(data: bytes, *, path: str = "") -> ValidationReport:
    """Every problem Appendix D asks a reader to surface, with 1-based file line numbers."""
    data = bytes(data)
    loaded = parse_bytes(data)
    report = ValidationReport(path=path, line_count=loaded.line_count)
    chk = _Checker(loaded, report)

    for line in loaded.invalid_utf8:
        chk.add(line, "warning", "invalid-utf8", "invalid UTF-8 bytes (decoded with U+FFFD)")
    for line, excerpt in loaded.malformed:
        chk.add(line, "warning", "malformed-line", f"not valid JSON, skipped: {excerpt}")
    for line in loaded.falsy:
        chk.add(line, "warning", "falsy-value", "null/false/0/empty string line, skipped")

    if not data:
        chk.add(0, "warning", "empty-file", "empty file (Pi would initialise it with a new header)")
        return _finish(report)

    if not loaded.valid:
        first = loaded.first_value
        if loaded.first_value_line == 0:
            why = "no JSON value in the file"
        elif type(first) is not dict:
            why = f"first value is not an object: {_short(first)}"
        elif first.get("type") != "session":
            why = f"first entry is not a session header (type {_short(first.get('type'))})"
        else:
            why = "session header has no string id"
        chk.add(
            loaded.first_value_line,
            "error",
            "not-a-session",
            f"not a session: {why}; Pi refuses to open this file",
        )
        return _finish(report)

    for line, value in loaded.non_objects:
        chk.add(
            line,
            "warning",
            "non-object-line",
            f"non-object JSON value dropped after the header: {_short(value)}",
        )
    if loaded.missing_final_newline:
        chk.add(
            loaded.line_count,
            "warning",
            "missing-final-newline",
            "file does not end with a newline (Pi appends one on open)",
        )

    entries = loaded.entries
    numbers = loaded.line_numbers
    header = entries[0]
    report.header = header
    raw_version = session_version(entries)
    number = version_number(raw_version)
    legacy = not number >= CURRENT_SESSION_VERSION  # NaN counts as legacy, as in Pi
    is_int = isinstance(raw_version, int) and not isinstance(raw_version, bool)
    report.version = (
        raw_version
        if is_int
        else (int(number) if number == number and float(number).is_integer() else None)
    )
    if legacy:
        chk.add(
            numbers[0],
            "warning",
            "legacy-version",
            f"legacy version {_short(raw_version)}: migrated to {CURRENT_SESSION_VERSION} in "
            "memory (Pi rewrites the file on open)",
        )
    else:
        if not is_int:
            chk.add(
                numbers[0],
                "warning",
                "odd-version",
                f"version {_short(raw_version)} is not an integer",
            )
        if number > CURRENT_SESSION_VERSION:
            chk.add(
                numbers[0],
                "warning",
                "newer-version",
                f"version {_short(raw_version)} is newer than 3",
            )

    # Check the tree as Pi sees it: after in-memory migration with reproducible ids.
    if legacy:
        entries = [jsonfmt.loads(line) for line in loaded.raw_lines]
        migrate_session_entries(entries, deterministic_rng(hashlib.sha256(data).digest()))

    _check_entries(chk, entries, numbers)
    return _finish(report)


def _finish(report: ValidationReport) -> ValidationReport:
    report.problems.sort(key=lambda p: (p.line, 0 if p.severity == "error" else 1))
    return report


def _check_entries(chk: _Checker, entries: list[Any], numbers: list[int]) -> None:
    by_id: dict[Any, int] = {}  # id -> index of the last entry with it
    first_line: dict[Any, int] = {}
    bad_timestamps: set[int] = set()
    count = 0
    for index, entry in enumerate(entries):
        line = numbers[index]
        kind = entry.get("type")
        if kind == "session":
            if index:
                chk.add(line, "warning", "extra-header", "a second session header inside the file")
            continue
        count += 1
        key = entry.get("id")
        if type(key) is not str:
            chk.add(
                line,
                "warning",
                "bad-id",
                f"entry id is missing or not a string: {_short(key)}",
            )
        if type(key) is str or jsonfmt.hashable(key):
            if key in first_line:
                chk.add(
                    line,
                    "error",
                    "duplicate-id",
                    f"duplicate id {_short(key)} (lines {first_line[key]} and {line}); the later "
                    "entry wins in the index and appears under each duplicate's parent in the tree",
                    key,
                )
            else:
                first_line[key] = line
            by_id[key] = index
        if "parentId" not in entry:
            chk.add(line, "warning", "missing-parent-id", "entry has no parentId key", key)
        if not isinstance(kind, str) or kind not in KNOWN_ENTRY_TYPES:
            chk.add(
                line,
                "warning",
                "unknown-type",
                f"unknown entry type {_short(kind)} (kept as opaque metadata)",
                key,
            )
        stamp = jsonfmt.date_parse(entry.get("timestamp"))
        if stamp != stamp:  # NaN
            bad_timestamps.add(index)
    chk.report.entry_count = count

    up = _parents(chk, entries, numbers, by_id)
    _check_cycles(chk, entries, numbers, by_id, up)
    _check_siblings(chk, entries, numbers, up, bad_timestamps)
    _check_links(chk, entries, numbers, by_id, up)
    _check_contents(chk, entries, numbers)


def _check_links(
    chk: _Checker,
    entries: list[Any],
    numbers: list[int],
    by_id: dict[Any, int],
    up: list[int],
) -> None:
    """What entries say about other entries: edits and labels name a target, a compaction
    names its first kept entry. Needs only ids, parents, types, roles and those fields.

    The entry and exit times that answer "is this an ancestor?" are computed on the first
    question only: most sessions hold no edit and few compactions."""
    times: list[list[int]] = []

    def on_path(target: Any, index: int) -> bool:
        """Is `target` the entry itself or an ancestor of entries[index] (as the walk sees it)?"""
        entry = entries[index]
        if entry.get("id") == target:
            return True
        if not jsonfmt.hashable(target) or target not in by_id:
            return False
        b = up[index]
        if b < 0:
            return False
        if not times:
            times.extend(_euler(by_id, up))
        tin, tout = times
        a = by_id[target]
        if tin[a] < 0 or tin[b] < 0:
            return False
        return tin[a] <= tin[b] and tout[b] <= tout[a]

    for index, entry in enumerate(entries):
        kind = entry.get("type")
        if kind == "context_edit":
            _check_edit(chk, numbers[index], entry.get("id"), entry, entries, by_id, on_path, index)
        elif kind == "compaction":
            key = entry.get("id")
            first_kept = entry.get("firstKeptEntryId")
            if first_kept != key and not on_path(first_kept, index):
                chk.add(
                    numbers[index],
                    "warning",
                    "first-kept-not-on-path",
                    f"firstKeptEntryId {_short(first_kept)} is not before the compaction on its "
                    "path: nothing before it is kept",
                    key,
                )
        elif kind == "label":
            target = entry.get("targetId")
            if not (type(target) is str or jsonfmt.hashable(target)) or target not in by_id:
                chk.add(
                    numbers[index],
                    "warning",
                    "label-unknown-target",
                    f"label target {_short(target)} is not an entry",
                    entry.get("id"),
                )


def _check_contents(chk: _Checker, entries: list[Any], numbers: list[int]) -> None:
    """What each entry holds by itself: message shapes, custom content, checkpoints."""
    for index, entry in enumerate(entries):
        kind = entry.get("type")
        line = numbers[index]
        key = entry.get("id")
        if kind == "message":
            _check_message(chk, line, key, entry)
        elif kind == "custom_message":
            content = entry.get("content")
            if content is not None and not isinstance(content, (str, list)):
                chk.add(
                    line,
                    "warning",
                    "bad-content",
                    "custom_message content is not a string or array",
                    key,
                )
        elif kind == "compaction" and "systemMessage" in entry:
            system = entry["systemMessage"]
            if type(system) is not dict or not isinstance(system.get("content"), (str, list)):
                chk.add(
                    line,
                    "warning",
                    "bad-checkpoint",
                    "compaction systemMessage has no usable content",
                    key,
                )
            else:
                _check_sections(chk, line, key, system)


def diagnose_tree(
    entries: list[dict[str, Any]], numbers: list[int], *, index: dict[Any, int] | None = None
) -> list[Problem]:
    """The tree checks of Appendix D over entries already stored: dangling parents, parent
    cycles, compactions whose first kept entry is off their path, edits and labels whose
    target is missing, off the path or not editable.

    ``entries`` (file order, no header) need only ``id``, ``parentId``, ``type``, a
    message's ``role``, and ``targetId`` / ``replacement`` / ``firstKeptEntryId`` where they
    apply; ``numbers`` are their line numbers. The same functions as ``validate_bytes`` run,
    so a stored session and its file report the same problems. ``index``: the entries'
    :func:`index_ids`, when the caller has made it already (it costs a pass over them).
    """
    report = ValidationReport(path="")
    chk = _Checker(None, report)  # type: ignore[arg-type]
    with gc_paused():  # the position lists are short-lived but would trigger full passes
        by_id = index_ids(entries) if index is None else index
        up = _parents(chk, entries, numbers, by_id)
        _check_cycles(chk, entries, numbers, by_id, up)
        _check_links(chk, entries, numbers, by_id, up)
    return _finish(report).problems


def index_ids(entries: Sequence[Any]) -> dict[Any, int]:
    """Entry id → index of the last entry carrying it (ids that cannot key a dict are left
    out, as the tree walk leaves them). String ids, nearly all of them, skip the hash probe."""
    by_id: dict[Any, int] = {}
    for index, entry in enumerate(entries):
        key = entry.get("id")
        if type(key) is str or jsonfmt.hashable(key):
            by_id[key] = index
    return by_id


def _parents(
    chk: _Checker, entries: list[Any], numbers: list[int], by_id: dict[Any, int]
) -> list[int]:
    """index → index of the parent the path walk follows, -1 when it does not resolve.

    Positions in a list instead of a dict of parent ids: every later check walks these
    links, and on a 50,000-entry session the dict probes were most of their time. A string
    parent (nearly every entry's) is looked up directly; only odd values go through the
    JavaScript truthiness and hashability helpers."""
    up = [-1] * len(entries)
    get = by_id.get
    for index, entry in enumerate(entries):
        parent = entry.get("parentId")
        if parent is None or entry.get("type") == "session":
            continue
        if type(parent) is str:
            if not parent:
                continue
            found = get(parent)
        elif not jsonfmt.truthy(parent):
            continue
        else:
            found = get(parent) if jsonfmt.hashable(parent) else None
        if found is not None:
            up[index] = found
        else:
            chk.add(
                numbers[index],
                "warning",
                "dangling-parent",
                f"parentId {_short(parent)} names no entry: this entry is a root and its path stops here",
                entry.get("id"),
            )
    return up


def _euler(by_id: dict[Any, int], up: list[int]) -> tuple[list[int], list[int]]:
    """Entry/exit times over the indexed tree, -1 for entries no root reaches (cycles and
    what hangs below them).

    Children are threaded through two position lists (first child, next sibling) rather
    than a list per entry, and the stack holds plain ints (``~node`` marks an exit), so a
    50,000-entry chain costs no allocation per entry. Each indexed entry has one parent, so
    what the roots reach is a forest and no entry is met twice."""
    n = len(up)
    head = [-1] * n
    sibling = [-1] * n
    roots: list[int] = []
    for index in by_id.values():
        p = up[index]
        if p < 0:
            roots.append(index)
        else:
            sibling[index] = head[p]
            head[p] = index
    tin = [-1] * n
    tout = [-1] * n
    clock = 0
    for root in roots:
        stack = [root]
        while stack:
            node = stack.pop()
            if node < 0:
                tout[~node] = clock
                clock += 1
                continue
            tin[node] = clock
            clock += 1
            stack.append(~node)
            child = head[node]
            while child >= 0:
                stack.append(child)
                child = sibling[child]
    return tin, tout


def _check_cycles(
    chk: _Checker,
    entries: list[Any],
    numbers: list[int],
    by_id: dict[Any, int],
    up: list[int],
) -> None:
    state = bytearray(len(up))  # 1 = on the current walk, 2 = finished
    for start in by_id.values():
        if state[start]:
            continue
        walk: list[int] = []
        node = start
        while node >= 0 and not state[node]:
            state[node] = 1
            walk.append(node)
            node = up[node]
        if node >= 0 and state[node] == 1:
            members = walk[walk.index(node) :]
            ids = [entries[i].get("id") for i in members]
            shown = ", ".join(_short(i, 20) for i in ids[:10]) + (" …" if len(ids) > 10 else "")
            chk.add(
                numbers[members[0]],
                "error",
                "parent-cycle",
                f"parentId cycle through {len(ids)} entries ({shown}); walks stop at the repeat",
                ids[0],
            )
        for i in walk:
            state[i] = 2


def _check_siblings(
    chk: _Checker,
    entries: list[Any],
    numbers: list[int],
    up: list[int],
    bad_timestamps: set[int],
) -> None:
    if not bad_timestamps:
        return  # only entries with an unparseable timestamp are reported
    sibling_count: dict[int, int] = {}
    for index, entry in enumerate(entries):
        p = up[index]
        if p < 0 or entry.get("type") == "session":
            continue
        if entry.get("parentId") == entry.get("id"):
            continue
        sibling_count[p] = sibling_count.get(p, 0) + 1
    for index in sorted(bad_timestamps):
        p = up[index]
        if p >= 0 and sibling_count.get(p, 0) > 1:
            chk.add(
                numbers[index],
                "warning",
                "unparseable-timestamp",
                f"timestamp {_short(entries[index].get('timestamp'))} does not parse: the order "
                "among its siblings is a sort artefact in Pi (placed last here)",
                entries[index].get("id"),
            )


def _check_sections(chk: _Checker, line: int, key: Any, message: dict[str, Any]) -> None:
    sections = message.get("sections")
    if type(sections) is not dict:
        return
    for name, value in sections.items():
        bad = (
            value is True
            or isinstance(value, (dict, list))
            or (isinstance(value, (int, float)) and not isinstance(value, bool) and value != 0)
        )
        if bad:
            chk.add(
                line,
                "warning",
                "nan-section",
                f"section {_short(name)} holds {_short(value, 30)}: token estimates become NaN",
                key,
            )


def _check_message(chk: _Checker, line: int, key: Any, entry: dict[str, Any]) -> None:
    message = entry.get("message")
    if type(message) is not dict:
        chk.add(line, "warning", "bad-message", f"message is not an object: {_short(message)}", key)
        return
    role = message.get("role")
    if role in _CONTENT_ROLES:
        content = message.get("content")
        if content is None:
            if role in ("custom",):
                chk.add(line, "warning", "bad-content", "message content is absent or null", key)
            else:
                chk.add(
                    line,
                    "warning",
                    "null-content",
                    "message content is absent or null (repaired in the projection)",
                    key,
                )
        elif not isinstance(content, (str, list)):
            chk.add(
                line,
                "warning",
                "bad-content",
                f"message content is {_short(content, 30)}, not a string or array",
                key,
            )
        elif isinstance(content, list):
            for block in content:
                if type(block) is not dict or not isinstance(block.get("type"), str):
                    chk.add(
                        line,
                        "warning",
                        "bad-block",
                        f"malformed content block {_short(block, 30)}",
                        key,
                    )
                    break
                if block.get("type") == "text" and not isinstance(block.get("text"), str):
                    chk.add(line, "warning", "bad-block", "text block without string text", key)
                    break
    if role == "system":
        _check_sections(chk, line, key, message)
        if message.get("timestamp") is None and not message.get("toolsAdded"):
            chk.add(
                line,
                "warning",
                "system-without-timestamp",
                "system message without timestamp or tools: the replay may give no checkpoint",
                key,
            )


def _check_edit(
    chk: _Checker,
    line: int,
    key: Any,
    entry: dict[str, Any],
    entries: list[Any],
    by_id: dict[Any, int],
    on_path: Any,
    index: int,
) -> None:
    target = entry.get("targetId")
    if "replacement" not in entry:
        chk.add(
            line,
            "warning",
            "edit-without-replacement",
            f"context_edit without a replacement key (target {_short(target)}): Pi's projection raises",
            key,
        )
    else:
        replacement = entry["replacement"]
        if replacement is not None and (
            type(replacement) is not dict or "content" not in replacement
        ):
            chk.add(
                line,
                "warning",
                "edit-malformed-replacement",
                f"context_edit replacement has no content (target {_short(target)}): estimation raises in Pi",
                key,
            )
    if not jsonfmt.hashable(target) or target not in by_id:
        chk.add(
            line,
            "warning",
            "edit-unknown-target",
            f"context_edit target {_short(target)} is not an entry (ignored)",
            key,
        )
        return
    if not on_path(target, index):
        chk.add(
            line,
            "warning",
            "edit-off-path",
            f"context_edit target {_short(target)} is not on the edit's path (ignored)",
            key,
        )
        return
    target_entry = entries[by_id[target]]
    kind = target_entry.get("type")
    message = target_entry.get("message")
    role = message.get("role") if type(message) is dict else None
    if not (kind == "custom_message" or (kind == "message" and role in _EDITABLE_ROLES)):
        chk.add(
            line,
            "warning",
            "edit-not-editable",
            f"context_edit target {_short(target)} does not contribute editable content (applied anyway)",
            key,
        )
