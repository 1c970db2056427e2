"""Loading a session file for inspection: in memory only, never written, ids reproducible.

Opening a file the way Pi does may write to it (migration rewrite, newline repair, a header for
an empty file). Inspection must not, so the command line reads the file once into an in-memory
manager. Lines longer than 64 KiB stay in the file as skeletons until a command needs their
bodies (`SessionManager.full_entry`), so a 2 GB session of multi-MB tool results is inspected
with memory for its tree and its current context, not for every body. A legacy (version 1) file gets fresh entry ids while migrating;
they are drawn from a random source seeded with the file's bytes, so every run over the same
file prints the same ids and an id printed by one command can be passed to the next.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from . import jsonfmt
from .errors import SessionError

__all__ = ["CliError", "Inspected", "load_for_inspection", "read_input"]


class CliError(Exception):
    """Bad input for the command line: printed as one line on stderr, no traceback."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class Inspected:
    """A session loaded read-only: the manager plus where each entry came from."""

    path: str
    manager: Any
    line_numbers: list[int]
    """1-based file line of each file entry (header first), aligned with the loaded list."""
    migrated_from: int | None
    """The file's version when it was migrated in memory, else None."""
    foreign: Any = None
    """A Claude Code or Codex file (`formats.ForeignSession`); `manager` is then None."""


def read_input(path: str) -> bytes:
    """The file's bytes, or a CliError that says plainly what is wrong."""
    _check_input(path)
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _check_input(path: str) -> int:
    """The file's size after the checks `read_input` makes, without reading the content."""
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CliError(f"{path}: is a directory (expected a session .jsonl file)")
    try:
        with open(path, "rb") as fh:
            fh.read(1)
            return os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def _header_line(path: str, header_line: int) -> bytes:
    with open(path, "rb") as fh:
        for number, line in enumerate(fh, 1):
            if number == header_line:
                return line.rstrip(b"\n")
    return b""


def _version(header: dict[str, Any]) -> Any:
    version = header.get("version")
    return 1 if version is None else version


def _legacy_version(line: bytes) -> Any:
    """The file's own version when it is below 3 (the loaded header was migrated in place)."""
    try:
        header = jsonfmt.loads(line)
    except ValueError:
        return None
    version = _version(header) if isinstance(header, dict) else 3
    legacy = not isinstance(version, (int, float)) or isinstance(version, bool) or version < 3
    return version if legacy else None


def load_for_inspection(path: str) -> Inspected:
    """An in-memory manager over the file's current content; raises CliError on bad input.

    A Claude Code or Codex file (detected by content) is read by its format's reader instead
    (`Inspected.foreign`); the commands print the same shapes for it."""
    # The manager is imported late: the CLI's --help must not need it.
    from .manager import DEFAULT_DEFER_BYTES, SessionManager

    if _check_input(path) == 0:
        raise CliError(f"{path}: empty file, not a pi session (no header)")
    from .formats import detect_format, load_foreign

    fmt = detect_format(path)
    if fmt in ("claude-code", "codex"):
        try:
            foreign = load_foreign(path, fmt)
        except OSError as exc:
            raise CliError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        return Inspected(
            path=path, manager=None, line_numbers=[], migrated_from=None, foreign=foreign
        )
    try:
        manager = SessionManager.load_readonly(path, defer_bodies_over=DEFAULT_DEFER_BYTES)
    except SessionError as exc:
        raise CliError(str(exc)) from exc
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    loaded = getattr(manager, "loaded_file", None)
    line_numbers = list(loaded.line_numbers) if loaded is not None else []
    migrated_from = _legacy_version(_header_line(path, line_numbers[0])) if line_numbers else None
    return Inspected(
        path=path,
        manager=manager,
        line_numbers=line_numbers,
        migrated_from=migrated_from,
    )
