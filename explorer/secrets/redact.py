"""Masking: secrets replaced by `[REDACTED:kind]` in text, entries, JSONL lines and files.

The redacted session must stay a valid Pi session: only string values change (never keys,
ids, parent ids, types, timestamps or signatures), the key order is kept, and a line
without a secret is returned byte for byte, so a redacted export differs from the raw
file exactly on the lines that held a secret.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from explorer.session import jsonfmt

from .scanner import (
    _MIN_SECRET,
    DEFAULT_FINGERPRINT_KEY,
    Finding,
    Match,
    _path_of,
    _string_matches,
    _walk,
    fingerprint,
    placeholder,
    scan_text,
)

__all__ = [
    "mask_text",
    "redact_bytes",
    "redact_entry",
    "redact_for_search",
    "redact_line",
    "resolve_pointer",
    "reveal",
]


def mask_text(text: str, findings: Iterable[Finding | Match]) -> str:
    """`text` with each finding's span replaced by its placeholder.

    The findings must belong to this one string (same path). Overlapping spans (possible
    only when findings come from different scans) are merged under the first one's kind,
    so no part of either secret stays in clear; spans outside the text are ignored.
    """
    spans = sorted((f.start, f.end, f.kind) for f in findings if 0 <= f.start < f.end <= len(text))
    if not spans:
        return text
    merged: list[list[Any]] = []
    for start, end, kind in spans:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, kind])
    parts: list[str] = []
    pos = 0
    for start, end, kind in merged:
        parts.append(text[pos:start])
        parts.append(placeholder(kind))
        pos = end
    parts.append(text[pos:])
    return "".join(parts)


def redact_for_search(text: str) -> str:
    """The text a search index should hold: every secret replaced, so that no query (a
    prefix, a fragment) can match inside a secret or reveal it in a snippet."""
    return mask_text(text, scan_text(text))


def _replace_at(root: Any, path: tuple[str | int, ...], new: str) -> Any:
    """`root` with the string at `path` replaced, copying only the containers on the way
    (dicts keep their key order) and sharing everything else."""
    if not path:
        return new
    head, rest = path[0], path[1:]
    copy: Any = dict(root) if isinstance(root, dict) else list(root)
    copy[head] = _replace_at(root[head], rest, new)
    return copy


def redact_entry(
    entry: Any,
    *,
    allow: Collection[str] = (),
    key: bytes = DEFAULT_FINGERPRINT_KEY,
) -> Any:
    """The entry with every secret masked; the very same object when it holds none.

    Containers along a changed path are copies; the input is never modified, so a caller
    can redact the manager's own entries for display without touching the session.
    `allow` holds fingerprints (made with `key`) left in clear: findings a team marked as
    false positives, or the one finding an admin chose to reveal.
    """
    changes: list[tuple[tuple[str | int, ...], str]] = []
    for link, parent_key, value in _walk(entry, _MIN_SECRET):
        matches = _string_matches(parent_key, value)
        if matches and allow:
            matches = [m for m in matches if fingerprint(value[m.start : m.end], key) not in allow]
        if matches:
            changes.append((_path_of(link), mask_text(value, matches)))
    result = entry
    for path, new in changes:
        result = _replace_at(result, path, new)
    return result


def _split_ending(raw: bytes) -> tuple[bytes, bytes]:
    body = raw.rstrip(b"\r\n")
    return body, raw[len(body) :]


def redact_line(
    raw_line: bytes,
    *,
    allow: Collection[str] = (),
    key: bytes = DEFAULT_FINGERPRINT_KEY,
) -> bytes:
    """One JSONL line with its secrets masked, still a valid line of a Pi session.

    A line without a secret comes back unchanged (same bytes). A changed JSON line is
    written the way Pi writes lines (`JSON.stringify`, same key order) and keeps its line
    ending. A line that is not JSON (Pi skips those) is masked as plain text: it may still
    hold a pasted key. `allow` and `key` as for `redact_entry`.
    """
    body, ending = _split_ending(raw_line)
    if not body.strip():
        return raw_line
    text = body.decode("utf-8", "replace")
    try:
        value = jsonfmt.loads(text)
    except ValueError:
        masked = redact_entry(text, allow=allow, key=key)
        return raw_line if masked == text else masked.encode("utf-8") + ending
    redacted = redact_entry(value, allow=allow, key=key)
    if redacted is value:
        return raw_line
    return jsonfmt.dumps(redacted).encode("utf-8", "surrogatepass") + ending


def redact_bytes(
    data: bytes,
    *,
    allow: Collection[str] = (),
    key: bytes = DEFAULT_FINGERPRINT_KEY,
) -> bytes:
    """A whole session file redacted line by line (the download for viewers and editors)."""
    # Pi splits on "\n" only (a lone "\r" is JSON whitespace), so must we
    lines = data.split(b"\n")
    out = [redact_line(line + b"\n", allow=allow, key=key) for line in lines[:-1]]
    if lines[-1]:
        out.append(redact_line(lines[-1], allow=allow, key=key))
    return b"".join(out)


def resolve_pointer(entry: Any, pointer: str) -> Any:
    """The value at an RFC 6901 pointer inside an entry (None when the path is gone)."""
    value = entry
    if not pointer:
        return value
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            if part not in value:
                return None
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def reveal(entry: Any, finding: Finding, *, key: bytes = DEFAULT_FINGERPRINT_KEY) -> str | None:
    """The secret of a stored finding, for an audited reveal; None when the entry no longer
    holds that secret at that place (changed, or rescanned with other rules), so a stale
    finding can never reveal something else."""
    text = resolve_pointer(entry, finding.path)
    if not isinstance(text, str) or not 0 <= finding.start < finding.end <= len(text):
        return None
    secret = text[finding.start : finding.end]
    return secret if fingerprint(secret, key) == finding.fingerprint else None
