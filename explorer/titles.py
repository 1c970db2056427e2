"""One title per session, and the masked text it is made of.

A session is called by its name (masked) alone; else by its first user message and the
file it came from; else by its id. The list, the session page, import results, search and
JSON all read :func:`session_title`, so one session is never called two things. Titles are
computed from stored rows (a rename or a first message arriving retitles it with no stored
copy to refresh). This module imports no model: ``models.Session.display_name`` reads it,
and ``queries`` re-exports it, without an import circle.
"""

from __future__ import annotations

from typing import Any

from explorer import conf
from explorer.secrets import redact_entry
from explorer.session import jsonfmt
from explorer.session.describe import entry_text, one_line

TITLE_MESSAGE_CHARS = 90  # the first message as a title: the list's cell width


def shown_text(text: str, allow: frozenset[str] = frozenset()) -> str:
    """Free text (a comment, a path) as the pages may show it: each secret masked but the
    session's false positives (``allow``), as the entries are."""
    from explorer.secrets import fingerprint, mask_text, scan_text

    key = conf.secrets_key()
    found = [m for m in scan_text(text) if fingerprint(text[m.start : m.end], key) not in allow]
    return mask_text(text, found) if found else text


def file_part(path: str) -> str:
    """The last part of a path (either slash)."""
    return path.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] if path else ""


def first_message_text(session: Any, limit: int = 140) -> str:
    """The session's first user message (``first_message_raw``, read by the caller's query
    or by :func:`session_title_parts`) as one masked line of at most ``limit`` characters."""
    raw = getattr(session, "first_message_raw", None)
    if not raw:
        return ""
    try:
        data = redact_entry(jsonfmt.loads(raw), key=conf.secrets_key())
    except ValueError:
        return ""
    text = one_line(entry_text(data), limit) if isinstance(data, dict) else ""
    if getattr(session, "agent", "") == "codex" and text.startswith("<"):
        # Codex writes its environment context as a user message before the first typed
        # turn (X4): not what the user said; the session's name is that first turn.
        return ""
    return text


def session_title_parts(session: Any) -> tuple[str, str]:
    """(what the session is called, the file it came from); the first message is read once
    per object unless the query brought it (``queries.with_first_message``)."""
    name = session.shown_name
    if name:
        return name, ""
    if not hasattr(session, "first_message_raw"):
        row = None
        if session.pk:
            first = session.entries.filter(type="message", role="user").order_by("position")
            row = first.values("raw").first()
        session.first_message_raw = row["raw"] if row else None
    first = first_message_text(session, TITLE_MESSAGE_CHARS)
    file_name = file_part(shown_text(session.source_path or ""))  # masked, as in the list
    return first or file_name or f"Session {session.session_id}", file_name if first else ""


def session_title(session: Any) -> str:
    """The title as one line: "first message · file.jsonl" for an unnamed session."""
    main, file_name = session_title_parts(session)
    return f"{main} · {file_name}" if file_name else main
