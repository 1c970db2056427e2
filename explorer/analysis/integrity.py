"""Integrity: what in a session's tree cannot be trusted, and where.

The tree checks are the engine's own (``explorer.session.diagnostics.diagnose_tree``, the
same functions ``pisession validate`` runs on a file), grouped here into the panel's
sections; the page adds one check the engine does not make (tool results whose call is not
in the assistant message above them), which needs the raw lines and runs on request.
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from explorer.analysis.tool_pairs import MAX_STEPS, find_call
from explorer.session import jsonfmt
from explorer.session.diagnostics import Problem, diagnose_tree, index_ids
from explorer.session.gcpause import gc_paused

LIMIT = 200

SECTIONS = (
    (
        "dangling",
        "Dangling parents",
        "Entries whose parent id names no entry; they become extra roots.",
        {"dangling-parent"},
    ),
    (
        "cycles",
        "Cycles",
        "Parent links that loop; a path walk stops at the repetition.",
        {"parent-cycle"},
    ),
    (
        "compactions",
        "Compactions keeping an off-path entry",
        "firstKeptEntryId is not an ancestor: nothing before the compaction is kept.",
        {"first-kept-not-on-path"},
    ),
    (
        "edits",
        "Edits that cannot apply",
        "The edit has no effect (or hides a non-editable entry).",
        {
            "edit-unknown-target",
            "edit-off-path",
            "edit-not-editable",
            "edit-without-replacement",
            "edit-malformed-replacement",
        },
    ),
    (
        "labels",
        "Labels on missing entries",
        "The label names no entry of this session.",
        {"label-unknown-target"},
    ),
)


def tree_sections(entries: list[dict[str, Any]], numbers: list[int]) -> list[dict[str, Any]]:
    """The panel's sections: each the engine's findings of its codes (at most ``LIMIT``)."""
    return sections_of(diagnose_tree(entries, numbers))


def sections_of(problems: Sequence[Problem]) -> list[dict[str, Any]]:
    """The engine's tree findings grouped into the panel's sections (at most ``LIMIT`` each)."""
    out = []
    for key, title, help_text, codes in SECTIONS:
        items = [
            {"id": p.entry_id, "line": p.line, "code": p.code, "detail": p.message}
            for p in problems
            if p.code in codes
        ][:LIMIT]
        out.append({"key": key, "title": title, "help": help_text, "items": items})
    return out


_LINKING = ("context_edit", "compaction")


def _named(entry: dict[str, Any]) -> list[Any]:
    """The ids an entry names besides itself: its parent and the target of its kind."""
    kind = entry.get("type")
    names = [entry.get("parentId")]
    if kind in ("label", "context_edit"):
        names.append(entry.get("targetId"))
    elif kind == "compaction":
        names.append(entry.get("firstKeptEntryId"))
    return [n for n in names if jsonfmt.truthy(n) and jsonfmt.hashable(n)]


def _awaited(entries: Sequence[dict[str, Any]], index: Mapping[Any, int]) -> set[Any]:
    """The ids ``entries`` name (:func:`_named`) that ``index`` lacks.

    Most entries of a big session are plain messages whose parent is a string id or
    nothing: those are checked inline, and only the others go through :func:`_named`, so
    the first check of a 50,000-entry session is not spent on building their lists."""
    out: set[Any] = set()
    for e in entries:
        parent = e.get("parentId")
        if e.get("type") not in _NAMING and (parent is None or type(parent) is str):
            if parent and parent not in index:
                out.add(parent)
            continue
        out.update(n for n in _named(e) if n not in index)
    return out


_NAMING = ("label", "context_edit", "compaction")  # kinds that name a target besides a parent


class TreeFindings:
    """The engine's tree findings (``diagnose_tree``) over a session's stubs, kept with what
    checking appended entries against them needs, so the Integrity tab of a 50,000-entry
    session does not run every check over every entry again after each write.

    An appended entry changes no earlier finding unless an earlier entry was waiting for
    its id (a dangling parent, a missing target) or it repeats an id: then, and for
    anything else unusual (a parent appended later in the batch, lines out of order), the
    checks run again over everything. Otherwise the engine checks the new entries alone,
    together with the stubs they refer to (their parents; for edits and compactions the
    whole route above them, which their checks walk), and their findings are added. Tests
    hold the result equal to a fresh ``diagnose_tree`` over the whole session.

    A stored or shared copy unpickles its problems at once and the rest (the stubs, their
    line numbers, the id index, the awaited ids) only when it is extended: a cold reader of
    the Integrity tab needs the problems alone, and unpacking 50,000 stubs cost it more
    than the rest of the page.
    """

    __slots__ = ("problems", "last_line", "_state", "_packed")

    def __init__(
        self,
        entries: Sequence[dict[str, Any]],
        numbers: tuple[int, ...],
        problems: tuple[Problem, ...],
        index: Mapping[Any, int],
        awaited: frozenset[Any],
        last_line: int = 0,
    ) -> None:
        self.problems = problems
        self.last_line = last_line  # the highest line number checked
        # (stubs, numbers, id -> index of the last entry with it, ids named but absent)
        self._state: tuple[Any, ...] | None = (entries, numbers, index, awaited)
        self._packed: bytes | None = None

    def _full(self) -> tuple[Any, ...]:
        packed = self._packed  # read before the state: it is dropped only after the state is set
        state = self._state
        if state is None:  # unpacked once; a racing request unpacks an equal copy
            # Paused collector: the young collections triggered while 150,000 objects are
            # made would walk them again and again (half the unpickling's time, measured).
            with gc_paused():
                columns, numbers, awaited = pickle.loads(packed or b"")
            entries = _Stubs(columns)  # each stub made when a check looks at it
            state = (entries, numbers, _IdIndex(entries), awaited)
            self._state = state
            self._packed = None
        return state

    @property
    def entries(self) -> Sequence[dict[str, Any]]:
        return self._full()[0]

    @property
    def numbers(self) -> tuple[int, ...]:
        return self._full()[1]

    @property
    def index(self) -> Mapping[Any, int]:
        return self._full()[2]

    @property
    def awaited(self) -> frozenset[Any]:
        return self._full()[3]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TreeFindings):
            return NotImplemented
        return (self.problems, self.last_line, self._full()) == (
            other.problems,
            other.last_line,
            other._full(),
        )

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle the stubs as columns (:func:`_stub_columns`), packed in a pickle of their
        own that the reader opens only to extend, and leave the index out (it is
        :func:`index_ids` of the entries): the shared copy of a 50,000-entry session's
        findings took a first request longer to pickle and compress than to check, and a
        cold reader longer to unpack than the page it wanted."""
        packed = self._packed
        if packed is None:
            entries, numbers, _index, awaited = self._full()
            columns = entries.columns() if isinstance(entries, _Stubs) else _stub_columns(entries)
            packed = pickle.dumps((columns, numbers, awaited), protocol=pickle.HIGHEST_PROTOCOL)
        return (_restore_findings, (packed, self.problems, self.last_line))

    @classmethod
    def check(cls, entries: Sequence[dict[str, Any]], numbers: Sequence[int]) -> TreeFindings:
        """Every check over ``entries`` (file order) with their line ``numbers``."""
        index = index_ids(entries)
        awaited = frozenset(_awaited(entries, index))
        problems = diagnose_tree(list(entries), list(numbers), index=index)
        return cls(
            tuple(entries), tuple(numbers), tuple(problems), index, awaited, max(numbers, default=0)
        )

    def extended(self, entries: Sequence[dict[str, Any]], numbers: Sequence[int]) -> TreeFindings:
        """These findings with appended ``entries`` checked; equal to :meth:`check` of all."""
        if not entries:
            return self
        kept = self.entries
        all_entries: Sequence[dict[str, Any]] = (
            kept + tuple(entries) if isinstance(kept, _Stubs) else (*kept, *entries)
        )
        all_numbers = self.numbers + tuple(numbers)
        if not self._appendable(entries, numbers):
            return TreeFindings.check(all_entries, all_numbers)
        new = {e["id"]: e for e in entries}
        more = {e["id"]: len(self.entries) + k for k, e in enumerate(entries)}
        kept_index = self.index
        if isinstance(kept_index, _IdIndex):
            index: Mapping[Any, int] = kept_index.plus(more)
        else:
            index = {**kept_index, **more}
        # The stubs the new entries' checks look at, each once, in file order.
        wanted: set[int] = set()
        # Names of the batch's own entries are not stored ones (``_appendable`` holds the
        # two apart); the rest are looked up together, in one pass when they are absent.
        named = {n for e in entries for n in _named(e) if n not in new}
        wanted.update(kept_index[name] for name in _present(kept_index, named))
        for e in entries:
            if e.get("type") in _LINKING:
                wanted.update(self._route_above(e.get("parentId"), new))
        old = sorted(wanted)
        subset = [self.entries[i] for i in old] + list(entries)
        lines = [self.numbers[i] for i in old] + list(numbers)
        new_lines = set(numbers)
        found = [p for p in diagnose_tree(subset, lines) if p.line in new_lines]
        awaited = set(self.awaited)
        awaited.update(_awaited(entries, index))
        return TreeFindings(
            all_entries,
            all_numbers,
            self.problems + tuple(found),
            index,
            frozenset(awaited),
            numbers[-1],
        )

    def _appendable(self, entries: Sequence[dict[str, Any]], numbers: Sequence[int]) -> bool:
        """True when the new entries cannot change an earlier finding (see the class)."""
        if self.numbers and min(numbers) <= self.last_line:
            return False
        if list(numbers) != sorted(set(numbers)):
            return False
        if not all(isinstance(e.get("id"), str) for e in entries):
            return False
        batch = {e["id"] for e in entries}
        return _arrive_plainly(entries, batch, _present(self.index, batch), self.awaited)

    def _route_above(self, parent: Any, new: dict[str, dict[str, Any]]) -> list[int]:
        """Indexes of the stored stubs from ``parent`` up to its root, as the parent links
        go, passing through the appended entries (``new``, by id) on the way; stops at a
        repetition (a cycle, which the engine reports and walks stop at)."""
        out: list[int] = []
        seen: set[Any] = set()
        while jsonfmt.truthy(parent) and jsonfmt.hashable(parent) and parent not in seen:
            seen.add(parent)
            if parent in new:
                parent = new[parent].get("parentId")
                continue
            i = self.index.get(parent)
            if i is None:
                break
            out.append(i)
            parent = self.entries[i].get("parentId")
        return out


# Looks up stored entries by id: id -> (file position, stub, line number) of the last stored
# entry with that id, for those of the ids asked that are stored.
StoredLookup = Callable[[set[str]], Mapping[str, tuple[int, dict[str, Any], int]]]


@dataclass(frozen=True)
class TreeReport:
    """What the Integrity tab shows of :class:`TreeFindings` (the problems) and what an
    ordinary append is checked against (the ids still awaited, the highest line, the count
    of entries), without the stubs.

    A cold reader of a 50,000-entry session's tab after an append loaded the stored
    findings (megabytes) and unpacked their 50,000 stubs to check one new entry, twice the
    small session's page. The report is stored beside them; an append that names only
    entries already there (no edit or compaction, whose checks walk the whole route) is
    checked against those few entries, read by id, as :meth:`TreeFindings.extended` checks
    it against its stubs. Anything else goes to the whole findings (``extended`` is None)."""

    problems: tuple[Problem, ...]
    awaited: frozenset[Any]
    last_line: int
    count: int

    @classmethod
    def of(cls, found: TreeFindings) -> TreeReport:
        return cls(found.problems, found.awaited, found.last_line, len(found.entries))

    def extended(
        self, entries: Sequence[dict[str, Any]], numbers: Sequence[int], stored: StoredLookup
    ) -> TreeReport | None:
        """This report with appended ``entries`` checked: ``TreeReport.of`` the findings
        extended by them, or None when only the whole findings can tell (the conditions of
        :meth:`TreeFindings._appendable`, plus: no linking entry, only string names)."""
        if not entries:
            return self
        if any(e.get("type") in _LINKING for e in entries):
            return None
        if self.count and min(numbers) <= self.last_line:
            return None
        if list(numbers) != sorted(set(numbers)):
            return None
        if not all(type(e.get("id")) is str for e in entries):
            return None
        batch = {e["id"] for e in entries}
        named = {n for e in entries for n in _named(e) if n not in batch}
        if not all(type(n) is str for n in named):
            return None
        found = stored(batch | named)
        if not _arrive_plainly(entries, batch, found, self.awaited):
            return None
        # The stored entries the new ones name, in file order, as the findings' stubs are.
        old = sorted((found[n] for n in named if n in found), key=lambda t: t[0])
        subset = [stub for _at, stub, _line in old] + list(entries)
        lines = [line for _at, _stub, line in old] + list(numbers)
        new_lines = set(numbers)
        more = [p for p in diagnose_tree(subset, lines) if p.line in new_lines]
        index = {n: found[n][0] for n in named if n in found}
        index.update((eid, 0) for eid in batch)
        return TreeReport(
            self.problems + tuple(more),
            self.awaited | _awaited(entries, index),
            numbers[-1],
            self.count + len(entries),
        )


_STUB_KEYS = ("type", "id", "parentId")
# Types, ids, parent ids, roles or targets; the entries of another shape by position.
_Columns = tuple[list[Any], list[Any], list[Any], list[Any], dict[int, dict[str, Any]]]


def _stub_columns(entries: Sequence[dict[str, Any]]) -> _Columns:
    """``entries`` as columns (type, id, parentId, and the role or target of a message or
    label stub) plus the positions and dicts of every entry of another shape, kept whole."""
    kinds: list[Any] = []
    ids: list[Any] = []
    parents: list[Any] = []
    extras: list[Any] = []
    whole: dict[int, dict[str, Any]] = {}
    names: dict[Any, Any] = {}  # one object per type name: the pickle writes each once
    seen: dict[str, str] = {}  # one object per id
    for at, e in enumerate(entries):
        n = len(e)
        kind = e.get("type")
        if type(kind) is str:
            kind = names.setdefault(kind, kind)
        if n == 3 and kind not in ("message", "label") and tuple(e) == _STUB_KEYS:
            extra = None
        elif n == 4 and kind == "message" and tuple(e)[:3] == _STUB_KEYS and "message" in e:
            message = e["message"]
            if type(message) is not dict or len(message) != 1 or "role" not in message:
                whole[at] = e
            extra = message.get("role") if type(message) is dict else None
        elif n == 4 and kind == "label" and tuple(e)[:3] == _STUB_KEYS and "targetId" in e:
            extra = e["targetId"]
        else:
            whole[at] = e
            extra = None
        kinds.append(kind)
        eid, parent = e.get("id"), e.get("parentId")
        if type(eid) is str:
            eid = seen.setdefault(eid, eid)
        if type(parent) is str:  # the parent's own id object: the pickle writes it once
            parent = seen.get(parent, parent)
        ids.append(eid)
        parents.append(parent)
        extras.append(extra)
    return kinds, ids, parents, extras, whole


class _Stubs(Sequence):
    """The stubs of unpacked columns (:func:`_stub_columns`) as a sequence whose items are
    made when asked for, plus appended stubs as they are. An extension looks at a few
    stubs (the new entries' parents and targets); making all 50,000 up front, with their
    id index, cost a cold reader of the Integrity tab 50 ms after any append."""

    __slots__ = ("_columns", "_tail", "_roles")

    def __init__(self, columns: _Columns, tail: tuple[dict[str, Any], ...] = ()) -> None:
        self._columns = columns
        self._tail = tail
        self._roles: dict[Any, dict[str, Any]] = {}  # one role dict per role, as the reader's

    def __len__(self) -> int:
        return len(self._columns[0]) + len(self._tail)

    def __getitem__(self, at: Any) -> Any:
        if isinstance(at, slice):
            return tuple(self[k] for k in range(*at.indices(len(self))))
        kinds, ids, parents, extras, whole = self._columns
        n = len(kinds)
        if at < 0:
            at += len(self)
        if at >= n:
            return self._tail[at - n]
        if whole and at in whole:
            return whole[at]
        kind = kinds[at]
        if kind == "message":
            role = extras[at]
            message = self._roles.get(role)
            if message is None:
                message = self._roles[role] = {"role": role}
            return {"type": kind, "id": ids[at], "parentId": parents[at], "message": message}
        if kind == "label":
            return {"type": kind, "id": ids[at], "parentId": parents[at], "targetId": extras[at]}
        return {"type": kind, "id": ids[at], "parentId": parents[at]}

    def __add__(self, more: Any) -> _Stubs:
        return _Stubs(self._columns, self._tail + tuple(more))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def id_index(self) -> dict[Any, int]:
        """Id → position of the last stub with it, as
        :func:`~explorer.session.diagnostics.index_ids` gives (ids that cannot key a dict
        left out), made from the id column without making the stubs."""
        ids = self._columns[1]
        if all(type(i) is str for i in ids):
            by_id: dict[Any, int] = {i: k for k, i in enumerate(ids)}
        else:
            by_id = {i: k for k, i in enumerate(ids) if jsonfmt.hashable(i)}
        n = len(ids)
        for k, e in enumerate(self._tail):
            key = e.get("id")
            if type(key) is str or jsonfmt.hashable(key):
                by_id[key] = n + k
        return by_id

    def columns(self) -> _Columns:
        """The stubs as columns again, the appended ones added."""
        if not self._tail:
            return self._columns
        kinds, ids, parents, extras, whole = self._columns
        more = _stub_columns(self._tail)
        n = len(kinds)
        return (
            kinds + more[0],
            ids + more[1],
            parents + more[2],
            extras + more[3],
            {**whole, **{n + k: v for k, v in more[4].items()}},
        )


class _IdIndex(Mapping):
    """Id → position of the last stub with it (:meth:`_Stubs.id_index`), answered by
    searching the id column from its end until the searches have cost about what the
    dict would, and from the dict after that.

    An extension of a stored copy asks a few ids: the new entries' own (absent, one pass
    over the column each, at C speed) and their parents (most near the end). Building the
    whole dict of a 50,000-entry session's ids first cost a cold Integrity tab after an
    append about 20 ms, more than the rest of the page. A search finds what a dict lookup
    finds: ids are JSON values, and an id that cannot key a dict (a list, an object)
    equals no key that can."""

    __slots__ = ("_stubs", "_more", "_dict", "_reversed", "_searched")

    def __init__(self, stubs: _Stubs, more: dict[Any, int] | None = None) -> None:
        self._stubs = stubs
        n = len(stubs._columns[1])
        # Stubs appended to the columns, then ids added since: id -> position (later wins).
        tail = {
            e.get("id"): n + k
            for k, e in enumerate(stubs._tail)
            if type(e.get("id")) is str or jsonfmt.hashable(e.get("id"))
        }
        self._more = {**tail, **(more or {})}
        self._dict: dict[Any, int] | None = None
        self._reversed: list[Any] | None = None
        self._searched = 0  # column items compared so far

    def _whole(self) -> dict[Any, int]:
        if self._dict is None:
            self._dict = {**self._stubs.id_index(), **self._more}
            self._reversed = None
        return self._dict

    def get(self, key: Any, default: Any = None) -> Any:
        if self._dict is not None:
            return self._dict.get(key, default)
        if key in self._more:
            return self._more[key]
        ids = self._stubs._columns[1]
        if self._searched > SEARCHES_BEFORE_DICT * len(ids):
            return self._whole().get(key, default)
        if self._reversed is None:
            self._reversed = ids[::-1]
        try:
            j = self._reversed.index(key)
        except ValueError:
            self._searched += len(ids)
            return default
        self._searched += j + 1
        return len(ids) - 1 - j

    def __getitem__(self, key: Any) -> int:
        found = self.get(key, _ABSENT)
        if found is _ABSENT:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        return self.get(key, _ABSENT) is not _ABSENT

    def __iter__(self) -> Any:
        return iter(self._whole())

    def __len__(self) -> int:
        return len(self._whole())

    def present(self, keys: set[Any]) -> set[Any]:
        """Those of ``keys`` (hashable) that the index holds, in one pass over the id column
        for all of them: an extension's new ids are absent, and one search each would
        cost a whole pass apiece."""
        if self._dict is not None:
            return {k for k in keys if k in self._dict}
        found = keys & self._more.keys()
        rest = keys - found
        if rest:
            try:
                found |= rest.intersection(self._stubs._columns[1])
            except TypeError:  # an id that cannot key a dict (a list, an object) in the column
                found |= {k for k in rest if self.get(k, _ABSENT) is not _ABSENT}
        return found

    def plus(self, more: dict[Any, int]) -> _IdIndex:
        """This index with appended ids (id -> position), leaving this one as it is."""
        grown = _IdIndex(self._stubs, {**self._more, **more})
        if self._dict is not None:
            grown._dict = {**self._dict, **more}
        return grown


def _present(index: Mapping[Any, int], keys: set[Any]) -> set[Any]:
    """Those of ``keys`` that ``index`` holds (a restored copy's index: in one pass)."""
    if isinstance(index, _IdIndex):
        return index.present(keys)
    return {k for k in keys if k in index}


_ABSENT = object()
# Passes over the id column an index answers by search before it builds the dict (a pass
# costs about a twentieth of building it).
SEARCHES_BEFORE_DICT = 8


def _restore_findings(packed: bytes, problems: tuple[Problem, ...], last_line: int) -> TreeFindings:
    found = TreeFindings((), (), problems, {}, frozenset(), last_line)
    found._state = None
    found._packed = packed
    return found


# Spaces allowed around the separators: a line written by another tool than Pi (Python's
# json.dumps, say) spells ``"toolCallId": "x"``, and its results are no findings either.
_CALL_ID = re.compile(r'"toolCallId"\s*:\s*"((?:[^"\\]|\\.)*)"')
_CALL_BLOCK = re.compile(r'"type"\s*:\s*"toolCall"\s*,\s*"id"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _call_ids(raw: str) -> set[str]:
    found = set(_CALL_BLOCK.findall(raw))
    if found or '"toolCall"' not in raw:
        return found
    try:  # unusual key order: parse properly
        m = jsonfmt.loads(raw).get("message") or {}
    except (ValueError, AttributeError):
        return set()
    content = m.get("content") if isinstance(m, dict) else None
    return {
        jsonfmt.dumps(b.get("id"))[1:-1]
        for b in content or []
        if isinstance(content, list) and isinstance(b, dict) and b.get("type") == "toolCall"
    }


HEAD_CHARS = 600  # how much of a tool result's line is read first for its call id


def unmatched_tool_results(
    results: Sequence[tuple[str, int]],
    parent: Mapping[str, str | None],
    role: Mapping[str, str],
    load_heads: Callable[[Iterable[str]], dict[str, str]],
    load_raws: Callable[[Iterable[str]], dict[str, str]],
    room: int = LIMIT,
) -> list[dict[str, Any]]:
    """Of the tool results ``results`` ((id, line) in file order), those whose call id appears
    in no assistant message above them (within the turn, by the pairing rule every page
    follows: :func:`~explorer.analysis.tool_pairs.find_call`, so a second parallel call
    between a result and its own call is no finding), at most ``room`` of them.

    ``parent`` and ``role`` cover every entry up to the last result, so a result's answer
    depends only on what lies above it and a list made up to some entry stays right as the
    session grows. ``load_heads`` returns the first :data:`HEAD_CHARS` characters of raw
    lines by id, ``load_raws`` the whole lines (both called in chunks): a result's call id
    sits near the start of its line, before a content of maybe megabytes, and the leftmost
    match in a line's head is its leftmost match (an id holds no bare quote, so no match
    can start inside another); a head without one is read whole. Ids are matched on the
    JSON text, where both sides are spelled the same way."""
    out: list[dict[str, Any]] = []
    for k in range(0, len(results), 2000):
        if len(out) >= room:
            break
        chunk = results[k : k + 2000]
        # The assistants each result's walk may ask (the rule's own stops: a user message,
        # MAX_STEPS entries), so their lines are read once per chunk.
        asked: dict[str, list[tuple[str, str]]] = {}
        for rid, _line in chunk:
            walk: list[tuple[str, str]] = []
            cur = parent.get(rid)
            while cur and cur in parent and len(walk) < MAX_STEPS:
                walk.append((cur, role.get(cur, "")))
                if role.get(cur) == "user":
                    break
                cur = parent[cur]
            asked[rid] = walk
        ids = [rid for rid, _line in chunk]
        heads = load_heads(ids)
        cids = {rid: _CALL_ID.search(heads.get(rid, "")) for rid in ids}
        whole = load_raws([rid for rid in ids if cids[rid] is None])
        for rid, raw in whole.items():
            cids[rid] = _CALL_ID.search(raw)
        raws = load_raws({a for walk in asked.values() for a, r in walk if r == "assistant"})
        calls: dict[str, set[str]] = {}

        def calls_of(entry_id: str, calls=calls, raws=raws) -> set[str]:
            if entry_id not in calls:
                calls[entry_id] = _call_ids(raws.get(entry_id, ""))
            return calls[entry_id]

        for rid, line in chunk:
            m = cids[rid]
            cid = m.group(1) if m else None
            if (cid is None or find_call(cid, asked[rid], calls_of) is None) and len(out) < room:
                out.append({"id": rid, "line": line, "detail": f"no assistant call {cid} above it"})
    return out


def _arrive_plainly(
    entries: Sequence[dict], batch: set[str], stored: Container[str], awaited: Container[str]
) -> bool:
    """Whether appended ``entries`` (ids ``batch``) change no earlier finding: no id already
    stored, repeated or awaited by an earlier dangling parent, no entry its own parent, and
    no parent appended after its child (cycles need the full walk). Both incremental checks
    (the findings' copy and the stored report) extend only past such a batch."""
    seen: set[str] = set()
    for e in entries:
        eid = e["id"]
        if eid in stored or eid in seen or eid in awaited:
            return False
        parent = e.get("parentId")
        if parent == eid:
            return False
        if jsonfmt.hashable(parent) and parent in batch and parent not in seen:
            return False
        seen.add(eid)
    return True
