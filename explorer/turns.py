"""The turn runner: an editor's message, the model's streamed answer, automatic compaction.

One turn at a time per session. The in-process registry refuses a second turn in this worker
at once; the session's ``TurnLock`` row (unique per session) refuses it in every other
worker. A turn runs in its own thread: the provider call blocks on the
network, and the page that started it must not wait. Deltas go to the session's group as they
arrive; the messages themselves are appended through ``explorer.services`` (the single
writer), which broadcasts them like any other write.

Cancelling sets an Event the provider watches (it closes the connection); the answer is then
recorded with ``stopReason: "aborted"``. A cancel that reaches another worker is passed on
through the lock row, which the running turn checks at its heartbeat.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from django.db import close_old_connections, connection

from explorer import broadcast, conf, queries, services
from explorer.secrets import Match, fingerprint, mask_text, scan_text
from explorer.secrets.rules import PRIVATE_KEY_MAX
from explorer.session.providers import zero_usage
from explorer.session.sentinel import UNSET

logger = logging.getLogger(__name__)

# A lock older than this (a worker died mid-turn) no longer blocks new turns; a running
# turn refreshes its lock every HEARTBEAT seconds.
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


class TurnStale(TurnError):
    """The user's cursor left the leaf the page showed: the message would be answered in a
    conversation its author has not seen (another tab or worker wrote meanwhile)."""

    def __init__(self, stale: services.StaleLeaf) -> None:
        self.current = stale.current
        super().__init__(str(stale))


@dataclass
class RunningTurn:
    turn_id: str
    session_pk: int
    user_id: int | None
    user_name: str
    prompt: str
    cancel: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    # What viewers were sent (secrets masked): offsets of the delta events count in it,
    # and a viewer joining mid-turn is sent it whole. ``raw_text`` is the model's own text.
    text: str = ""
    raw_text: str = ""
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


# Text before the committed part that is scanned again with each delta, so a secret whose
# name or prefix was already sent ("api_key = " … the value) is still recognised.
SCAN_CONTEXT = 256


class StreamMasker:
    """Masks a streamed answer chunk by chunk although a secret may arrive split over
    several deltas: the tail that could still be (the start of) a secret is held back, and
    what is released is scanned together with what came before it.

    Held back: the trailing run of non-space characters (every secret the scanner knows
    ends in one) and any match that reaches into it, e.g. a private key block still being
    written. Released text is masked like the read edge masks stored entries (the same
    scanner and the same false-positive fingerprints), so the final stored answer and the
    streamed text show the same placeholders. Work per delta is bounded by the context
    scanned, not by the length of the answer.
    """

    def __init__(self, allow: frozenset[str] = frozenset(), key: bytes = b"") -> None:
        self.raw = ""
        self.base = 0  # raw[:base] has been released
        self.allow = allow
        self.key = key

    def _matches(self, start: int) -> list[Match]:
        found = [
            Match(m.kind, m.start + start, m.end + start)
            for m in scan_text(self.raw[start:])
            if m.end + start > self.base
        ]
        if self.allow:
            found = [
                m
                for m in found
                if fingerprint(self.raw[m.start : m.end], self.key) not in self.allow
            ]
        return found

    def feed(self, delta: str, *, final: bool = False) -> str:
        """Take the next delta; return the masked text that may be sent now ("" when it is
        all held back). ``final`` releases everything (the answer is complete)."""
        self.raw += delta
        start = max(0, self.base - SCAN_CONTEXT)
        header = self.raw.rfind("-----BEGIN", max(0, self.base - PRIVATE_KEY_MAX))
        if 0 <= header < start:  # a key block began earlier: scan it whole
            start = header
        matches = self._matches(start)
        cut = len(self.raw)
        if not final:
            cut = max(self.base, cut - len(_last_word(self.raw)))
            for m in matches:
                if m.end > cut or (m.end == len(self.raw) and m.start < cut):
                    cut = max(self.base, min(cut, m.start))
        if cut <= self.base:
            return ""
        spans = [
            Match(m.kind, max(m.start, self.base) - self.base, min(m.end, cut) - self.base)
            for m in matches
            if m.start < cut and m.end > self.base
        ]
        out = mask_text(self.raw[self.base : cut], spans)
        self.base = cut
        return out


def _last_word(text: str) -> str:
    """The trailing run of non-whitespace characters of ``text``."""
    i = len(text)
    while i > 0 and not text[i - 1].isspace():
        i -= 1
    return text[i:]


_registry: dict[int, RunningTurn] = {}
_registry_lock = threading.Lock()


@dataclass
class SharedTurn:
    """A turn running in another worker, as that worker last published it: what a viewer
    who connects here needs to show the answer so far before the next delta arrives."""

    turn_id: str
    session_pk: int
    user_name: str
    text: str

    def describe(self) -> dict[str, Any]:
        return {"turn_id": self.turn_id, "user_name": self.user_name}


def _shared_key(session_pk: int) -> str:
    return f"turn-partial:{session_pk}"


def _publish(turn: RunningTurn) -> None:
    """Keep the turn's text so far where every worker reads it (the shared cache: Redis on
    a team server). Written before each delta is broadcast, so a viewer that reads it and
    then receives the delta can tell the overlap from the offset."""
    from django.core.cache import cache

    value = {"turn_id": turn.turn_id, "user_name": turn.user_name, "text": turn.text}
    try:
        cache.set(_shared_key(turn.session_pk), value, timeout=int(STALE_AFTER))
    except Exception:
        logger.warning("could not publish the partial text of turn %s", turn.turn_id)


def _unpublish(turn: RunningTurn) -> None:
    from django.core.cache import cache

    try:
        shared = cache.get(_shared_key(turn.session_pk))
        if isinstance(shared, dict) and shared.get("turn_id") == turn.turn_id:
            cache.delete(_shared_key(turn.session_pk))
    except Exception:
        logger.warning("could not clear the partial text of turn %s", turn.turn_id)


def running_turn(session_pk: int) -> RunningTurn | SharedTurn | None:
    """The turn running for this session: this process's own, else the one another worker
    publishes in the shared cache (text so far included), else None."""
    local = _registry.get(session_pk)
    if local is not None:
        return local
    from django.core.cache import cache

    try:
        shared = cache.get(_shared_key(session_pk))
    except Exception:
        return None
    if not isinstance(shared, dict) or not isinstance(shared.get("text"), str):
        return None
    return SharedTurn(
        turn_id=str(shared.get("turn_id", "")),
        session_pk=session_pk,
        user_name=str(shared.get("user_name", "")),
        text=shared["text"],
    )


def provider_configured() -> bool:
    return conf.provider_configured()


def _heartbeat(turn: RunningTurn) -> None:
    """Refresh the lock; notice a cancel requested through another worker."""
    if services.refresh_turn_lock(turn.session_pk, turn.turn_id):
        turn.cancel.set()


def turn_busy_elsewhere(session_pk: int) -> bool:
    return queries.turn_running(session_pk, stale_after=STALE_AFTER)


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
    expected_leaf: Any = UNSET,
    background: bool = True,
) -> RunningTurn:
    """Start a turn at the user's cursor (or ``leaf_id``); raises :class:`TurnError`.

    ``expected_leaf``: the cursor the author's page showed. A moved cursor is refused here,
    before anything runs (:class:`TurnStale`), and again when the user's message is
    appended under the session's row lock, so two tabs sending at once cannot both answer
    at the same leaf."""
    if not isinstance(text, str) or not text.strip():
        raise TurnError("Type a message first.")
    refusal = services.foreign_edit_refusal(session, "a new turn")
    if refusal is not None:
        raise TurnError(refusal)
    provider = provider if provider is not None else conf.provider()
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
        try:
            services.acquire_turn_lock(session, turn.turn_id, stale_after=STALE_AFTER)
        except services.TurnLockBusy:
            raise TurnBusy() from None
        if expected_leaf is not UNSET and leaf_id is None:
            current = queries.cursor_id(session, user)
            if current != expected_leaf:
                services.release_turn_lock(session.pk, turn.turn_id)
                raise TurnStale(services.StaleLeaf(expected_leaf, current))
        _registry[session.pk] = turn
    args = (turn, session, user, text, provider, summarizer, leaf_id, expected_leaf)
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
    turn = _registry.get(session_pk)
    if turn is not None:
        turn.cancel.set()
        return True
    # Maybe it runs in another worker: flag its lock.
    return services.request_turn_cancel(session_pk)


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


def _run(
    turn: RunningTurn,
    session,
    user,
    text: str,
    provider,
    summarizer,
    leaf_id,
    expected_leaf: Any = UNSET,
) -> None:
    from explorer.session.context import context_from_path
    from explorer.session.messages import convert_to_llm

    try:
        _publish(turn)
        broadcast.turn_event(session, "start", **turn.describe())
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
            expected_leaf=expected_leaf if leaf_id is None else UNSET,
        )
        turn.user_entry_id = appended.entry.entry_id
        path = queries.path_to(session, turn.user_entry_id)
        messages = convert_to_llm(context_from_path(path).messages)

        final: dict | None = None
        last_beat = time.monotonic()
        masker = StreamMasker(queries.allowed_fingerprints(session), conf.secrets_key())
        for kind, value in provider.stream(messages, cancel=turn.cancel):
            if kind == "delta":
                turn.raw_text += value
                _send_delta(session, turn, masker.feed(value))
            elif kind == "done":
                final = value
            if time.monotonic() - last_beat > HEARTBEAT:
                last_beat = time.monotonic()
                _heartbeat(turn)
        _send_delta(session, turn, masker.feed("", final=True))
        if final is None:  # a provider must end with "done"; record the failure anyway
            final = _failed_message(provider, turn.raw_text, "The provider ended without a result")
        if turn.cancel.is_set() and final.get("stopReason") != "aborted":
            final = {**final, "stopReason": "aborted"}
        turn.assistant_message = final
        turn.assistant_entry_id = services.append_message(
            session, user, final, leaf_id=turn.user_entry_id, source="turn"
        ).entry.entry_id
        turn.compacted = _maybe_compact(session, user, turn, summarizer)
        broadcast.turn_event(
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
        broadcast.turn_event(
            session, "error", turn_id=turn.turn_id, message=f"The turn failed: {turn.error}"
        )
    finally:
        try:
            _unpublish(turn)
            services.release_turn_lock(session.pk, turn.turn_id)
        finally:
            with _registry_lock:
                if _registry.get(session.pk) is turn:
                    del _registry[session.pk]
            turn.done.set()


def _send_delta(session, turn: RunningTurn, shown: str) -> None:
    """Send the masked text released by the masker (nothing when all was held back)."""
    if not shown:
        return
    offset = len(turn.text)
    turn.text += shown
    _publish(turn)  # before the broadcast: a viewer elsewhere tells the overlap by the offset
    broadcast.turn_event(session, "delta", turn_id=turn.turn_id, text=shown, offset=offset)


def _failed_message(provider, text: str, error: str) -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}] if text else [],
        "api": "openai-completions",
        "provider": getattr(provider, "provider", "openai-compatible"),
        "model": getattr(provider, "model", ""),
        "usage": zero_usage(),
        "stopReason": "error",
        "timestamp": _now_ms(),
        "errorMessage": error,
    }


def _maybe_compact(session, user, turn: RunningTurn, summarizer) -> bool:
    """After a successful answer: compact when its usage says the context is nearly full."""
    from explorer.session.tokens import calculate_context_tokens, should_compact

    message = turn.assistant_message or {}
    if message.get("stopReason") in ("aborted", "error"):
        return False
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return False
    tokens = calculate_context_tokens(usage)
    if not should_compact(tokens, conf.context_window(), conf.compaction_settings()):
        return False
    broadcast.turn_event(session, "compacting", turn_id=turn.turn_id)
    if summarizer is None:
        summarizer = conf.summarizer()
    services.compact_now(
        session,
        user,
        leaf_id=turn.assistant_entry_id,
        summarizer=summarizer,
        settings=conf.compaction_settings(),
    )
    return True
