"""Finding secrets in text and in Pi session entries.

`scan_text` works on one string; `scan_entry` walks every string of an entry (whatever its
type, so new entry types and extension data are covered without code changes) and skips
only what must never change: provider signatures and encrypted reasoning (opaque bytes a
provider verifies), base64 image data, and the structural keys that hold the tree together
(ids, parent ids, types, timestamps). A finding never holds the secret itself: only where
it is, a masked preview and a keyed hash, so findings can be stored and shown safely.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import ahocorasick_rs

from explorer.session import jsonfmt

from .rules import (
    GENERIC_FLAG,
    PRIVATE_KEY_BODY,
    PRIVATE_KEY_FOOTER,
    PRIVATE_KEY_MAX,
    RULES,
    RULES_VERSION,
    Rule,
    looks_random,
    secretish_name,
)

__all__ = [
    "DEFAULT_FINGERPRINT_KEY",
    "Finding",
    "Match",
    "fingerprint",
    "iter_strings",
    "json_pointer",
    "placeholder",
    "LineFinding",
    "scan_bytes",
    "scan_entry",
    "scan_text",
]

DEFAULT_FINGERPRINT_KEY = b"session-explorer/secrets"

# Keys whose values are never scanned nor rewritten: the fields that hold the tree and the
# message structure together (outside free-form values, see FREE_FORM_KEYS). Everything
# else is scanned, descriptive fields too (``model``, ``provider``, ``customType``,
# ``mimeType``, ...): a file may carry a secret in any of them, and masking one there
# changes what a page shows, never how the session reads.
STRUCTURAL_KEYS = frozenset(
    {
        "id",
        "parentId",
        "targetId",
        "fromId",
        "firstKeptEntryId",
        "toolCallId",
        "type",
        "role",
        "timestamp",
        "version",
    }
)
# Values written by tools and extensions, not by the session format: inside them an "id" or
# a "type" is just data (a tool argument `{"id": "<key>"}` must be scanned), so the
# structural keys are only skipped outside them.
FREE_FORM_KEYS = frozenset({"arguments", "details", "data", "nestedCalls", "input"})
# Blocks whose `data` is binary or provider-encrypted: base64 images, and the redacted
# thinking blocks some providers return (their data is encrypted reasoning).
_OPAQUE_DATA_TYPES = frozenset(
    {"image", "base64", "image_url", "input_image", "redacted_thinking", "redactedThinking"}
)


@functools.lru_cache(maxsize=4096)
def _opaque_key(key: str) -> bool:
    """Provider-verified or encrypted payloads (`thinkingSignature`, `textSignature`,
    `thoughtSignature`, `encrypted_content`, `encryptedContent`, ...): changing one byte
    makes the provider reject the next request, and they hold no readable text."""
    low = key.lower()
    return "signature" in low or low.startswith("encrypted") or low == "redacted_thinking"


@dataclass(frozen=True, slots=True)
class Match:
    """A secret inside one string: `text[start:end]` is the secret (code point offsets)."""

    kind: str
    start: int
    end: int
    prefix: str = ""
    """The public, fixed vendor prefix at the start of the secret ("" when there is none)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """A secret inside an entry, safe to store: no secret, only where and a keyed hash.

    `path` is a JSON Pointer (RFC 6901) to the string inside the entry; `start`/`end` are
    code point offsets in that string. `fingerprint` is the same for the same secret found
    again (another entry, another rescan), so statuses such as "rotated" follow the secret.
    """

    kind: str
    path: str
    start: int
    end: int
    preview: str
    fingerprint: str
    rules_version: str = RULES_VERSION

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": self.path,
            "start": self.start,
            "end": self.end,
            "preview": self.preview,
            "fingerprint": self.fingerprint,
            "rulesVersion": self.rules_version,
        }


def placeholder(kind: str) -> str:
    """What replaces a secret everywhere it is shown."""
    return f"[REDACTED:{kind}]"


def fingerprint(secret: str, key: bytes = DEFAULT_FINGERPRINT_KEY) -> str:
    """A keyed BLAKE2b hash of the secret. The web app should pass a site key so that a
    stolen database does not let anyone test guesses of short passwords offline."""
    return hashlib.blake2b(
        secret.encode("utf-8", "surrogatepass"), key=key[:64], digest_size=16
    ).hexdigest()


def json_pointer(path: tuple[str | int, ...]) -> str:
    """RFC 6901 pointer for a path of keys and indices ("" is the entry itself)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _prefix_of(rule: Rule, m: Any) -> str:
    if rule.group != 0:
        return ""
    groups = m.groupdict()
    for name in ("pre", "pre2", "pre3"):
        if groups.get(name):
            return groups[name]
    return ""


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _lowered(text: str) -> str:
    """Lower-cased text with the same length, so offsets found in it are offsets in `text`
    (`str.lower` can lengthen some non-ASCII letters; the keywords are ASCII anyway)."""
    low = text.lower()
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


_KEYWORD_LIST: list[str] = sorted({k for rule in RULES for k in rule.keywords})
assert all(k == k.lower() for k in _KEYWORD_LIST), "keywords are matched in lower-cased text"
_KEYWORD_RULES: list[tuple[int, ...]] = [
    tuple(r for r, rule in enumerate(RULES) if k in rule.keywords) for k in _KEYWORD_LIST
]
_KEYWORDS = ahocorasick_rs.AhoCorasick(_KEYWORD_LIST, matchkind=ahocorasick_rs.MatchKind.Standard)
_SURROGATE = re.compile("[\ud800-\udfff]")
_GENERIC = next(r for r, rule in enumerate(RULES) if rule.kind == "generic-secret")


_KEYWORD_SPAN = 1 << 16  # characters lower-cased at once
_KEYWORD_OVERLAP = max(len(k) for k in _KEYWORD_LIST) - 1


def _keyword_hits(text: str) -> list[tuple[int, int, int]]:
    """(keyword index, start, end) of every keyword occurrence in ``text``, case-insensitive.

    Lower-cased a span at a time: ``str.lower`` of a non-ASCII string works in a buffer of
    12 bytes per character, so a multi-MB tool result lowered whole briefly cost 15 times its
    size (the biggest share of a big import's peak memory). Spans overlap by the longest
    keyword less one character and each keeps the occurrences that start in its own part,
    so every occurrence is found once. The keywords are ASCII and lower-casing is per
    character for them, so where a span is cut changes nothing.
    """
    if len(text) <= _KEYWORD_SPAN:
        return _span_hits(text)
    found: list[tuple[int, int, int]] = []
    for base in range(0, len(text), _KEYWORD_SPAN):
        piece = text[base : base + _KEYWORD_SPAN + _KEYWORD_OVERLAP]
        found.extend(
            (index, start + base, end + base)
            for index, start, end in _span_hits(piece)
            if start < _KEYWORD_SPAN
        )
    return found


def _span_hits(text: str) -> list[tuple[int, int, int]]:
    lower = _lowered(text)
    try:
        return _KEYWORDS.find_matches_as_indexes(lower, overlapping=True)
    except UnicodeEncodeError:  # a lone surrogate (from a "\ud800" escape): same length
        return _KEYWORDS.find_matches_as_indexes(_SURROGATE.sub("\ufffd", lower), overlapping=True)


def _generic(rule: Rule, text: str, hits: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """`hits`: (start, end) of each keyword occurrence, from the keyword automaton."""
    seen: set[int] = set()
    for i, after in hits:
        name_start = i
        while name_start > 0 and i - name_start < 60 and text[name_start - 1] in _NAME_CHARS:
            name_start -= 1
        m = rule.pattern.match(text, after)
        if m is None and text.startswith("--", name_start):
            m = GENERIC_FLAG.match(text, after)
        if m is None or m.start("val") in seen:
            continue
        start, end = m.span("val")
        if secretish_name(text[name_start : m.end("tail")]) and looks_random(text[start:end]):
            seen.add(start)
            yield start, end


def _trim_key_body(chunk: str) -> str:
    """Drop trailing whitespace and escaped newlines: they belong to what follows."""
    while True:
        trimmed = chunk.rstrip()
        if trimmed.endswith(("\\n", "\\r")):
            trimmed = trimmed[:-2]
        if trimmed == chunk:
            return chunk
        chunk = trimmed


def _private_keys(rule: Rule, text: str) -> Iterator[tuple[int, int, str]]:
    """Key blocks: from a header to its footer, or through the key lines that follow when
    the footer is missing; never past the next header."""
    headers = list(rule.pattern.finditer(text))
    for i, header in enumerate(headers):
        limit = min(
            header.end() + PRIVATE_KEY_MAX,
            headers[i + 1].start() if i + 1 < len(headers) else len(text),
        )
        at = text.find("-----END", header.end(), limit)
        footer = PRIVATE_KEY_FOOTER.match(text, at, limit) if at >= 0 else None
        if footer is not None:
            yield header.start(), footer.end(), header.group("pre")
            continue
        body = PRIVATE_KEY_BODY.match(text, header.end(), limit)
        if body is None:
            continue
        chunk = _trim_key_body(body.group())
        end = body.start() + len(chunk)
        if sum(c.isalnum() for c in chunk) >= 32:
            yield header.start(), end, header.group("pre")


def _without_overlaps(candidates: list[tuple[int, int, int, int, Match]]) -> list[Match]:
    """Best first (priority, then length, then position); a candidate overlapping one
    already kept is dropped. Kept spans stay sorted, so each test is a bisection."""
    candidates.sort(key=lambda c: c[:3])
    starts: list[int] = []
    kept: list[Match] = []
    for _, _, start, end, match in candidates:
        i = bisect.bisect_left(starts, start)
        if i > 0 and kept[i - 1].end > start:
            continue
        if i < len(kept) and kept[i].start < end:
            continue
        starts.insert(i, start)
        kept.insert(i, match)
    return kept


def scan_text(text: str) -> list[Match]:
    """All secrets in `text`, in order, without overlaps (a vendor rule beats the generic
    entropy rule; a longer match beats a shorter one)."""
    if len(text) < 8:
        return []
    # one pass finds every keyword of every rule; a rule runs only if one of its own occurs
    found = _keyword_hits(text)
    if not found:
        return []
    triggered = bytearray(len(RULES))
    generic_hits: list[tuple[int, int]] = []
    for index, start, end in found:
        for r in _KEYWORD_RULES[index]:
            triggered[r] = 1
            if r == _GENERIC:
                generic_hits.append((start, end))
    candidates: list[tuple[int, int, int, int, Match]] = []
    for r, rule in enumerate(RULES):
        if not triggered[r]:
            continue
        if r == _GENERIC:
            generic_hits.sort()
            for start, end in _generic(rule, text, generic_hits):
                candidates.append(
                    (-rule.priority, start - end, start, end, Match(rule.kind, start, end))
                )
            continue
        if rule.kind == "private-key":
            for start, end, pre in _private_keys(rule, text):
                candidates.append(
                    (-rule.priority, start - end, start, end, Match(rule.kind, start, end, pre))
                )
            continue
        for m in rule.pattern.finditer(text):
            start, end = m.span(rule.group)
            if start < 0 or end <= start:
                continue
            if rule.check is not None and not rule.check(text[start:end]):
                continue
            match = Match(rule.kind, start, end, _prefix_of(rule, m))
            candidates.append((-rule.priority, start - end, start, end, match))
    return _without_overlaps(candidates) if candidates else []


def _value_secret(key: str, value: str) -> list[Match]:
    """`{"api_key": "..."}` in structured data: the key name is the context the text rules
    would otherwise miss, so a random-looking value under a secret-ish key is a secret."""
    if not secretish_name(key):
        return []
    stripped = value.strip()
    start = value.find(stripped) if stripped else 0
    low = stripped.lower()
    for scheme in ("bearer ", "token ", "basic "):
        if low.startswith(scheme):
            rest = stripped[len(scheme) :].lstrip()
            start += len(stripped) - len(rest)
            stripped = rest
            break
    if looks_random(stripped):
        return [Match("generic-secret", start, start + len(stripped))]
    return []


def _is_base64_data_uri(value: str) -> bool:
    return value.startswith("data:") and ";base64," in value[:100]


_Link = tuple[Any, str | int] | None  # (parent link, key or index); None is the entry itself
_MIN_SECRET = 8  # no rule matches a shorter string


def _path_of(link: _Link) -> tuple[str | int, ...]:
    steps: list[str | int] = []
    while link is not None:
        link, step = link
        steps.append(step)
    return tuple(reversed(steps))


def _walk(entry: Any, min_len: int = 0) -> list[tuple[_Link, str | None, str]]:
    """The scannable strings of an entry in document order, each with a cheap link to its
    path (a path is only built for the few strings that hold a secret).

    Iterative so that deeply nested extension data cannot hit the recursion limit.
    """
    out: list[tuple[_Link, str | None, str]] = []
    stack: list[tuple[_Link, str | None, Any, bool]] = [(None, None, entry, False)]
    pop, push = stack.pop, stack.append
    while stack:
        link, key, value, free = pop()
        if isinstance(value, str):
            if len(value) >= min_len and not _is_base64_data_uri(value):
                out.append((link, key, value))
        elif isinstance(value, dict):
            kind = value.get("type")
            if not isinstance(kind, str):  # hostile or broken data: any JSON value
                kind = None
            skip_data = kind in _OPAQUE_DATA_TYPES
            # redacted thinking carries the provider's encrypted reasoning, not text
            skip_thinking = kind == "thinking" and value.get("redacted") is True
            for k in reversed(list(value)):
                v = value[k]
                if not isinstance(v, (str, dict, list)) or not isinstance(k, str):
                    continue
                if (not free and k in STRUCTURAL_KEYS) or _opaque_key(k):
                    continue
                if (skip_data and k == "data") or (skip_thinking and k == "thinking"):
                    continue
                push(((link, k), k, v, free or k in FREE_FORM_KEYS))
        elif isinstance(value, list):
            for i in range(len(value) - 1, -1, -1):
                v = value[i]
                if isinstance(v, (str, dict, list)):
                    push(((link, i), None, v, free))
    return out


def iter_strings(entry: Any) -> Iterator[tuple[tuple[str | int, ...], str | None, str]]:
    """Every scannable string of an entry, in document order: (path, parent key or None,
    string). Signatures, encrypted reasoning, image data, data URIs and structural keys are
    left out: they are never scanned and never changed."""
    for link, key, value in _walk(entry):
        yield _path_of(link), key, value


def _string_matches(key: str | None, value: str) -> list[Match]:
    matches = scan_text(value)
    if key is not None and not matches:
        matches = _value_secret(key, value)
    return matches


def scan_entry(entry: Any, *, key: bytes = DEFAULT_FINGERPRINT_KEY) -> list[Finding]:
    """Every secret in one Pi entry (any type), in document order.

    `key` keys the fingerprints (see `fingerprint`); use the same key for every scan of a
    site so that findings match up across rescans.
    """
    findings: list[Finding] = []
    for link, parent_key, value in _walk(entry, _MIN_SECRET):
        for m in _string_matches(parent_key, value):
            secret = value[m.start : m.end]
            findings.append(
                Finding(
                    kind=m.kind,
                    path=json_pointer(_path_of(link)),
                    start=m.start,
                    end=m.end,
                    preview=(m.prefix + "…" if m.prefix else "") + placeholder(m.kind),
                    fingerprint=fingerprint(secret, key),
                )
            )
    return findings


@dataclass(frozen=True, slots=True)
class LineFinding:
    """A finding in a session file: its 1-based line number (as validation reports count
    lines) and the entry id when the line is an entry with a string id."""

    line: int
    entry_id: str | None
    finding: Finding


def scan_bytes(data: bytes, *, key: bytes = DEFAULT_FINGERPRINT_KEY) -> list[LineFinding]:
    """Every secret in a session file, line by line, for an import or a findings panel.

    Lines Pi skips (not JSON) are scanned as text: their findings have the path "" and
    offsets in the decoded line.
    """
    out: list[LineFinding] = []
    for number, raw in enumerate(data.split(b"\n"), 1):
        if not raw.strip():
            continue
        text = raw.decode("utf-8", "replace")
        try:
            value: Any = jsonfmt.loads(text)
        except ValueError:
            value = text.rstrip("\r")
        entry_id = value.get("id") if isinstance(value, dict) else None
        for finding in scan_entry(value, key=key):
            out.append(
                LineFinding(number, entry_id if isinstance(entry_id, str) else None, finding)
            )
    return out
