"""What a page's row shows of an entry's line: its titles, role and previews, a few hundred
characters whatever the line's size.

Each tab that lists entries builds its rows' texts with the function named for it here,
from the parsed (masked) entry: Raw vs projected with
:func:`explorer.analysis.projection.entry_texts`, Compare with :func:`compare_texts`,
Compactions with :func:`listed_row` and :func:`kept_row`, the Tree and Live tabs' route rows
with :func:`row_facts`. :func:`line_texts` is all of
them at once: what ``explorer.line_text_store`` stores for a multi-MB line when it arrives,
so that a page showing the line as one row reads those few hundred characters instead of
parsing megabytes. One function per text, called by the page and by the write alike, so the
stored texts cannot drift from the ones a page computes.
"""

from __future__ import annotations

from typing import Any

from explorer.analysis.projection import entry_texts
from explorer.session.describe import entry_role, entry_title, message_preview
from explorer.session.messages import session_entry_to_context_messages

# Compare's texts of an entry: its role, its title in a route's list, its title as the
# common ancestor, and the preview of its one message on a line of the difference (None
# unless it gives exactly one message).
CompareTexts = tuple[str, str, str, str | None]
# Raw vs projected's: the row's title and the (role, preview) of each message it gives.
ContextTexts = tuple[str, list[tuple[str, str]]]
# A Tree or Live route row's: the entry's message role (None for other entries), the row's
# role (the message role, else the entry's type) and its title.
RowFacts = tuple[str | None, str, str]


def row_facts(entry: dict) -> RowFacts:
    """What a route row of the Tree and Live tabs shows of ``entry`` (:data:`RowFacts`);
    an unknown entry (``{}``) shows an empty title."""
    role = entry_role(entry)
    return role, role or str(entry.get("type") or "entry"), entry_title(entry, 60) if entry else ""


def compare_texts(entry: dict) -> CompareTexts:
    """What Compare shows of ``entry`` (:data:`CompareTexts`)."""
    own = session_entry_to_context_messages(entry)
    preview = message_preview(own[0]) if len(own) == 1 and isinstance(own[0], dict) else None
    return entry_role(entry), entry_title(entry, 110), entry_title(entry, 100), preview


def listed_row(entry: dict) -> dict[str, Any]:
    """A replaced (or summarised) entry as the Compactions tab lists it."""
    message = entry.get("message")
    return {
        "id": entry.get("id"),
        "type": entry.get("type"),
        "title": entry_title(entry, 140),
        "role": (message or {}).get("role") if isinstance(message, dict) else "",
    }


def kept_row(entry: dict) -> dict[str, Any]:
    """A kept entry as the Compactions tab lists it: as a replaced one (:func:`listed_row`),
    so both lists name a message by its role ("user"), not its entry type ("message")."""
    return listed_row(entry)


def line_texts(entry: dict) -> dict[str, Any]:
    """Every text a row of Raw vs projected (``ctx``), Compare (``cmp``), Compactions
    (``list``, a kept row too) or the Tree and Live route rows (``row``)
    shows of ``entry``."""
    return {
        "ctx": entry_texts(entry),
        "cmp": compare_texts(entry),
        "list": listed_row(entry),
        "row": row_facts(entry),
    }
