"""Archived branches: which entries the pages hide unless the reader asks to see them.

An editor archives the subtree starting at one entry (``models.ArchivedBranch``, written
by ``services.archive_branch``). The session file is never touched, so everything here is
a read over the tree's stored segments: the ids under each archived entry. An archive whose
subtree holds the session's own leaf (someone carried on in the abandoned attempt after it
was archived) is not in effect: hiding it would hide the route every page opens on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from explorer import files, queries
from explorer.models import ArchivedBranch, Session
from explorer.session import jsonfmt

# The query parameter that shows archived branches (marked) instead of hiding them.
SHOW_PARAM = "archived"
SHOW_VALUE = "show"


@dataclass(frozen=True)
class Archived:
    """What the session's archives hide: ``roots`` (first entry → its archive row, in
    effect only) and ``ids`` (every entry under those roots, the roots included)."""

    roots: dict[str, ArchivedBranch]
    ids: frozenset[str]
    leaves: int = 0  # leaves among ``ids``: what the Leaves total leaves out
    outer: int = 0  # archived branches not inside another one: what "N archived" counts

    def __bool__(self) -> bool:
        return bool(self.roots)

    @property
    def count(self) -> int:
        return self.outer


NOTHING = Archived({}, frozenset())


def wants_shown(get: object) -> bool:
    """Whether a request's query asks for archived branches to be shown (marked)."""
    value = getattr(get, "get", lambda _k: None)(SHOW_PARAM)
    return value == SHOW_VALUE


def subtree_ids(children: dict[str | None, list[str]], start: str) -> set[str]:
    """``start`` and every entry below it (iterative: a route can be thousands deep)."""
    out = {start}
    stack = [start]
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in out:
                out.add(child)
                stack.append(child)
    return out


def archived(session: Session) -> Archived:
    """The archives in effect and the ids they hide (the ids cached per session version
    and archive state: :func:`queries.archive_stamp` is part of every cache key)."""
    if not queries.archive_stamp(session):
        return NOTHING
    rows = queries._once(  # once per read-only request, as the stamp is
        ("archived-rows", session.pk),
        lambda: {a.entry_id: a for a in ArchivedBranch.objects.filter(session=session)},
    )

    def build() -> tuple[list[str], list[str], int, int]:
        return _hidden_by_segments(session, sorted(rows))

    roots, ids, leaves, outer = queries.cached(session, "archived-ids:4", build)
    return Archived({r: rows[r] for r in roots}, frozenset(ids), leaves, outer)


def _hidden_by_segments(
    session: Session, asked: list[str]
) -> tuple[list[str], list[str], int, int]:
    """(roots in effect, the ids they hide, leaves among them, roots not inside another),
    read from the stored segments (:mod:`explorer.segment_store`): the segment rows (about
    one per branch), each archived entry's place and the hidden segments' members, never
    a row per entry of the session. An archive is in effect unless its subtree holds the
    session's own leaf; an entry in no segment (inside a cycle) hides nothing."""
    from django.db.models import Q

    from explorer.models import SegmentEntry
    from explorer.segment_store import SegmentTree

    tree = SegmentTree(session)
    places = {eid: spot for eid in asked if (spot := tree.place(eid)) is not None}

    def holds(spot: tuple[int, int], route: dict[int, int]) -> bool:
        """Whether the subtree at ``spot`` holds the end of ``route`` (segment → last
        offset on it): the route passes through the spot's segment at or after it."""
        return route.get(spot[0], -1) >= spot[1]

    tip = queries.default_leaf_id(session)
    tip_route = dict(tree.route(tip)) if tip else {}
    roots = [eid for eid, spot in places.items() if not holds(spot, tip_route)]
    routes = {eid: dict(tree.route(eid)) for eid in roots}
    outer = [r for r in roots if not any(q != r and holds(places[q], routes[r]) for q in roots)]
    whole: list[int] = []  # segments hidden from their head
    partial = Q(pk__in=[])  # an outer root's own segment, from the root on
    for root in outer:
        seg, offset = places[root]
        partial |= Q(segment_id=seg, offset__gte=offset)
        stack = [child for at, child in tree.hanging.get(seg, []) if at >= offset]
        while stack:
            below = stack.pop()
            whole.append(below)
            stack.extend(child for _at, child in tree.hanging.get(below, []))
    ids: set[str] = set()
    if outer:
        ids = set(
            SegmentEntry.objects.filter(session=session)
            .filter(partial | Q(segment_id__in=whole))
            .values_list("entry__entry_id", flat=True)
        )
    leaves = sum(tree.size_at(*places[root])[1] for root in outer)
    return roots, sorted(ids), leaves, len(outer)


def listed(session: Session) -> list[dict[str, object]]:
    """Every archive of the session as the JSON API gives it (``in_effect``: false when the
    branch holds the session's own leaf, so the pages do not hide it)."""
    found = archived(session)
    return [
        {
            "entry_id": a.entry_id,
            "reason": a.reason,
            "archived_by": a.archived_by.get_username() if a.archived_by else None,
            "archived_at": a.archived_at.isoformat(),
            "in_effect": a.entry_id in found.roots,
        }
        for a in ArchivedBranch.objects.filter(session=session)
        .select_related("archived_by")
        .order_by("archived_at", "pk")
    ]


def iter_without_archived(session: Session) -> Iterator[bytes]:
    """The session file without its archived branches (those in effect), chunk by chunk: a
    second download beside the byte-identical export, still a valid Pi session.

    Every line is the stored one, except: the lines of archived entries are left out; a
    label whose target is archived is left out too (it would dangle), and an entry whose
    parent was such a label hangs from that label's own parent instead (its line is
    written again with the new ``parentId``; nothing else in it changes). The header, the
    lines that are not entries and the session's own leaf stay as they were."""
    hide = archived(session).ids
    rehang: dict[str, str | None] = {}  # a left-out label's id -> the parent it had
    rest = b""

    def kept(line: bytes) -> bytes | None:
        if not hide or not line.strip():
            return line
        try:
            value = jsonfmt.loads(line)
        except ValueError:
            return line  # not JSON: kept as stored, as the export keeps it
        if type(value) is not dict or value.get("type") == "session":
            return line
        eid = value.get("id")
        if isinstance(eid, str) and eid in hide:
            return None
        parent = value.get("parentId")
        if value.get("type") == "label" and value.get("targetId") in hide:
            if isinstance(eid, str):
                rehang[eid] = rehang.get(parent, parent) if isinstance(parent, str) else parent
            return None
        if isinstance(parent, str) and parent in rehang:
            value["parentId"] = rehang[parent]
            return jsonfmt.dumps(value).encode("utf-8", errors="surrogatepass")
        return line

    for chunk in files.iter_export(session):
        data = rest + chunk
        lines = data.split(b"\n")
        rest = lines.pop()
        out = [line for line in map(kept, lines) if line is not None]
        if out:
            yield b"".join(line + b"\n" for line in out)
    if rest:
        last = kept(rest)
        if last is not None:
            yield last


def pick(session: Session, choices: list[dict[str, str]], shown: bool) -> dict[str, object]:
    """A leaf picker's choices without the archived routes (unless ``shown``: then marked),
    and what its "N archived · show" toggle says: ``archived_count`` choices left out or
    marked, ``archived_shown``."""
    hide = archived(session).ids
    if not hide:
        return {"choices": choices, "archived_count": 0, "archived_shown": shown}
    out: list[dict[str, str]] = []
    count = 0
    for c in choices:
        if c["id"] not in hide:
            out.append(c)
            continue
        count += 1
        if shown:
            out.append({**c, "title": c["title"] + " (archived)"})
    return {"choices": out, "archived_count": count, "archived_shown": shown}


def toggle_url(path: str, get: object, shown: bool) -> str:
    """``path`` with the request's query, the archived branches shown or not."""
    from urllib.parse import urlencode

    items = getattr(get, "lists", lambda: [])()
    q = [(k, v) for k, vs in items if k != SHOW_PARAM for v in vs]
    if not shown:
        q.append((SHOW_PARAM, SHOW_VALUE))
    return path + ("?" + urlencode(q) if q else "")


def hidden_by_session(session: Session | None) -> dict[int, frozenset[str]]:
    """Session pk → ids its archives hide: of ``session``, or of every session with an
    archive (the search across sessions leaves their hits out)."""
    if session is not None:
        ids = archived(session).ids
        return {session.pk: ids} if ids else {}
    pks = set(ArchivedBranch.objects.values_list("session_id", flat=True))
    out = {}
    for s in Session.objects.filter(pk__in=pks):
        ids = archived(s).ids
        if ids:
            out[s.pk] = ids
    return out


def mark_totals(sessions: list[Session]) -> None:
    """Set ``archived_entries``, ``entries_shown`` and ``leaves_shown`` on each session of a list (the totals
    the list and the session header leave out): one query, then only the sessions that
    have an archive are read."""
    pks = set(
        ArchivedBranch.objects.filter(session__in=sessions).values_list("session_id", flat=True)
    )
    for s in sessions:
        found = archived(s) if s.pk in pks else NOTHING
        s.archived_entries = len(found.ids)  # type: ignore[attr-defined]
        s.entries_shown = s.entry_count - len(found.ids)  # type: ignore[attr-defined]
        s.leaves_shown = s.leaf_count - found.leaves  # type: ignore[attr-defined]
