"""Two routes of one session compared: common ancestor, per-route figures, projection diff."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

import orjson

from explorer.analysis.recorded import projection_of
from explorer.session import exactsum
from explorer.session.describe import (
    compact_json,
    cost_of,
    file_uses,
    files_of_uses,
    message_preview,
    tokens_of,
    tool_calls_of,
    total_tokens_of,
)
from explorer.session.tokens import OmittedMessage, estimate_tokens

# --- comparing routes --------------------------------------------------------------------


def common_ancestor_index(path_a: Sequence[str], path_b: Sequence[str]) -> int:
    """Index of the last shared entry of two root-first id paths (-1: different roots)."""
    k = -1
    for x, y in zip(path_a, path_b, strict=False):
        if x != y:
            break
        k += 1
    return k


@dataclass
class RouteStats:
    entries: int
    messages: int
    tokens: float  # provider-reported tokens (all requests on the route)
    cost: float
    tool_calls: int
    files_read: list[str]
    files_modified: list[str]


def route_stats(entries: Sequence[dict]) -> RouteStats:
    """:class:`RouteStats` of parsed entries in route order, added up entry by entry (the
    reference the Compare tab's stored figures are tested against)."""
    files = files_of_uses(u for e in entries for u in file_uses(e))
    return RouteStats(
        entries=len(entries),
        messages=sum(1 for e in entries if e.get("type") == "message"),
        tokens=sum((total_tokens_of(e) for e in entries), 0.0),
        # Exactly summed, rounded once: the figure whatever order it is added in (Compare
        # reads it as the difference of two stored exact route sums).
        cost=exactsum.total(cost_of(e) for e in entries),
        tool_calls=sum(len(tool_calls_of(e)) for e in entries),
        files_read=files["read"],
        files_modified=files["modified"],
    )


@dataclass
class ProjectionDiffRow:
    side: str  # "both" | "a" | "b"
    source_id: str
    role: str
    text: str
    tokens: int
    # A shared message that comes from different entries on the two routes (equal content:
    # say, the checkpoints of two compactions with the same system prompt): B's entry.
    source_b: str = ""


def _signature(message: Any) -> bytes:
    """What tells two messages apart, for matching the routes' contexts: a digest of the
    message's JSON (kept per route, so the messages themselves need not be). Only equality
    matters, so orjson's encoding serves (twenty times quicker than the byte-exact encoder
    the files need); what orjson refuses (keys that are not strings, integers beyond 64
    bits, lone surrogates) takes the exact encoder, marked so no orjson output can equal
    it."""
    try:
        encoded = orjson.dumps(message)
    except TypeError:
        encoded = b"\x00" + compact_json(message).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(encoded, digest_size=16).digest()


def _shape(value: Any) -> Any:
    """A hashable stand-in for ``value`` that costs its structure, not its text: each string
    is its length and its first and last 16 characters. Two messages with equal
    :func:`_signature` have equal shapes (equal encodings are equal strings, dicts with
    the same keys in the same order, lists of the same length; every non-finite float
    encodes as ``null``, as None does), so the shape can hash a message for matching while
    :func:`_signature` alone decides equality. A parsed line's own types are told apart
    by their exact type first: a context's messages are tens of thousands of values."""
    kind = type(value)
    if kind is str:
        return (len(value), value[:16], value[-16:])
    if kind is dict:
        return tuple([(_shape(k), _shape(v)) for k, v in value.items()])
    if kind is list:
        return tuple([_shape(v) for v in value])
    if kind is int or value is None or kind is bool:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return (len(value), value[:16], value[-16:])
    if isinstance(value, dict):
        return tuple((_shape(k), _shape(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(_shape(v) for v in value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    try:
        hash(value)
    except TypeError:
        return type(value).__name__
    return value


class MessageKey:
    """What tells two messages apart when matching the routes' contexts, computed lazily.

    Equal exactly when the messages' :func:`_signature` are equal, as the digests compared
    before, but the digest of a multi-MB tool result is made only when two distinct
    objects with the same shape are compared: both routes' shared messages are the same
    parsed objects (one read of both live ranges), so they match without encoding or
    hashing a byte of their text, where each was serialized and hashed once per route.
    """

    __slots__ = ("_digest", "_hash", "message")

    def __init__(self, message: Any) -> None:
        self.message = message
        try:
            self._hash = hash(_shape(message))
        except RecursionError:  # nested beyond Python's stack: the digest alone decides
            self._hash = 0
        self._digest: bytes | None = None

    def digest(self) -> bytes:
        if self._digest is None:
            self._digest = _signature(self.message)
        return self._digest

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageKey):
            return NotImplemented
        if self.message is other.message:
            return True
        if isinstance(self.message, OmittedMessage) or isinstance(other.message, OmittedMessage):
            return False
        return self._hash == other._hash and self.digest() == other.digest()


# (source id, role, preview, tokens, key) of one message the model sees.
ProjectedRow = tuple[str, str, str, int, MessageKey]


def projected_rows(path: Sequence[dict], projection: Any = None) -> list[ProjectedRow]:
    """Each message the model sees on ``path`` (its projection, if already made), in order."""
    if projection is None:
        projection = projection_of(path)
    out = []
    for pe in projection.entries:
        for m in pe.messages:
            role = m.get("role", "") if isinstance(m, dict) else ""
            source = str(pe.source_entry.get("id", ""))
            if isinstance(m, OmittedMessage):
                out.append((source, role, "", m.tokens, MessageKey(m)))
                continue
            out.append((source, role, message_preview(m), tokens_of([m]), MessageKey(m)))
    return out


def diff_rows(ra: Sequence[ProjectedRow], rb: Sequence[ProjectedRow]) -> list[ProjectionDiffRow]:
    """Two contexts' :func:`projected_rows` aligned in model order (:func:`projection_diff`)."""
    return checked_diff_rows(ra, rb)[0]


def checked_diff_rows(
    ra: Sequence[ProjectedRow], rb: Sequence[ProjectedRow]
) -> tuple[list[ProjectionDiffRow], bool]:
    """:func:`diff_rows`, and whether an :class:`OmittedMessage` was matched where its
    content could decide (:func:`_undecided`): then the caller must read the real message
    and align again. Otherwise the rows are the real messages' but for the omitted ones'
    text, which is empty."""
    keys_a = [(r[0], r[4]) for r in ra]
    keys_b = [(r[0], r[4]) for r in rb]
    out: list[ProjectionDiffRow] = []
    undecided = False
    matcher = SequenceMatcher(None, keys_a, keys_b, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.extend(ProjectionDiffRow("both", *r[:4]) for r in ra[i1:i2])
            continue
        undecided = undecided or _undecided(ra[i1:i2], rb[j1:j2])
        out.extend(_same_content(ra[i1:i2], rb[j1:j2]))
    return out, undecided


def _undecided(ra: Sequence[ProjectedRow], rb: Sequence[ProjectedRow]) -> bool:
    """Whether an omitted message of one unaligned stretch might equal, by content, a
    message of the other stretch other than itself (:func:`_same_content` matches by
    content alone). Equal content means the same role, and for a user or tool-result
    message an equal estimate unless one of the two estimates is not finite: equal
    encodings differ at most by a non-finite float where the other has null, which the
    estimate counts alike (both falsy) or makes NaN (infinity's length). An omitted
    message's estimate is finite, so a message of the same role whose estimate is finite
    and different, or an omitted one whose estimate differs, cannot equal it; anything
    else might."""
    for xs, ys in ((ra, rb), (rb, ra)):
        omitted = [(x[1], x[4].message) for x in xs if _omitted(x)]
        if not omitted:
            continue
        # The other side by role: its real messages' estimates (None: one not finite), and
        # its omitted messages by estimate. Each estimated once, not once per omitted one.
        real: dict[Any, set[float] | None] = {}
        stood: dict[tuple[Any, int], list[OmittedMessage]] = {}
        for y in ys:
            n = y[4].message if isinstance(y[4], MessageKey) else None
            if isinstance(n, OmittedMessage):
                stood.setdefault((y[1], n.tokens), []).append(n)
                continue
            seen = real.setdefault(y[1], set())
            if seen is not None:
                estimate = estimate_tokens(n)
                if math.isfinite(estimate):
                    seen.add(estimate)
                else:
                    real[y[1]] = None
        for role, m in omitted:
            if role in real and (real[role] is None or m.tokens in real[role]):  # type: ignore[operator]
                return True
            if any(n is not m for n in stood.get((role, m.tokens), ())):
                return True
    return False


def _omitted(row: ProjectedRow) -> bool:
    return isinstance(row[4], MessageKey) and isinstance(row[4].message, OmittedMessage)


def _same_content(
    ra: Sequence[ProjectedRow], rb: Sequence[ProjectedRow]
) -> list[ProjectionDiffRow]:
    """A stretch the source entries do not align, aligned again by content alone: a message
    both models get word for word from different entries is shared (and says so, with B's
    entry), the rest is one side's. Two routes whose contexts began with the same system
    prompt, each from its own compaction's checkpoint, once shared nothing."""
    out: list[ProjectionDiffRow] = []
    matcher = SequenceMatcher(None, [r[4] for r in ra], [r[4] for r in rb], autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            out.extend(
                ProjectionDiffRow("both", *a[:4], source_b=b[0])
                for a, b in zip(ra[i1:i2], rb[j1:j2], strict=True)
            )
            continue
        out.extend(ProjectionDiffRow("a", *r[:4]) for r in ra[i1:i2])
        out.extend(ProjectionDiffRow("b", *r[:4]) for r in rb[j1:j2])
    return out


def projection_diff(path_a: Sequence[dict], path_b: Sequence[dict]) -> list[ProjectionDiffRow]:
    """The two model contexts aligned in model order: shared messages once, then what differs.

    A message is shared when the same source entry gives the same message on both sides (an
    edit or a compaction on one route makes it differ). The alignment is a longest-common-
    subsequence match, so a message only one route has appears where it sits in that route's
    context rather than at the end.
    """
    return diff_rows(projected_rows(path_a), projected_rows(path_b))


def collapse_shared(rows: Sequence[ProjectionDiffRow]) -> list[dict[str, Any]]:
    """The aligned diff for reading: each run of shared messages becomes one counted line."""
    out: list[dict[str, Any]] = []
    for r in rows:
        by_content = bool(r.source_b)  # a run is of one kind: same entries, or same content
        if (
            r.side == "both"
            and out
            and out[-1]["side"] == "both"
            and bool(out[-1].get("last_b")) == by_content
        ):
            run = out[-1]
            run["count"] += 1
            run["tokens"] += r.tokens
            run["last_id"] = r.source_id
            if by_content:
                run["last_b"] = r.source_b
        elif r.side == "both":
            run = {"side": "both", "count": 1, "tokens": r.tokens, "first_id": r.source_id,
                   "last_id": r.source_id}  # fmt: skip
            if by_content:
                run.update(first_b=r.source_b, last_b=r.source_b)
            out.append(run)
        else:
            out.append(
                {"side": r.side, "source_id": r.source_id, "role": r.role, "text": r.text,
                 "tokens": r.tokens}
            )  # fmt: skip
    return out


def listed_lines(lines: Sequence[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """At most ``limit`` of the collapsed difference's ``lines`` to list, in their order, each
    with its 1-based line number ``n``: the newest lines of each side in turn (A only, B only,
    shared runs), so a long run of one side's messages cannot push the other side off the
    page (the last lines alone listed none of A's when B's 200 came after them)."""
    if len(lines) <= limit:
        return [{**line, "n": i + 1} for i, line in enumerate(lines)]
    by_side: dict[str, list[int]] = {"a": [], "b": [], "both": []}
    for i, line in enumerate(lines):
        by_side[line["side"]].append(i)
    kept: set[int] = set()
    while len(kept) < limit:
        took = False
        for side in ("a", "b", "both"):
            if by_side[side] and len(kept) < limit:
                kept.add(by_side[side].pop())
                took = True
        if not took:
            break
    return [{**lines[i], "n": i + 1} for i in sorted(kept)]
