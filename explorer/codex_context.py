"""What the model saw after a Codex compaction, for a stored Codex session.

A Codex session is stored as its Pi form, whose compaction entry Pi projects as a summary.
Codex itself wrote the whole context it rebuilt (`replacement_history`), so the app reads that
history from the original bytes kept on the session, converts it with the engine's Codex
reader; the reads (``explorer.queries.entries``) attach it to each loaded copy of the
compaction entry (:data:`explorer.analysis.recorded.RECORDED`): the projection every page shows
(:func:`explorer.analysis.recorded.projection_of`) then starts from it, as Codex does when it
resumes. An encrypted (provider-side) compaction stays a placeholder saying so; its text is not
in the file. The stored lines are never changed, so a route continued as a Pi session is still
projected by Pi's rule.

``explorer.queries.recorded`` compares, per compaction, the history the file recorded against
what the engine derives, and the context the app shows against the engine's own `context`.
This module reads the file and never the query layer, so the reads can call it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from explorer.analysis.recorded import recorded_of
from explorer.models import Session
from explorer.session.describe import message_preview
from explorer.session.formats import load_foreign_bytes
from explorer.session.formats.codex import CodexSession

__all__ = [
    "engine_session",
    "message_signature",
    "recorded_figure",
    "recorded_figures",
    "recorded_histories",
]

_KEPT: OrderedDict[tuple[int, str, int], dict[str, dict[str, Any]]] = OrderedDict()
_LOCK = threading.Lock()
_SESSIONS_KEPT = 8
LEAVES_CHECKED = 20  # leaves below one compaction whose context is compared


def _original(session: Session) -> bytes:
    data = Session.every.filter(pk=session.pk).values_list("source_original", flat=True).first()
    return bytes(data or b"")


def engine_session(session: Session) -> CodexSession | None:
    data = _original(session)
    if not data:
        return None
    foreign = load_foreign_bytes(data, "codex", session.source_path or None)
    return foreign if isinstance(foreign, CodexSession) else None


def _histories(foreign: CodexSession | None, prefix: str) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for record in foreign.entries() if foreign is not None else ():
        payload = record.value.get("payload")
        history = payload.get("replacement_history") if isinstance(payload, dict) else None
        if record.record_type != "compacted" or not isinstance(history, list):
            continue
        found[prefix + record.id] = {
            "messages": list(record.messages),
            "items": len(history),
            "encrypted": any(m.get("encrypted") for m in record.messages),
        }
    return found


def recorded_histories(session: Session) -> dict[str, dict[str, Any]]:
    """Compaction id (`L<line>`) → its recorded context ``{"messages", "items",
    "encrypted"}`` for every `compacted` record of the session's file that carries a
    `replacement_history` (a legacy compaction, summary only, has none). Kept in this
    process per stored compaction count: a recorded history never changes once written and
    a new one is a new compaction entry, so an append without one (a followed file's turns)
    does not read the file again."""
    if session.agent != "codex" or not session.compaction_count:
        return {}
    # The creation time tells a session from a later one stored under the same pk.
    key = (session.pk, str(session.created), session.compaction_count)
    with _LOCK:
        if key in _KEPT:
            _KEPT.move_to_end(key)
            return _KEPT[key]
    found = _histories(engine_session(session), "")
    # The forks that joined this session: their own compactions are stored as
    # <fork thread>:L<line> (explorer.codex_forks).
    for thread, source_path, original in session.codex_forks.values_list(
        "thread_id", "source_path", "original"
    ):
        fork = load_foreign_bytes(bytes(original), "codex", source_path or None)
        if isinstance(fork, CodexSession):
            found.update(_histories(fork, f"{thread}:"))
    with _LOCK:
        _KEPT[key] = found
        while len(_KEPT) > _SESSIONS_KEPT:
            _KEPT.popitem(last=False)
    return found


def recorded_figures(entry: dict[str, Any]) -> dict[str, Any]:
    """``{"recorded": recorded_figure(entry)}`` for a compaction carrying a recorded
    context, else ``{}`` (a compaction detail's figures keep their keys otherwise)."""
    figure = recorded_figure(entry)
    return {} if figure is None else {"recorded": figure}


def recorded_figure(entry: dict[str, Any]) -> dict[str, Any] | None:
    """What the Compactions tab says of a compaction's recorded context: its items, whether
    the summary is encrypted, and each message (role, preview) the model got; None when the
    compaction carries none (a Pi or Claude Code one, or a legacy Codex one)."""
    recorded = recorded_of(entry)
    if recorded is None:
        return None
    return {
        "items": recorded["items"],
        "encrypted": recorded["encrypted"],
        "messages": [
            {"role": str(m.get("role", "")), "text": message_preview(m, 220)}
            for m in recorded["messages"]
        ],
    }


def message_signature(message: dict[str, Any]) -> tuple[str, str]:
    return str(message.get("role", "")), message_preview(message, 400)
