"""The Integrity tab's check of a Codex session's recorded contexts: each compaction's
``replacement_history`` against the turns typed on its route and the context shown here
against the engine's reading of the original file. Reads through the base query modules;
``explorer.codex_context`` supplies the file's records and never imports the reads.
"""

from __future__ import annotations

from typing import Any

from explorer import codex_context
from explorer.analysis.recorded import projection_of
from explorer.models import Session
from explorer.queries.entries import full_path, shown_entry
from explorer.queries.keep import allowed_fingerprints
from explorer.queries.routes import light_path
from explorer.session.formats.codex import is_turn_start, user_text


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
    foreign = codex_context.engine_session(session) if session.compaction_count else None
    rows: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    allow = allowed_fingerprints(session)
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
                typed.append(user_text(step_payload) or "")
        kept_users = [t for t in (user_text(i) for i in history[:-1]) if t is not None]
        kept = [t for t in typed if t in kept_users]
        foreign_kept = [t for t in kept_users if not t.startswith("<") and t not in typed]
        # At every leaf below the compaction (a few), the app's context against the engine's.
        below = [
            leaf for leaf in foreign.leaves() if record.id in {r.id for r in foreign.route(leaf)}
        ]
        differs: list[tuple[str, int, int]] = []
        for leaf in [record.id, *below][: codex_context.LEAVES_CHECKED]:
            engine = [
                codex_context.message_signature(m)
                for m in shown_entry([m for _, m in foreign.context(leaf)], allow)
            ]
            light = light_path(session, leaf)
            path = full_path(session, light) if light else []
            shown = [codex_context.message_signature(m) for m in projection_of(path).messages]
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
