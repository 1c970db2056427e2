"""Shared builders for the session-format and manager tests (SPEC section 8.0 fixtures)."""

from __future__ import annotations

from typing import Any

from explorer.session import jsonfmt

from . import ctx_helpers as _ctx
from .ctx_helpers import SYS, A, R, U  # noqa: F401  (re-exported for the manager tests)

# The SPEC 8.0 message builders live in one place; the manager tests use a constant Z.
Z = _ctx.Z()


class Clock:
    """Injected clock: starts at `start` ms and advances `step` ms per reading."""

    def __init__(self, start: int = 1_741_064_767_089, step: int = 1) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> int:
        value = self.now
        self.now += self.step
        return value


class SeqRng:
    """Random source that returns scripted 16-byte UUID blocks, then counts up."""

    def __init__(self, prefixes: list[str] | None = None) -> None:
        self.prefixes = list(prefixes or [])
        self.counter = 0

    def __call__(self, n: int) -> bytes:
        if n == 16 and self.prefixes:
            prefix = bytes.fromhex(self.prefixes.pop(0))
            return prefix + bytes(16 - len(prefix))
        self.counter += 1
        return (self.counter.to_bytes(4, "big") * ((n // 4) + 1))[:n]


def lines_of(path: Any) -> list[str]:
    with open(path, "rb") as fh:
        data = fh.read().decode("utf-8")
    assert data == "" or data.endswith("\n")
    return data.split("\n")[:-1]


def parsed_lines(path: Any) -> list[dict[str, Any]]:
    return [jsonfmt.loads(line) for line in lines_of(path)]


def write_lines(path: Any, objects: list[Any]) -> bytes:
    data = "".join((o if isinstance(o, str) else jsonfmt.dumps(o)) + "\n" for o in objects).encode(
        "utf-8"
    )
    with open(path, "wb") as fh:
        fh.write(data)
    return data


def header(session_id: str = "s1", cwd: str = "/w/proj", **extra: Any) -> dict[str, Any]:
    h = {
        "type": "session",
        "version": 3,
        "id": session_id,
        "timestamp": "2025-01-01T00:00:00.000Z",
        "cwd": cwd,
    }
    h.update(extra)
    return h


def msg_entry(
    entry_id: str, parent: Any, message: dict[str, Any], ts: str = "2025-01-01T00:00:01.000Z"
) -> dict[str, Any]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": ts,
        "message": message,
    }


def read_bytes(path: Any) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()
