"""Finding sessions on disk: most recent, by id, and the session lists (SPEC section 3.2).

These read only what they need: header discovery for `find_*`, one streaming pass per file for
the lists. Pi skips a file silently whenever reading it throws; the same inputs are skipped
here (`_Skip`), so the lists agree with Pi's on unusual files too.
"""

from __future__ import annotations

import math
import os
import posixpath
import re
from dataclasses import dataclass
from typing import Any

from . import jsonfmt
from .loading import discover_header
from .paths import (
    default_session_dir_path,
    expand_path,
    get_default_session_dir,
    get_sessions_root,
    resolve_path,
)

__all__ = [
    "SessionInfo",
    "build_session_info",
    "find_by_id",
    "find_most_recent_session",
    "list_all",
    "list_sessions",
    "paths_equal",
]

_MISSING: Any = object()
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass
class SessionInfo:
    """One row of `list`/`list_all`. Times are epoch milliseconds (NaN when invalid)."""

    path: str
    id: Any
    cwd: str
    name: str | None
    parent_session_path: Any
    created: float
    modified: float
    message_count: int
    first_message: str
    all_messages_text: str

    def to_json(self) -> dict[str, Any]:
        def iso(ms: float) -> str | None:
            return None if ms != ms or abs(ms) > 8.64e15 else jsonfmt.iso_from_ms(ms)

        out: dict[str, Any] = {"path": self.path, "id": self.id, "cwd": self.cwd}
        if self.name is not None:
            out["name"] = self.name
        if self.parent_session_path is not None:
            out["parentSessionPath"] = self.parent_session_path
        out["created"] = iso(self.created)
        out["modified"] = iso(self.modified)
        out["messageCount"] = self.message_count
        out["firstMessage"] = self.first_message
        out["allMessagesText"] = self.all_messages_text
        return out


class _Skip(Exception):
    """Pi would throw while reading this file; `list` skips it."""


def paths_equal(left: str, right: str) -> bool:
    """Do two spellings name the same location? (Pi 1.6.0 compares directories this way.)

    Both sides are resolved and normalized first, so `/a/b/`, `/a/./b` and a relative
    spelling of the same directory are equal; symlinks are not followed (as in Pi).
    """
    return resolve_path(left) == resolve_path(right)


def _cwd_matches(cwd: Any, resolved_cwd: str) -> bool:
    return isinstance(cwd, str) and cwd != "" and paths_equal(resolve_path(cwd), resolved_cwd)


def _jsonl_names(directory: str) -> list[str]:
    return [name for name in os.listdir(directory) if name.endswith(".jsonl")]


def find_most_recent_session(session_dir: str, cwd: str | None = None) -> str | None:
    """Newest (by mtime) file whose header is discovered and, with `cwd`, matches it."""
    directory = expand_path(session_dir)
    resolved_cwd = resolve_path(cwd) if cwd else None
    try:
        names = sorted(_jsonl_names(directory), key=lambda n: n.encode("utf-8", "surrogateescape"))
        files = [
            (posixpath.join(directory, n), os.stat(posixpath.join(directory, n)).st_mtime_ns)
            for n in names
        ]
        files.sort(key=lambda item: -item[1])
        for path, _ in files:
            header = discover_header(path)
            if header is not None and (
                resolved_cwd is None or _cwd_matches(header.get("cwd"), resolved_cwd)
            ):
                return path
    except OSError:
        return None
    return None


def find_by_id(cwd: str, session_id: str, session_dir: str | None = None) -> str | None:
    """Path of the first file (byte-wise name order) whose header has exactly `session_id`."""
    try:
        directory = expand_path(session_dir) if session_dir else get_default_session_dir(cwd)
        filter_cwd = session_dir is not None and not paths_equal(
            directory, default_session_dir_path(cwd)
        )
        resolved_cwd = resolve_path(cwd)
        names = sorted(_jsonl_names(directory), key=lambda n: n.encode("utf-8", "surrogateescape"))
    except OSError:
        return None
    for name in names:
        path = posixpath.join(directory, name)
        header = discover_header(path)
        if header is None or header.get("id") != session_id or type(header.get("id")) is not str:
            continue
        if filter_cwd and not _cwd_matches(header.get("cwd"), resolved_cwd):
            continue
        return path
    return None


# ---------------------------------------------------------------------------------------------
# Session infos


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _date_value(value: Any) -> float:
    """`new Date(value).getTime()` for the JSON values a timestamp may hold."""
    if value is _MISSING:
        return math.nan
    if value is None:
        return 0.0
    if isinstance(value, str):
        return jsonfmt.date_parse(value)
    if _is_number(value):
        v = float(value)
        return float(math.trunc(v)) if math.isfinite(v) and abs(v) <= 8.64e15 else math.nan
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    return math.nan


def _js_max(a: float, b: float) -> float:
    if a != a or b != b:
        return math.nan
    return max(a, b)


def _has_content(message: Any) -> bool:
    if message is None:
        raise _Skip  # property access on null/undefined
    if type(message) is not dict:
        return False
    return isinstance(message.get("role"), str) and "content" in message


def _join_string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ",".join(_join_string(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if _is_number(value):
        return (
            jsonfmt.dumps(value)
            if math.isfinite(value)
            else ("NaN" if value != value else "Infinity")
        )
    return str(value)


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _Skip
    parts = []
    for block in content:
        if block is None:
            raise _Skip
        if type(block) is dict and block.get("type") == "text":
            parts.append(_join_string(block.get("text")))
    return " ".join(parts)


def _parse_line(line: str) -> Any:
    if not line.strip(jsonfmt.JS_WHITESPACE):
        return None
    try:
        value = jsonfmt.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if jsonfmt.truthy(value) else None


def build_session_info(path: str) -> SessionInfo | None:
    """Pi's per-file session info, or None when the file is not (readably) a session."""
    try:
        st = os.stat(path)
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8", errors="replace")
        return _info_from_text(path, text, st.st_mtime_ns / 1e6)
    except (OSError, _Skip):
        return None


def _info_from_text(path: str, text: str, mtime_ms: float) -> SessionInfo | None:
    header: Any = None
    message_count = 0
    first_message = ""
    texts: list[str] = []
    name: str | None = None
    last_activity: float | None = None
    lines = _LINE_BREAK.split(text)
    if lines and lines[-1] == "":
        lines.pop()
    for line in lines:
        entry = _parse_line(line)
        if entry is None:
            continue
        if header is None:
            if type(entry) is not dict or entry.get("type") != "session":
                return None
            header = entry
            continue
        if type(entry) is not dict:
            continue
        kind = entry.get("type")
        if kind == "session_info":
            raw_name = entry.get("name")
            if raw_name is None:
                name = None
            elif isinstance(raw_name, str):
                name = jsonfmt.js_trim(raw_name) or None
            else:
                raise _Skip
        if kind != "message":
            continue
        message_count += 1
        message = entry.get("message")
        if not _has_content(message) or message.get("role") not in ("user", "assistant"):  # type: ignore[union-attr]
            continue
        stamp = message.get("timestamp")  # type: ignore[union-attr]
        activity = (
            float(stamp) if _is_number(stamp) else _date_value(entry.get("timestamp", _MISSING))
        )
        if _is_number(stamp) or activity == activity:
            last_activity = _js_max(last_activity if last_activity is not None else 0.0, activity)
        text_content = _text_of(message)  # type: ignore[arg-type]
        if not text_content:
            continue
        texts.append(text_content)
        if not first_message and message.get("role") == "user":  # type: ignore[union-attr]
            first_message = text_content
    if header is None:
        return None
    header_ts = header.get("timestamp", _MISSING)
    header_time = jsonfmt.date_parse(header_ts) if isinstance(header_ts, str) else math.nan
    if last_activity is not None and last_activity > 0:
        modified = last_activity
    elif header_time == header_time:
        modified = header_time
    else:
        modified = mtime_ms
    cwd = header.get("cwd")
    return SessionInfo(
        path=path,
        id=header.get("id"),
        cwd=cwd if isinstance(cwd, str) else "",
        name=name,
        parent_session_path=header.get("parentSession"),
        created=_date_value(header_ts),
        modified=modified,
        message_count=message_count,
        first_message=first_message or "(no messages)",
        all_messages_text=" ".join(texts),
    )


def _locale_key(name: str) -> tuple[tuple[tuple[int, str], ...], tuple[int, ...]]:
    """An approximation of `localeCompare` (ICU root collation) for file names:
    punctuation before digits before letters, letters case-insensitive first."""
    primary = []
    tertiary = []
    for ch in name:
        if ch.isdigit():
            cls = 1
        elif ch.isalpha():
            cls = 2
        else:
            cls = 0
        primary.append((cls, ch.lower()))
        tertiary.append(0 if not ch.isupper() else 1)
    return tuple(primary), tuple(tertiary)


def _sort_by_modified(infos: list[SessionInfo]) -> list[SessionInfo]:
    return sorted(infos, key=lambda i: -i.modified if i.modified == i.modified else math.inf)


def _infos_from_dir(directory: str) -> list[SessionInfo]:
    if not os.path.exists(directory):
        return []
    try:
        names = sorted(_jsonl_names(directory), key=_locale_key, reverse=True)
    except OSError:
        return []
    infos = []
    for name in names:
        info = build_session_info(posixpath.join(directory, name))
        if info is not None:
            infos.append(info)
    return infos


def list_sessions(cwd: str, session_dir: str | None = None) -> list[SessionInfo]:
    """Sessions of one directory, newest activity first (SPEC section 3.2 `list`)."""
    directory = expand_path(session_dir) if session_dir else get_default_session_dir(cwd)
    filter_cwd = session_dir is not None and not paths_equal(
        directory, default_session_dir_path(cwd)
    )
    resolved_cwd = resolve_path(cwd)
    infos = [
        info
        for info in _infos_from_dir(directory)
        if not filter_cwd or _cwd_matches(info.cwd, resolved_cwd)
    ]
    return _sort_by_modified(infos)


def list_all(session_dir: str | None = None) -> list[SessionInfo]:
    """Every session under the sessions root (or of one custom directory)."""
    if session_dir:
        return _sort_by_modified(_infos_from_dir(expand_path(session_dir)))
    root = get_sessions_root()
    try:
        if not os.path.exists(root):
            return []
        dirs = []
        with os.scandir(root) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False) or entry.is_symlink():
                    dirs.append(posixpath.join(root, entry.name))
    except OSError:
        return []
    candidates: list[tuple[str, float]] = []
    for directory in dirs:
        try:
            names = _jsonl_names(directory)
        except OSError:
            continue
        for name in names:
            path = posixpath.join(directory, name)
            try:
                mtime = os.stat(path).st_mtime_ns / 1e6
            except OSError:
                mtime = -math.inf
            candidates.append((path, mtime))
    candidates.sort(key=lambda c: _locale_key(posixpath.basename(c[0])), reverse=True)
    candidates.sort(key=lambda c: -c[1])
    infos = [info for path, _ in candidates if (info := build_session_info(path)) is not None]
    return _sort_by_modified(infos)
