"""Other agents' session files: detection by content and one reader per format.

`detect_format` looks at a file's first JSON objects (not its name: files get renamed and
copied) and answers "pi", "claude-code", "codex" or None. `load_foreign` reads a Claude Code or
Codex file into a `ForeignSession`; Pi files keep their own reader (`SessionManager`).
"""

from __future__ import annotations

import os
from typing import Literal

import orjson

from .claude_code import ClaudeCodeSession, load_claude_code, looks_like_claude_code
from .codex import CodexSession, load_codex, looks_like_codex
from .common import ForeignSession, Problem, Record, Source

__all__ = [
    "AGENT_NAMES",
    "ClaudeCodeSession",
    "CodexSession",
    "ForeignSession",
    "FormatName",
    "Problem",
    "Record",
    "detect_bytes",
    "detect_format",
    "load_foreign",
    "load_foreign_bytes",
]

FormatName = Literal["pi", "claude-code", "codex"]
AGENT_NAMES = {"pi": "Pi", "claude-code": "Claude Code", "codex": "Codex"}
_SCAN_BYTES = 1024 * 1024
_SCAN_OBJECTS = 50


def detect_bytes(head: bytes) -> FormatName | None:
    """The format of a file from its first bytes (up to 1 MiB is enough).

    Pi decides on its first value (a `session` header); Codex and Claude Code on the first
    object that only they write, looking past damaged lines and unknown records.
    """
    seen = 0
    first = True
    for raw in head.split(b"\n"):
        if not raw.strip():
            continue
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(value, dict):
            continue
        if first and value.get("type") == "session" and isinstance(value.get("id"), str):
            return "pi"
        if looks_like_codex(value, first):
            return "codex"
        if looks_like_claude_code(value):
            return "claude-code"
        first = False
        seen += 1
        if seen >= _SCAN_OBJECTS:
            break
    return None


def detect_format(path: str) -> FormatName | None:
    """`detect_bytes` of a file's first MiB; None for unreadable files."""
    try:
        with open(path, "rb") as fh:
            return detect_bytes(fh.read(_SCAN_BYTES))
    except OSError:
        return None


def load_foreign_bytes(
    data: bytes, fmt: FormatName | None = None, path: str | None = None
) -> ForeignSession:
    """Read Claude Code or Codex bytes (format detected when not given). ValueError for a
    Pi file or content no reader recognises."""
    fmt = fmt or detect_bytes(data[:_SCAN_BYTES])
    source = Source(path, data)
    if fmt == "claude-code":
        return load_claude_code(data, source)
    if fmt == "codex":
        return load_codex(data, source)
    if fmt == "pi":
        raise ValueError("a Pi session: read it with SessionManager")
    raise ValueError("not a Pi, Claude Code or Codex session file")


def load_foreign(path: str, fmt: FormatName | None = None) -> ForeignSession:
    """Read a Claude Code or Codex file. The bytes are not kept: original lines are read
    back from the file by their spans when asked for (`ForeignSession.raw`)."""
    with open(path, "rb") as fh:
        data = fh.read()
    session = load_foreign_bytes(data, fmt, os.path.abspath(path))
    session.source = Source(os.path.abspath(path))
    return session
