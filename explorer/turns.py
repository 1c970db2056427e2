"""The turn runner: an editor's message, the model's streamed answer, automatic compaction.

One turn at a time per session. The in-process registry refuses a second turn in this worker
at once; a marker row in the database (a reserved ``Leaf`` name, unique per session) refuses
it in every other worker. A turn runs in its own thread: the provider call blocks on the
network, and the page that started it must not wait. Deltas go to the session's group as they
arrive; the messages themselves are appended through ``explorer.services`` (the single
writer), whose signals broadcast them like any other write.

Cancelling sets an Event the provider watches (it closes the connection); the answer is then
recorded with ``stopReason: "aborted"``. A cancel that reaches another worker is passed on
through the marker row, which the running turn checks between deltas.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, close_old_connections, connection, transaction
from django.utils import timezone

from explorer import live
from explorer.session.sentinel import UNSET

logger = logging.getLogger(__name__)

# Leaf names starting with "__" are internal markers, never user cursors.
TURN_MARKER = "__turn__"
CANCEL_PREFIX = "cancel:"
# A marker older than this (a worker died mid-turn) no longer blocks new turns; a running
# turn refreshes its marker every HEARTBEAT seconds.
STALE_AFTER = 300.0
HEARTBEAT = 2.0

BUSY_MESSAGE = (
    "A turn is already running in this session. Wait for it to finish or cancel it; "
    "turns are never interleaved."
)
NO_PROVIDER_MESSAGE = (
    "No model provider is configured, so new turns cannot be run. Set SESSIONS_LLM_BASE_URL "
    "(and SESSIONS_LLM_MODEL, SESSIONS_LLM_API_KEY) to an OpenAI-compatible server. "
    "Compaction still works with the embedded summarizer."
)


class TurnError(Exception):
    """A turn could not start; ``str(exc)`` is meant for the user."""


class TurnBusy(TurnError):
    def __init__(self, message: str = BUSY_MESSAGE) -> None:
        super().__init__(message)


class NoProvider(TurnError):
    def __init__(self, message: str = NO_PROVIDER_MESSAGE) -> None:
        super().__init__(message)


@dataclass
class RunningTurn:
    turn_id: str
    session_pk: int
    user_id: int | None
    user_name: str
    prompt: str
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    text: str = ""
    started: float = field(default_factory=time.time)
    thread: threading.Thread | None = None
    # Filled in as the turn progresses (for callers and tests).
    user_entry_id: str | None = None
    assistant_entry_id: str | None = None
    assistant_message: dict | None = None
    compacted: bool = False
    error: str | None = None

    def describe(self) -> dict[str, Any]:
        return {"turn_id": self.turn_id, "user_name": self.user_name}


_registry: dict[int, RunningTurn] = {}
_registry_lock = threading.Lock()


def running_turn(session_pk: int) -> RunningTurn | None:
    """The turn running for this session in this process, if any."""
    return _registry.get(session_pk)


def provider_configured() -> bool:
    from explorer.session.providers import provider_from_env

    return provider_from_env() is not None


# ---------------------------------------------------------------------------------------------
# The database marker


def _acquire_marker(session, turn_id: str) -> None:
    from explorer.models import Leaf

    for _attempt in range(2):
        try:
            with transaction.atomic():
                Leaf.objects.create(session=session, name=TURN_MARKER, entry_id=turn_id)
            return
        except IntegrityError:
            stale = timezone.now() - timezone.timedelta(seconds=STALE_AFTER)
            # A marker nobody refreshed for a long time belongs to a dead worker.
            if not Leaf.objects.filter(
                session=session, name=TURN_MARKER, updated__lt=stale
            ).delete()[0]:
                raise TurnBusy() from None
    raise TurnBusy()


def _release_marker(session_pk: int, turn_id: str) -> None:
    from explorer.models import Leaf

    Leaf.objects.filter(session_id=session_pk, name=TURN_MARKER).filter(
        entry_id__in=[turn_id, CANCEL_PREFIX + turn_id]
    ).delete()


def _heartbeat(turn: RunningTurn) -> None:
    """Refresh the marker; notice a cancel requested through another worker."""
    from explorer.models import Leaf

    row = Leaf.objects.filter(session_id=turn.session_pk, name=TURN_MARKER).first()
    if row is None:
        return
    if row.entry_id == CANCEL_PREFIX + turn.turn_id:
        turn.cancel.set()
    row.save(update_fields=["updated"])


def turn_busy_elsewhere(session_pk: int) -> bool:
    from explorer.models import Leaf

    stale = timezone.now() - timezone.timedelta(seconds=STALE_AFTER)
    return Leaf.objects.filter(session_id=session_pk, name=TURN_MARKER, updated__gte=stale).exists()


# ---------------------------------------------------------------------------------------------
# Starting and cancelling


def start_turn(
    session,
    user,
    text: str,
    *,
    provider=None,
    summarizer=None,
    leaf_id: Any = None,
    background: bool = True,
) -> RunningTurn:
    """Start a turn at the user's cursor (or ``leaf_id``); raises :class:`TurnError`."""
    from explorer.session.providers import provider_from_env

    if not isinstance(text, str) or not text.strip():
        raise TurnError("Type a message first.")
    provider = provider if provider is not None else provider_from_env()
    if provider is None:
        raise NoProvider()
    turn = RunningTurn(
        turn_id=uuid.uuid4().hex,
        session_pk=session.pk,
        user_id=getattr(user, "pk", None),
        user_name=user.get_username() if user is not None else "",
        prompt=text,
    )
    with _registry_lock:
        if session.pk in _registry:
            raise TurnBusy()
        _acquire_marker(session, turn.turn_id)
        _registry[session.pk] = turn
    args = (turn, session, user, text, provider, summarizer, leaf_id)
    if background:
        turn.thread = threading.Thread(
            target=_thread_main, args=args, name=f"turn-{session.pk}", daemon=True
        )
        turn.thread.start()
    else:
        _run(*args)
    return turn


def cancel_turn(session_pk: int) -> bool:
    """Ask the running turn to stop; True when there was one to ask."""
    from explorer.models import Leaf

    turn = _registry.get(session_pk)
    if turn is not None:
        turn.cancel.set()
        return True
    # Maybe it runs in another worker: flag its marker.
    row = Leaf.objects.filter(session_id=session_pk, name=TURN_MARKER).first()
    if row is None or not row.entry_id or row.entry_id.startswith(CANCEL_PREFIX):
        return False
    Leaf.objects.filter(pk=row.pk, entry_id=row.entry_id).update(
        entry_id=CANCEL_PREFIX + row.entry_id
    )
    return True


def _thread_main(*args) -> None:
    close_old_connections()
    try:
        _run(*args)
    finally:
        connection.close()


# ---------------------------------------------------------------------------------------------
# The turn itself


def _now_ms() -> int:
    return int(time.time() * 1000)


def _run(turn: RunningTurn, session, user, text: str, provider, summarizer, leaf_id) -> None:
    from explorer import services, store
    from explorer.session.context import context_from_path
    from explorer.session.messages import convert_to_llm

    try:
        live.send_turn_event(session, "start", **turn.describe())
        user_message = {
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "timestamp": _now_ms(),
        }
        appended = services.append_message(
            session,
            user,
            user_message,
            leaf_id=UNSET if leaf_id is None else leaf_id,
            source="turn",
        )
        turn.user_entry_id = appended.entry.entry_id
        path = store.path_to(session, turn.user_entry_id)
        messages = convert_to_llm(context_from_path(path).messages)

        final: dict | None = None
        last_beat = time.monotonic()
        for kind, value in provider.stream(messages, cancel=turn.cancel):
            if kind == "delta":
                offset = len(turn.text)
                turn.text += value
                live.send_turn_event(
                    session, "delta", turn_id=turn.turn_id, text=value, offset=offset
                )
            elif kind == "done":
                final = value
            if time.monotonic() - last_beat > HEARTBEAT:
                last_beat = time.monotonic()
                _heartbeat(turn)
        if final is None:  # a provider must end with "done"; record the failure anyway
            final = _failed_message(provider, turn.text, "The provider ended without a result")
        if turn.cancel.is_set() and final.get("stopReason") != "aborted":
            final = {**final, "stopReason": "aborted"}
        turn.assistant_message = final
        turn.assistant_entry_id = services.append_message(
            session, user, final, leaf_id=turn.user_entry_id, source="turn"
        ).entry.entry_id
        turn.compacted = _maybe_compact(session, user, turn, summarizer)
        live.send_turn_event(
            session,
            "end",
            turn_id=turn.turn_id,
            stop_reason=final.get("stopReason", ""),
            error_message=final.get("errorMessage") or "",
            compacted=turn.compacted,
        )
    except Exception as exc:
        logger.exception("turn %s in session %s failed", turn.turn_id, session.pk)
        turn.error = str(exc) or type(exc).__name__
        live.send_turn_event(
            session, "error", turn_id=turn.turn_id, message=f"The turn failed: {turn.error}"
        )
    finally:
        try:
            _release_marker(session.pk, turn.turn_id)
        finally:
            with _registry_lock:
                if _registry.get(session.pk) is turn:
                    del _registry[session.pk]
            turn.done.set()


def _failed_message(provider, text: str, error: str) -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}] if text else [],
        "api": "openai-completions",
        "provider": getattr(provider, "provider", "openai-compatible"),
        "model": getattr(provider, "model", ""),
        "usage": {
            "input": 0,
            "output": 0,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 0,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": "error",
        "timestamp": _now_ms(),
        "errorMessage": error,
    }


def _maybe_compact(session, user, turn: RunningTurn, summarizer) -> bool:
    """After a successful answer: compact when its usage says the context is nearly full."""
    from explorer import services
    from explorer.session.tokens import calculate_context_tokens, should_compact

    message = turn.assistant_message or {}
    if message.get("stopReason") in ("aborted", "error"):
        return False
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return False
    tokens = calculate_context_tokens(usage)
    if not should_compact(tokens, live.context_window(), live.compaction_settings()):
        return False
    live.send_turn_event(session, "compacting", turn_id=turn.turn_id)
    if summarizer is None:
        from explorer.session.summarizers import summarizer_from_env

        summarizer = summarizer_from_env()
    services.compact_now(
        session,
        user,
        leaf_id=turn.assistant_entry_id,
        summarizer=summarizer,
        settings=live.compaction_settings(),
    )
    return True
