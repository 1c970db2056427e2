"""Follow mode's database side: turn tailer events (``explorer.follow``) into stored entries.

A new file is imported like an upload (so a follower restarted on a directory it already
ingested adds only what is new). Appended lines take a fast path: they are inserted verbatim
at the end of their session under the single-writer lock, without re-reading the file.
Anything the fast path cannot take as is (a malformed line, an id already stored) goes
through the full importer with the file's bytes, which keeps such lines and reports conflicts.
Every write sends ``entries_appended`` with ``source="follow"``, so viewers see Pi's turn as
Pi writes it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from django.db import close_old_connections

from explorer.follow import DirectoryFollower, FileState, FollowEvent, follow_forever
from explorer.session import jsonfmt

logger = logging.getLogger(__name__)

Report = Callable[[str, str], None]  # (level, message)


def _log_report(level: str, message: str) -> None:
    getattr(logger, "warning" if level == "warning" else "info")(message)


class FollowIngestor:
    def __init__(
        self, follower: DirectoryFollower, *, report: Report | None = None, user=None
    ) -> None:
        self.follower = follower
        self.report = report or _log_report
        self.user = user

    def handle(self, event: FollowEvent) -> None:
        """Store one event. A failure (a lost database connection, a lock timeout, a
        conflicting web edit) never ends the follower: the event is retried at once through
        the full importer, and if that fails too, the next event of that file re-imports
        everything up to its end, so no line is lost."""
        try:
            self._dispatch(event)
        except Exception as exc:
            logger.warning("%s: storing a %s event failed: %s", event.path, event.kind, exc)
            close_old_connections()  # a broken connection is replaced before the retry
            self._retry(event, exc)
        finally:
            close_old_connections()

    def _dispatch(self, event: FollowEvent) -> None:
        state = self._state(event.path)
        if event.kind in ("new", "lines") and self._is_agent_file(event, state):
            self._agent(event)
        elif event.kind in ("new", "lines") and state is not None and state.meta.get("pending"):
            self._reimport(event, reason="retrying after an earlier failure")
        elif event.kind == "new":
            self._new(event)
        elif event.kind == "lines":
            self._lines(event)
        elif event.kind in ("truncated", "replaced"):
            self.report("warning", event.message + " (re-import it explicitly to keep it)")
            self._stopped(event)
        elif event.kind == "removed":
            self.report("info", f"{event.path}: removed; the stored session is kept")

    def _is_agent_file(self, event: FollowEvent, state: FileState | None) -> bool:
        """A Claude Code or Codex file (decided on its first lines, then remembered)."""
        if state is not None and "agent" in state.meta:
            return bool(state.meta["agent"])
        from explorer.session.formats import detect_bytes

        agent = event.kind == "new" and detect_bytes(b"\n".join(event.lines[:50])) in (
            "claude-code",
            "codex",
        )
        if state is not None and event.kind == "new":
            state.meta["agent"] = agent
        return agent

    def _agent(self, event: FollowEvent) -> None:
        """A Claude Code or Codex file's complete lines so far, imported again: its Pi form is
        the same for the lines already stored, so only new entries are added.

        The file is not read again: the follower hands out each appended line once, and the
        lines handed out before are kept here (``agent_bytes``, what was stored last), so an
        append reads the appended bytes only. The file is read whole only when nothing is
        kept for it (a failed store, a follower that started on a file already growing).
        Reading the records (the engine's reader) still takes the whole kept file."""
        from explorer.agent_import import import_agent_bytes

        state = self._state(event.path)
        new = b"".join(line + b"\n" for line in event.lines)
        kept = state.meta.get("agent_bytes") if state is not None else None
        if event.offset == 0:
            data = new
        elif isinstance(kept, bytes) and len(kept) == event.offset:
            data = kept + new
        else:
            end = event.offset + len(new)
            try:
                with open(event.path, "rb") as fh:
                    data = fh.read(end)
            except OSError as exc:
                self.report("warning", f"{event.path}: cannot read: {exc}")
                return
        result = import_agent_bytes(
            data, name=event.path, user=self.user, source="follow", full_path=event.path
        )
        if not result.ok or result.session is None:
            problems = "; ".join(str(p) for p in result.errors)
            self.report("warning", f"{event.path}: not stored: {problems}")
            if state is not None:
                state.meta.pop("agent_bytes", None)  # read from the file next time
            return
        if state is not None:
            state.meta["session_pk"] = result.session.pk
            state.meta["agent_bytes"] = data
        self.report(
            "info",
            f"{event.path}: {result.session.agent_name} session {result.session.session_id} "
            f"(+{result.added} entries)",
        )

    def _retry(self, event: FollowEvent, error: Exception) -> None:
        if event.kind not in ("new", "lines"):
            return
        state = self._state(event.path)
        if state is not None and state.meta.get("agent"):
            state.meta.pop("agent_bytes", None)  # the retry reads the file up to its end
        try:
            if state is not None and state.meta.get("agent"):
                self._agent(event)
                return
            self._reimport(event, reason=f"retried after {type(error).__name__}")
        except Exception as again:
            close_old_connections()
            self.report("warning", f"{event.path}: not stored yet ({again}); will retry")
            if state is not None:
                state.meta["pending"] = True

    def _stopped(self, event: FollowEvent) -> None:
        from explorer import services

        state = self._state(event.path)
        pk = state.meta.get("session_pk") if state is not None else None
        if pk is not None:
            services.follow_stopped(pk, viewer_message(event))

    def _state(self, path: str) -> FileState | None:
        return self.follower.files.get(path)

    def _new(self, event: FollowEvent) -> None:
        from explorer import services

        data = b"".join(line + b"\n" for line in event.lines)
        result = services.import_bytes(
            data, source_path=event.path, user=self.user, source="follow"
        )
        state = self._state(event.path)
        if not result.ok or result.session is None:
            problems = "; ".join(str(p) for p in result.errors) or "not a session file"
            self.report("warning", f"{event.path}: not followed: {problems}")
            if state is not None:
                state.meta["ignored"] = True
            return
        if state is not None:
            state.meta["session_pk"] = result.session.pk
        verb = "new session" if result.created else "resumed session"
        self.report(
            "info",
            f"{event.path}: {verb} {result.session.session_id} (+{result.added} entries)",
        )

    def _lines(self, event: FollowEvent) -> None:
        from explorer.models import Session

        state = self._state(event.path)
        if state is None or state.meta.get("ignored"):
            return
        pk = state.meta.get("session_pk")
        session = Session.objects.filter(pk=pk).first() if pk is not None else None
        if session is None:
            self._reimport(event, reason="its session is not stored")
            return
        added = self._append_fast(session, event.lines)
        if added is None:
            self._reimport(event, reason="lines need the full importer")
        elif added:
            self.report("info", f"{event.path}: +{added} entries in {session.session_id}")

    def _append_fast(self, session, lines: tuple[bytes, ...]) -> int | None:
        """Insert well-formed, new entry lines verbatim; None when the slow path is needed."""
        from explorer import services

        ids = []
        for line in lines:
            try:
                value = jsonfmt.loads(line)
            except ValueError:
                return None
            if not isinstance(value, dict) or not isinstance(value.get("id"), str):
                return None
            if value.get("type") == "session":
                return None
            ids.append(value["id"])
        if len(set(ids)) != len(ids):
            return None
        try:
            line_text = [line.decode("utf-8") for line in lines]
        except UnicodeDecodeError:
            return None
        return services.append_lines_verbatim(session, line_text, ids, source="follow")

    def _reimport(self, event: FollowEvent, *, reason: str) -> None:
        from explorer import services

        end = event.offset + sum(len(line) + 1 for line in event.lines)
        try:
            with open(event.path, "rb") as fh:
                data = fh.read(end)
        except OSError as exc:
            self.report("warning", f"{event.path}: cannot read: {exc}")
            return
        result = services.import_bytes(
            data, source_path=event.path, user=self.user, source="follow"
        )
        if not result.ok or result.session is None:
            problems = "; ".join(str(p) for p in result.errors)
            self.report("warning", f"{event.path}: appended lines not stored: {problems}")
            return
        state = self._state(event.path)
        if state is not None:
            state.meta["session_pk"] = result.session.pk
            state.meta.pop("pending", None)
            state.meta.pop("ignored", None)
        self.report(
            "info",
            f"{event.path}: +{result.added} entries in {result.session.session_id} ({reason})",
        )


def start_follow_thread(
    directory: str,
    *,
    interval: float = 0.25,
    report: Report | None = None,
    stop: threading.Event | None = None,
    depth: int = 1,
) -> tuple[threading.Thread, threading.Event]:
    """Follow ``directory`` (and ``depth`` folder levels below it) in a daemon thread (for
    running next to the web server)."""
    stop = stop or threading.Event()
    follower = DirectoryFollower(directory, recursive_depth=depth)
    ingestor = FollowIngestor(follower, report=report)

    def main() -> None:
        try:
            follow_forever(follower, ingestor.handle, interval=interval, stop=stop)
        except Exception:
            logger.exception("follow thread stopped")

    thread = threading.Thread(target=main, name="follow", daemon=True)
    thread.start()
    return thread, stop


def viewer_message(event: FollowEvent) -> str:
    """The follower's message as every viewer of the session may read it: the file by its
    name, not the server's absolute path to it (the operator's log keeps the path)."""
    name = os.path.basename(event.path.rstrip("/\\")) or "the file"
    return event.message.replace(event.path, name)
