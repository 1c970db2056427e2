"""Secrets in sessions: find them, fingerprint them, mask them. Pure Python, no Django.

Agent transcripts collect credentials: keys pasted into prompts, `.env` files read by a
tool, tokens echoed by `curl -v`. This package finds them in any Pi entry and masks them
while the raw session stays as it was.

API
---
- `scan_text(text) -> list[Match]`: secrets in one string (kind, start, end).
- `scan_entry(entry, key=...) -> list[Finding]`: secrets in every string of an entry (any
  type), each with a JSON Pointer path, offsets, a masked preview and a keyed fingerprint;
  never the secret itself. `scan_bytes(data)` does a whole file with line numbers and
  entry ids. Provider signatures, encrypted reasoning, base64 image data and
  the structural keys (ids, parent ids, types, timestamps) are never scanned or changed.
- `mask_text(text, findings)`, `redact_entry(entry)`, `redact_line(raw_line)`,
  `redact_bytes(data)`: each secret becomes `[REDACTED:kind]` (except the fingerprints in
  `allow`); redacted lines are still a valid Pi session (same ids, parents, types and key
  order; untouched lines byte-identical).
- `redact_for_search(text)`: the text to index, so no query matches inside a secret.
- `RULES_VERSION`: stored with every finding.
- `python -m explorer.secrets scan|redact FILE`: the same from the command line.

How the web app should integrate it
-----------------------------------
1. **Scan at import and on every append.** Wherever an entry enters the store (file
   import, follow/live tail, editor appends), call `scan_entry(entry, key=site_key)` and
   store each `Finding` with the session, entry id and the file line number; `site_key` is
   derived from the Django `SECRET_KEY` (e.g. an HMAC of a fixed label), so fingerprints are
   stable across rescans but useless to a reader of the database.
2. **Rules version.** Store `finding.rules_version`; when a session's stored version differs
   from `RULES_VERSION`, rescan it (a background task at startup is enough) and match old and
   new findings by (entry id, path, fingerprint) so statuses (open / false positive /
   rotated) survive.
3. **Mask in one place.** The single function that turns an entry into what a page, partial,
   live frame, JSON response or HTML export shows should call `redact_entry(entry,
   allow=..., key=site_key)`, where `allow` holds the fingerprints of the findings marked
   "false positive" (and of a finding the viewer has just revealed); search indexes
   `redact_for_search(text)`.
4. **Downloads.** Admins get the raw bytes; viewers and editors get `redact_bytes(raw)`,
   which validates and opens like the original.
5. **Reveal is audited.** Showing one finding in clear (admin, or editor when allowed)
   records who revealed which finding when, then calls `reveal(entry, finding,
   key=site_key)`: it re-reads the string at `finding.path` and returns the secret only if
   its fingerprint still matches (None for a stale finding).

Known limits
------------
- Object keys are not scanned (masking a key could merge two keys); only string values.
- A value under any key containing "signature" or starting with "encrypted" is skipped,
  wherever it is: those are provider data that must stay byte-identical.
- A secret split over two strings (two content blocks) is not found.
- Version 1 files have no ids: Pi (and `SessionManager.load_readonly`) assign them when
  loading, from the file's content, so store findings under the ids the importer assigned
  to the raw file; the redacted download gets other ids when it is opened.
"""

from __future__ import annotations

from .redact import (
    mask_text,
    redact_bytes,
    redact_entry,
    redact_for_search,
    redact_line,
    resolve_pointer,
    reveal,
)
from .rules import RULES, RULES_VERSION, Rule
from .scanner import (
    DEFAULT_FINGERPRINT_KEY,
    Finding,
    LineFinding,
    Match,
    fingerprint,
    json_pointer,
    placeholder,
    scan_bytes,
    scan_entry,
    scan_text,
)

__all__ = [
    "DEFAULT_FINGERPRINT_KEY",
    "RULES",
    "RULES_VERSION",
    "Finding",
    "LineFinding",
    "Match",
    "Rule",
    "fingerprint",
    "json_pointer",
    "mask_text",
    "placeholder",
    "redact_bytes",
    "redact_entry",
    "redact_for_search",
    "redact_line",
    "resolve_pointer",
    "reveal",
    "scan_bytes",
    "scan_entry",
    "scan_text",
]
