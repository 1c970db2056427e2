"""Bounds on what the live page sends: no WebSocket frame above ``FRAME_BYTES``.

A frame is one message to a browser (or a program) and one message through the channel
layer. Clients and proxies cap messages (common WebSocket libraries refuse 1 MiB, and a
refused frame closes the socket, which then reconnects into the same frame again), and a
big message holds the event loop that serves every other viewer while it is written. So
the live code never builds one: rows are bounded on their own (a row above ``ROW_BYTES``,
say a tool result with a large image, is sent as a short row linking to the entry, which
the Transcript tab shows in full), and a burst of rows is packed into as many frames as it
takes. A viewer therefore gets every entry of a burst, in order, in frames of bounded size.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.urls import reverse
from django.utils.html import format_html

FRAME_BYTES = 256 * 1024
# One row at most; the rest of a frame's budget carries the small notices (tree arrivals,
# other branches, the position) that end every frame.
ROW_BYTES = 160 * 1024
NOTICE_BYTES = 8 * 1024
# A turn's text is re-sent in pieces of at most this many characters (4 bytes each at most).
TEXT_CHARS = 48 * 1024


def size(text: str) -> int:
    """The text's size on the wire (UTF-8; a lone surrogate travels as U+FFFD, 3 bytes)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "replace"))


def bounded_row(session_pk: int, entry_id: str, dom: str, row: str) -> str:
    """``row`` when it fits in a frame with room to spare; else a short row of the same
    identity (``id``, ``data-entry``) that says how big the entry is and links to it."""
    if not row or size(row) <= ROW_BYTES:
        return row
    url = reverse("explorer:transcript", args=[session_pk])
    return str(
        format_html(
            '<li id="e-{}" data-entry="{}" class="t-entry t-too-large">'
            '<p class="muted">This entry is {} KB, too large to send live. '
            '<a href="{}?entry={}">Open it in the Transcript</a>.</p></li>',
            dom,
            entry_id,
            size(row) // 1024,
            url,
            entry_id,
        )  # fmt: skip
    )


def pack(parts: Iterable[str], limit: int = FRAME_BYTES) -> list[str]:
    """``parts`` joined into as few frames as possible, each at most ``limit`` bytes, in
    order. A part above ``limit`` gets a frame of its own (callers bound their parts, so
    this only happens to a caller's mistake, which a test then sees)."""
    frames: list[str] = []
    current: list[str] = []
    used = 0
    for part in parts:
        n = size(part)
        if current and used + n > limit:
            frames.append("".join(current))
            current, used = [], 0
        current.append(part)
        used += n
    if current:
        frames.append("".join(current))
    return frames


def text_pieces(text: str, offset: int = 0) -> list[tuple[int, str]]:
    """A long text as ``(offset, piece)`` pairs small enough for one frame each."""
    if len(text) <= TEXT_CHARS:
        return [(offset, text)]
    return [(offset + i, text[i : i + TEXT_CHARS]) for i in range(0, len(text), TEXT_CHARS)]
