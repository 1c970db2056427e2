"""The Integrity tab: orphans, cycles and unmatched tool results of a session."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from explorer.models import Entry, Session
from explorer.queries.entries import load_entries
from explorer.queries.keep import cached, grown
from explorer.queries.routes import BY_PARENT_COLS
from explorer.queries.skeleton import _skeleton
from explorer.session.gcpause import gc_paused

# ---------------------------------------------------------------------------------------------
# Integrity


def integrity_sections(session: Session) -> list[dict[str, Any]]:
    """The engine's tree checks over the stored session (cached per session version).

    Only index columns are read for most entries; compactions and context edits, whose
    checks look inside them, are parsed. The findings grow with the session (:func:`grown`,
    :class:`~explorer.analysis.integrity.TreeFindings`): after an append only the new rows
    are read and checked. The page reads their :class:`~explorer.analysis.integrity.
    TreeReport` (:func:`integrity_report`)."""
    from explorer.analysis.integrity import sections_of

    return cached(session, "integrity", lambda: sections_of(integrity_report(session).problems))


def integrity_report(session: Session) -> Any:
    """The tree checks' :class:`~explorer.analysis.integrity.TreeReport`, kept (and stored)
    beside the findings: an ordinary append extends the report against the few stored
    entries it names, so a cold reader does not load and unpack every stub of a big
    session's findings to check one entry."""
    from explorer.analysis.integrity import TreeFindings, TreeReport

    def findings() -> TreeFindings:
        return grown(
            session,
            "integrity-findings",
            lambda last: TreeFindings.check(*_integrity_stubs(session, -1, last)),
            lambda found, after, upto: found.extended(*_integrity_stubs(session, after, upto)),
            stored=True,
        )

    def extend(report: TreeReport, after: int, upto: int) -> TreeReport:
        entries, numbers = _integrity_stubs(session, after, upto)
        light = report.extended(entries, numbers, lambda ids: _stored_stubs(session, ids, after))
        return light if light is not None else TreeReport.of(findings())

    return grown(
        session,
        "integrity-report",
        lambda last: TreeReport.of(findings()),
        extend,
        stored=True,
    )


_STUB_COLS = ("entry_id", "parent_id", "type", "role", "line_no", "target_id")


def _integrity_stubs(
    session: Session, after: int, upto: int
) -> tuple[list[dict[str, Any]], list[int]]:
    """The stubs the tree checks read of the entries at positions (after, upto], in file
    order, and their line numbers."""
    with gc_paused():
        rows = list(
            Entry.objects.filter(session=session, position__gt=after, position__lte=upto)
            .order_by("position")
            .values_list(*_STUB_COLS)
        )
        return _stubs_of(session, rows), [r[4] for r in rows]


def _stored_stubs(
    session: Session, ids: set[str], upto: int
) -> dict[str, tuple[int, dict[str, Any], int]]:
    """Id -> (position, stub, line) of the last entry at or before ``upto`` with each of
    ``ids`` that has one: the stored entries an append names, as the findings hold them
    (:class:`~explorer.analysis.integrity.StoredLookup`). A stub whose own id is not the
    one asked for (an id column written for an id that is not a string) is left out, as the
    findings' index would not find it."""
    out: dict[str, tuple[int, dict[str, Any], int]] = {}
    wanted = list(ids)
    for k in range(0, len(wanted), 500):
        # A column the covering skeleton index does not hold (``BY_PARENT_COLS``), no
        # ORDER BY and no position bound: else SQLite walks the whole session with that
        # index (10 ms on 50,000 entries) instead of looking the few ids up.
        found = Entry.objects.filter(session=session, entry_id__in=wanted[k : k + 500])
        cols = found.order_by().values_list(*_STUB_COLS, "position", *BY_PARENT_COLS)
        rows = sorted((r for r in cols if r[6] <= upto), key=lambda r: r[6])
        stubs = _stubs_of(session, [r[:6] for r in rows])
        for row, stub in zip(rows, stubs, strict=True):
            if stub.get("id") == row[0] and row[0] in ids:
                out[row[0]] = (row[6], stub, row[4])
    return out


def _stubs_of(session: Session, rows: list[tuple]) -> list[dict[str, Any]]:
    """The stubs of ``rows`` (:data:`_STUB_COLS`): compactions and context edits parsed
    whole, whose checks look inside them; messages of one role sharing one ``{"role": ...}``
    (the checks only read it), which halves what is made and what a shared copy pickles."""
    full = load_entries(session, [r[0] for r in rows if r[2] in ("compaction", "context_edit")])
    roles: dict[Any, dict[str, Any]] = {}
    entries: list[dict[str, Any]] = []
    add = entries.append
    for eid, parent, kind, role, _line, target in rows:
        item = full.get(eid) if full else None
        if item is not None:
            add(item)
        elif kind == "message":
            message = roles.get(role)
            if message is None:
                message = roles[role] = {"role": role}
            add({"type": kind, "id": eid, "parentId": parent, "message": message})
        elif kind == "label":
            add({"type": kind, "id": eid, "parentId": parent, "targetId": target})
        else:
            add({"type": kind, "id": eid, "parentId": parent})
    return entries


def unmatched_tool_results(session: Session) -> list[dict[str, Any]]:
    """Tool results without their call above them (:func:`~explorer.analysis.integrity.
    unmatched_tool_results`), kept as the session grows (:func:`grown`): a result's answer
    depends only on the entries above it, so after an append only the new results are
    checked. A first build reads the head of every tool result's line, not its content."""
    from django.db.models.functions import Substr

    from explorer.analysis import integrity

    def raws(ids: Iterable[str]) -> dict[str, str]:
        rows = Entry.objects.filter(session=session, entry_id__in=list(ids)).order_by()
        return dict(rows.values_list("entry_id", "raw"))

    def check(after: int, upto: int, room: int) -> list[dict[str, Any]]:
        if room <= 0:
            return []
        rows = (
            Entry.objects.filter(
                session=session, role="toolResult", position__gt=after, position__lte=upto
            )
            .order_by("position")
            .values_list("entry_id", "line_no", Substr("raw", 1, integrity.HEAD_CHARS))
        )
        results: list[tuple[str, int]] = []
        head: dict[str, str] = {}
        for eid, line, text in rows:  # the heads come with the rows: no lookup by id
            results.append((eid, line))
            head[eid] = text
        if not results:
            return []
        parent: dict[str, str | None] = {}
        role: dict[str, str] = {}
        for eid, par, _kind, rl in _skeleton(session):
            parent[eid] = par
            role[eid] = rl

        def heads(ids: Iterable[str]) -> dict[str, str]:
            return {i: head[i] for i in ids}

        return integrity.unmatched_tool_results(results, parent, role, heads, raws, room)

    return grown(
        session,
        "integrity-tools-2",
        lambda last: check(-1, last, integrity.LIMIT),
        lambda found, after, last: found + check(after, last, integrity.LIMIT - len(found)),
        stored=True,
    )
