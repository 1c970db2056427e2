"""What the model saw after a Codex compaction, for a stored Codex session.

A Codex session is stored as its Pi form, whose compaction entry Pi projects as a summary.
Codex itself wrote the whole context it rebuilt (`replacement_history`), so the app reads that
history from the original bytes kept on the session, converts it with the engine's Codex
reader, and attaches it to each loaded copy of the compaction entry
(:data:`explorer.analysis.recorded.RECORDED`): the projection every page shows
(:func:`explorer.analysis.recorded.projection_of`) then starts from it, as Codex does when it
resumes. An encrypted (provider-side) compaction stays a placeholder saying so; its text is not
in the file. The stored lines are never changed, so a route continued as a Pi session is still
projected by Pi's rule.

:func:`recorded_checks` compares, per compaction, the history the file recorded against what
the engine derives, and the context the app shows against the engine's own `context`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from explorer.analysis.recorded import RECORDED, projection_of, recorded_of
from explorer.models import Session
from explorer.session.describe import message_preview
from explorer.session.formats import load_foreign_bytes
from explorer.session.formats.codex import CodexSession, is_turn_start

__all__ = [
    "enrich",
    "recorded_checks",
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


def _engine_session(session: Session) -> CodexSession | None:
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
    found = _histories(_engine_session(session), "")
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


def enrich(session: Session, entries: dict[str, dict]) -> dict[str, dict]:
    """``entries`` (loaded, masked) with each Codex compaction's recorded context attached
    to a copy of its entry, masked like the entry. Anything else is returned unchanged."""
    if session.agent != "codex" or not session.compaction_count:
        return entries
    wanted = [eid for eid, e in entries.items() if e.get("type") == "compaction"]
    if not wanted:
        return entries
    histories = recorded_histories(session)
    if not histories:
        return entries
    from explorer import queries

    allow = queries.allowed_fingerprints(session)
    for eid in wanted:
        recorded = histories.get(eid)
        if recorded is not None:
            entries[eid] = queries.shown_entry({**entries[eid], RECORDED: recorded}, allow)
    return entries


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


def _signature(message: dict[str, Any]) -> tuple[str, str]:
    return str(message.get("role", "")), message_preview(message, 400)


def _user_text(item: Any) -> str | None:
    if not isinstance(item, dict) or item.get("type") != "message" or item.get("role") != "user":
        return None
    content = item.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(
        str(c["text"])
        for c in (content if isinstance(content, list) else [])
        if isinstance(c, dict) and isinstance(c.get("text"), str)
    )


def recorded_checks(session: Session) -> dict[str, Any] | None:
    """Each compaction's recorded history against what the engine derives, for the
    Integrity tab (None for a session that is not Codex).

    Per compaction with a `replacement_history`: the typed user turns on its route (X4) that
    the history kept and dropped (Codex keeps the newest ones within a budget, so a dropped one
    is a fact, not a fault), kept user messages typed on no earlier record of the route
    (`compaction-history`, also reported at import), whether its summary is encrypted, and
    whether the context the app shows at the compaction (the stored form's projection with the
    recorded history) equals the engine's `context` read from the original file; a mismatch
    is an item of the section."""
    if session.agent != "codex":
        return None
    foreign = _engine_session(session) if session.compaction_count else None
    rows: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    from explorer import queries

    allow = queries.allowed_fingerprints(session)
    for record in foreign.entries() if foreign is not None else ():
        payload = record.value.get("payload")
        history = payload.get("replacement_history") if isinstance(payload, dict) else None
        if record.record_type != "compacted" or not isinstance(history, list):
            continue
        typed: list[str] = []
        for step in foreign.route(record.id)[:-1]:
            step_payload = step.value.get("payload")
            step_payload = step_payload if isinstance(step_payload, dict) else step.value
            if step.record_type == "response_item/message" and is_turn_start(step_payload):
                typed.append(_user_text(step_payload) or "")
        kept_users = [t for t in (_user_text(i) for i in history[:-1]) if t is not None]
        kept = [t for t in typed if t in kept_users]
        foreign_kept = [t for t in kept_users if not t.startswith("<") and t not in typed]
        # At every leaf below the compaction (a few), the app's context against the engine's.
        below = [
            leaf for leaf in foreign.leaves() if record.id in {r.id for r in foreign.route(leaf)}
        ]
        differs: list[tuple[str, int, int]] = []
        for leaf in [record.id, *below][:LEAVES_CHECKED]:
            engine = [
                _signature(m)
                for m in queries.shown_entry([m for _, m in foreign.context(leaf)], allow)
            ]
            light = queries.light_path(session, leaf)
            path = queries.full_path(session, light) if light else []
            shown = [_signature(m) for m in projection_of(path).messages]
            if shown != engine:
                differs.append((leaf, len(shown), len(engine)))
        agrees = not differs
        rows.append(
            {
                "id": record.id,
                "line": record.line,
                "items": len(history),
                "typed": len(typed),
                "kept": len(kept),
                "dropped": len(typed) - len(kept),
                "not_typed": len(foreign_kept),
                "encrypted": any(m.get("encrypted") for m in record.messages),
                "agrees": agrees,
            }
        )
        for leaf, n_shown, n_engine in differs:
            items.append(
                {
                    "id": leaf,
                    "line": record.line,
                    "code": "recorded-context-differs",
                    "detail": f"after compaction {record.id}, the context shown here at {leaf}"
                    f" ({n_shown} messages) differs from the engine's reading of the file"
                    f" ({n_engine} messages)",
                }
            )
    n = len(rows)
    return {
        "key": "codex-recorded-context",
        "title": "Recorded context against the engine",
        "help": "After each compaction Codex wrote the context it rebuilt (replacement"
        " history); the projection here starts from it. Each is compared with the typed turns"
        " on its route and with the engine's reading of the file."
        f" {n} compaction{'s' if n != 1 else ''} with a recorded history checked.",
        "items": items,
        "agent": "codex",
        "compactions": rows,
    }
