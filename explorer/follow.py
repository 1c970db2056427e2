"""Tail a Pi sessions directory by polling.

Pi writes a session file by appending whole lines, but a reader polling the file can see a
line half written. The follower therefore only hands out complete lines (ending in "\\n") and
keeps, per file, the byte offset just past the last complete line it handed out. Anything a
plain append cannot explain -- the file got shorter, the bytes already handed out changed, or
the path now names another file (a new inode) -- is reported as a break instead of being
merged, because the entries already ingested may no longer match the file.

Polling ``os.stat`` keeps this free of platform-specific watchers and extra dependencies; the
cost is one ``stat`` per file and one directory scan per subdirectory per poll.

This module has no Django imports: ``manage.py follow`` turns the events into database writes.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

logger = logging.getLogger(__name__)

__all__ = [
    "DirectoryFollower",
    "FileState",
    "FollowEvent",
    "follow_forever",
    "split_complete_lines",
]

EventKind = Literal["new", "lines", "truncated", "replaced", "removed"]

# How many leading bytes identify a file's content. The header line is at the start, so a
# rewrite that keeps the size but changes the session usually changes these bytes.
HEAD_BYTES = 4096
# How many bytes right before the offset are re-checked on every growth; an in-place rewrite
# that keeps the head but changes what was already handed out is caught here.
TAIL_BYTES = 256
READ_CHUNK = 1 << 20


@dataclass(frozen=True)
class FollowEvent:
    """Something that happened to one followed file.

    ``new``: a file seen for the first time with at least one complete line; ``lines`` holds
    all its complete lines. ``lines``: complete lines appended since the last event.
    ``truncated`` / ``replaced``: the file no longer extends what was read; ``message`` says
    why and the file is not read again until its identity changes. ``removed``: the path is
    gone.
    """

    kind: EventKind
    path: str
    lines: tuple[bytes, ...] = ()
    # Byte offset of the first line in ``lines`` (or of the break) within the file.
    offset: int = 0
    message: str = ""


@dataclass
class FileState:
    """What the follower knows about one file."""

    path: str
    dev: int
    ino: int
    offset: int = 0  # bytes consumed: always just after a "\n" (or 0)
    size: int = 0  # size at the last look
    mtime_ns: int = 0
    head: bytes = b""  # the first min(offset, HEAD_BYTES) bytes
    tail: bytes = b""  # the TAIL_BYTES bytes before offset
    announced: bool = False  # a "new" event was sent
    broken: bool = False  # a break was reported; ignored until its identity changes
    line_count: int = 0  # complete lines handed out so far
    meta: dict = field(default_factory=dict)  # free for the consumer of events


def split_complete_lines(data: bytes) -> tuple[list[bytes], int]:
    """Split ``data`` into complete lines (without their "\\n") and the bytes they used.

    A trailing fragment without its newline is not a line yet: it is left for the next read.
    """
    end = data.rfind(b"\n")
    if end < 0:
        return [], 0
    return data[:end].split(b"\n"), end + 1


class DirectoryFollower:
    """Follow every ``*.jsonl`` file under ``root``.

    Pi keeps one subdirectory per working directory (``--home-ana-proj--``); files directly in
    ``root`` are followed too so that a single project directory can be watched. Call
    :meth:`poll` repeatedly; it returns the events since the previous call, files in a stable
    order (path order) and each file's lines in file order.
    """

    def __init__(self, root: str | os.PathLike[str], *, recursive_depth: int = 1) -> None:
        self.root = os.fspath(root)
        self.recursive_depth = recursive_depth
        self.files: dict[str, FileState] = {}

    # -- discovery -------------------------------------------------------------------------

    def _scan(self) -> list[str]:
        found: list[str] = []

        def walk(directory: str, depth: int) -> None:
            try:
                with os.scandir(directory) as it:
                    items = list(it)
            except (FileNotFoundError, NotADirectoryError, PermissionError):
                return
            for item in items:
                try:
                    if item.is_file() and item.name.endswith(".jsonl"):
                        found.append(item.path)
                    elif depth > 0 and item.is_dir():
                        walk(item.path, depth - 1)
                except OSError:
                    continue

        walk(self.root, self.recursive_depth)
        found.sort()
        return found

    # -- polling ---------------------------------------------------------------------------

    def poll(self) -> list[FollowEvent]:
        events: list[FollowEvent] = []
        present = set()
        for path in self._scan():
            present.add(path)
            events.extend(self._poll_file(path))
        for path in sorted(set(self.files) - present):
            state = self.files.pop(path)
            if state.announced and not state.broken:
                events.append(FollowEvent("removed", path, offset=state.offset))
        return events

    def _poll_file(self, path: str) -> Iterator[FollowEvent]:
        try:
            st = os.stat(path)
        except OSError:
            return
        state = self.files.get(path)
        if state is None or (st.st_dev, st.st_ino) != (state.dev, state.ino):
            if state is not None and state.announced and not state.broken:
                yield FollowEvent(
                    "replaced",
                    path,
                    offset=state.offset,
                    message=f"{path}: replaced by another file (inode changed); "
                    f"{state.line_count} lines were already ingested, the new file is not merged",
                )
                self.files[path] = FileState(
                    path,
                    st.st_dev,
                    st.st_ino,
                    size=st.st_size,
                    mtime_ns=st.st_mtime_ns,
                    broken=True,
                )
                return
            # A new file, or a broken one that got a new identity: start from scratch.
            state = FileState(path, st.st_dev, st.st_ino)
            self.files[path] = state
        if state.broken:
            return
        if st.st_size == state.size and st.st_mtime_ns == state.mtime_ns and state.announced:
            return
        if st.st_size < state.offset:
            yield self._break(
                state,
                "truncated",
                f"{path}: truncated from {state.offset} to {st.st_size} bytes; "
                f"{state.line_count} lines were already ingested, the file is no longer followed",
            )
            return
        try:
            with open(path, "rb") as fh:
                if state.offset and not self._prefix_unchanged(fh, state):
                    yield self._break(
                        state,
                        "replaced",
                        f"{path}: content already ingested was rewritten; "
                        f"{state.line_count} lines were already ingested, "
                        "the file is no longer followed",
                    )
                    return
                fh.seek(state.offset)
                data = fh.read(st.st_size - state.offset) if st.st_size > state.offset else b""
                # The file may have grown since stat; read whatever is complete now.
                while True:
                    more = fh.read(READ_CHUNK)
                    if not more:
                        break
                    data += more
        except OSError:
            return
        lines, used = split_complete_lines(data)
        state.size = st.st_size
        state.mtime_ns = st.st_mtime_ns
        if not lines:
            return
        start = state.offset
        self._advance(state, data[:used])
        kind: EventKind = "lines" if state.announced else "new"
        state.announced = True
        yield FollowEvent(kind, path, tuple(lines), offset=start)

    def _prefix_unchanged(self, fh, state: FileState) -> bool:
        if fh.read(len(state.head)) != state.head:
            return False
        tail_start = state.offset - len(state.tail)
        fh.seek(tail_start)
        return fh.read(len(state.tail)) == state.tail

    def _advance(self, state: FileState, consumed: bytes) -> None:
        # Remember what was handed out from the bytes themselves: reading the file again
        # would race with a writer.
        if len(state.head) < HEAD_BYTES:
            state.head = (state.head + consumed)[:HEAD_BYTES]
        state.tail = (state.tail + consumed)[-TAIL_BYTES:]
        state.line_count += consumed.count(b"\n")
        state.offset += len(consumed)

    def _break(self, state: FileState, kind: EventKind, message: str) -> FollowEvent:
        state.broken = True
        return FollowEvent(kind, state.path, offset=state.offset, message=message)


def follow_forever(
    follower: DirectoryFollower,
    handle: Callable[[FollowEvent], None],
    *,
    interval: float = 0.25,
    stop: threading.Event | None = None,
    max_polls: int | None = None,
) -> int:
    """Poll until ``stop`` is set (or ``max_polls`` polls ran); returns the number of events."""
    count = 0
    polls = 0
    while stop is None or not stop.is_set():
        for event in follower.poll():
            try:
                handle(event)
            except Exception:  # one bad event must not end following every other file
                logger.exception("follow: handling %s of %s failed", event.kind, event.path)
            count += 1
        polls += 1
        if max_polls is not None and polls >= max_polls:
            break
        if stop is not None:
            if stop.wait(interval):
                break
        else:
            time.sleep(interval)
    return count
