"""A short name for the code that is running, for cache keys.

Cached figures and fragments are keyed by a session's content, not by the code that made
them: after an upgrade, a session that did not change would be shown with what the old code
computed (a Compare page listing its difference the old way, a figure computed before a fix)
until its next append. Keys prefixed with this fingerprint leave the old values unread
(they expire on their own); every process running the same code shares the same keys.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

SOURCES = ("explorer/**/*.py", "sessions_site/**/*.py", "templates/**/*.html")


def code_fingerprint(root: Path, patterns: Iterable[str] = SOURCES) -> str:
    """Twelve hex digits naming the contents (and names) of the source files under ``root``
    that shape what is cached: a change to any of them gives another fingerprint."""
    digest = hashlib.blake2b(digest_size=6)
    files = sorted({p for pattern in patterns for p in root.glob(pattern) if p.is_file()})
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()
