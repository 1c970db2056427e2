"""What every agent format reads into: records, a tree of entries, routes, usage, context.

Claude Code and Codex write their own JSONL files. The engine does not pretend they are Pi
files: each format module reads its lines into `Record`s (every kept line, with its 1-based line
number and its byte span in the file, so the original text is never re-serialized) and then
decides, by that format's reading rules, which records are *tree entries* (the conversation),
which parent each one has, what Pi-shaped messages it contributes and which usage it carries.
Everything downstream (leaves, routes, `pisession` output, pages) reads this one shape.

Records that are not tree entries (metadata, structural links, telemetry events, unknown
types) stay in `ForeignSession.records`: kept and shown, never dropped.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from explorer.session import jsonfmt

__all__ = [
    "USAGE_KEYS",
    "ForeignSession",
    "Line",
    "Record",
    "RecordKind",
    "Source",
    "add_usage",
    "empty_usage",
    "iso_ms",
    "split_lines",
]

RecordKind = Literal["conversation", "structural", "metadata", "event", "duplicate", "unknown"]
"""`conversation`: a tree entry. `structural`: a chain record that links but is not shown
(Claude Code `attachment`/`progress`/unknown types with a uuid). `metadata`: a record about
the session (titles, snapshots, Codex `session_meta`/`turn_context`). `event`: Codex
`event_msg` lines. `duplicate`: a later copy of an id already read (the first one wins).
`unknown`: a record type the reader does not know (kept as is)."""

USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite")


def empty_usage() -> dict[str, int]:
    """Provider usage in Pi's key names; `input` excludes cache reads and writes."""
    return dict.fromkeys(USAGE_KEYS, 0)


def add_usage(total: dict[str, int], part: dict[str, int]) -> None:
    for key in USAGE_KEYS:
        total[key] += part.get(key, 0)


def as_count(value: Any) -> int:
    """A token count from a record: a finite number (as an integer), else 0 (never fails).
    Values are taken as written, as the reading rules do; nothing is clamped."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return 0
    return int(value)


def iso_ms(value: Any) -> int | None:
    """Milliseconds of an ISO-8601 timestamp (Pi messages carry ms), None when unreadable."""
    ms = jsonfmt.date_parse(value)
    return None if ms != ms else int(ms)


@dataclass(slots=True)
class Line:
    """One physical line that parsed as a JSON object."""

    number: int
    start: int
    end: int
    value: dict[str, Any]


@dataclass(slots=True)
class Source:
    """Where the bytes are: a path (re-read on demand) or the bytes themselves."""

    path: str | None
    data: bytes | None = None

    def read(self, start: int, end: int) -> bytes:
        if self.data is not None:
            return self.data[start:end]
        assert self.path is not None
        with open(self.path, "rb") as fh:
            fh.seek(start)
            return fh.read(end - start)


@dataclass(slots=True)
class Skipped:
    """A line the reading rules skip (R1 / X1), reported by `validate`."""

    line: int
    reason: str
    excerpt: str


def split_lines(data: bytes) -> tuple[list[Line], list[Skipped], bool]:
    """Split on `\\n` and parse each line: (object lines, skipped lines, last line truncated).

    Blank lines are skipped silently; invalid JSON and non-objects are skipped and reported.
    Parsing is per line, so one damaged line never costs the rest of the file.
    """
    lines: list[Line] = []
    skipped: list[Skipped] = []
    pos = 0
    number = 0
    size = len(data)
    truncated_last = False
    loads = orjson.loads
    while pos < size:
        nl = data.find(b"\n", pos)
        end = size if nl < 0 else nl
        number += 1
        raw = data[pos:end]
        if raw.strip():
            try:
                value = loads(raw)
            except orjson.JSONDecodeError:
                value = _lenient(raw)
            if value is _BAD:
                last = nl < 0 or not data[nl + 1 :].strip()
                truncated_last = truncated_last or last
                skipped.append(
                    Skipped(
                        number,
                        "truncated last line" if last else "not valid JSON",
                        _excerpt(raw),
                    )
                )
            elif type(value) is dict:
                lines.append(Line(number, pos, end, value))
            else:
                skipped.append(Skipped(number, "not a JSON object", _excerpt(raw)))
        pos = end + 1
    return lines, skipped, truncated_last


_BAD: Any = object()


def _lenient(raw: bytes) -> Any:
    """What orjson refuses but JSON allows (huge integers, lone surrogates), else `_BAD`."""
    try:
        return jsonfmt.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return _BAD


def _excerpt(raw: bytes, limit: int = 80) -> str:
    text = raw[: limit * 4].decode("utf-8", "replace")
    return text if len(text) <= limit else text[:limit] + "…"


@dataclass(slots=True)
class Record:
    """One kept line of a foreign session file, in the engine's terms.

    `entry` is set for tree entries only: a Pi-shaped entry dict (`type`, `id`, `parentId`,
    `timestamp` and, for messages, `message`) whose `parentId` is the tree parent. `messages`
    are the Pi-shaped messages the record puts in the model's context when it is on a route
    (several for a Claude Code user record holding several tool results, none for a record
    the model never sees).
    """

    id: str
    line: int
    start: int
    end: int
    value: dict[str, Any]
    record_type: str
    kind: RecordKind
    parent: str | None = None
    entry: dict[str, Any] | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int] | None = None
    """Usage this record carries by the format's rules (before any per-route grouping)."""


@dataclass
class Problem:
    line: int
    severity: Literal["error", "warning"]
    code: str
    message: str
    entry_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "severity": self.severity,
            "code": self.code,
            "message": self.message,
            "entryId": self.entry_id,
        }


@dataclass
class ForeignSession:
    """A Claude Code or Codex session read by its format's rules (no Django, no writes)."""

    format: str
    source: Source
    size: int
    records: list[Record]
    session_id: str | None = None
    cwd: str | None = None
    title: str | None = None
    created: str | None = None
    problems: list[Problem] = field(default_factory=list)
    links: dict[str, Any] = field(default_factory=dict)
    """Cross-file links: Claude Code sub-agents (`subagents` of a main file, `parent` of an
    agent file), Codex forks and spawns (`forkedFrom`, `spawnedBy`)."""
    current_leaf: str | None = None
    unattributed_usage: dict[str, int] = field(default_factory=empty_usage)
    """Usage reported before any tree entry existed (Codex token counts with no tip)."""
    _by_id: dict[str, Record] = field(default_factory=dict, repr=False)
    _children: dict[str | None, list[str]] = field(default_factory=dict, repr=False)

    # -- built by the format modules ------------------------------------------------------

    def index(self) -> None:
        """Index tree entries by id and children by parent (file order)."""
        self._by_id = {r.id: r for r in self.records if r.kind == "conversation"}
        children: dict[str | None, list[str]] = {}
        for r in self.records:
            if r.kind == "conversation":
                children.setdefault(r.parent, []).append(r.id)
        self._children = children

    # -- queries --------------------------------------------------------------------------

    @property
    def path(self) -> str | None:
        return self.source.path

    def entries(self) -> list[Record]:
        """The tree entries in file order."""
        return [r for r in self.records if r.kind == "conversation"]

    def get(self, entry_id: str) -> Record | None:
        return self._by_id.get(entry_id)

    def children(self, entry_id: str | None) -> list[str]:
        return self._children.get(entry_id, [])

    def leaves(self) -> list[str]:
        """Tree entries without children, in file order."""
        return [r.id for r in self.entries() if not self._children.get(r.id)]

    def route(self, leaf: str) -> list[Record]:
        """The entries from the root to `leaf` (inclusive)."""
        out: list[Record] = []
        node = self._by_id.get(leaf)
        seen: set[str] = set()
        while node is not None and node.id not in seen:
            seen.add(node.id)
            out.append(node)
            node = self._by_id.get(node.parent) if node.parent is not None else None
        out.reverse()
        return out

    def compactions(self, leaf: str) -> int:
        return sum(1 for r in self.route(leaf) if r.entry and r.entry["type"] == "compaction")

    def usage_parts(self, leaf: str) -> list[tuple[str, str, dict[str, int]]]:
        """(provider, model, usage) of each response counted on the route (format rules)."""
        raise NotImplementedError

    def route_usage(self, leaf: str) -> dict[str, int]:
        """The route's provider usage, each response counted once."""
        total = empty_usage()
        for _provider, _model, usage in self.usage_parts(leaf):
            add_usage(total, usage)
        return total

    def context(self, leaf: str) -> list[tuple[str, dict[str, Any]]]:
        """What the model saw at `leaf`: (source entry id, Pi-shaped message) in order."""
        raise NotImplementedError

    def context_source(self) -> str:
        """Where the projection comes from: "derived" (rules applied to the records) or
        "recorded" (the file states the context, e.g. Codex replacement history)."""
        return "derived"

    def raw(self, record: Record) -> bytes:
        """The record's original line, byte for byte (without the newline)."""
        return self.source.read(record.start, record.end)

    def iter_raw(self) -> Iterator[tuple[Record, bytes]]:
        for record in self.records:
            yield record, self.raw(record)

    def original_bytes(self) -> bytes:
        """The whole file as read (export is byte-identical: nothing is re-serialized)."""
        if self.source.data is not None:
            return self.source.data
        assert self.source.path is not None
        with open(self.source.path, "rb") as fh:
            return fh.read()

    def file_name(self) -> str:
        return os.path.basename(self.source.path) if self.source.path else "<bytes>"
