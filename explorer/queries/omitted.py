"""Multi-MB lines a page aligns but does not show, stood in for by their stored figures.

Compare projects both routes' live ranges to match their contexts, but lists only their
newest entries and the lines that differ: a 3.7 MB tool result both routes share counts in
a shared run by its estimate alone. Parsing it for that cost a third of a second per
hundred such lines on every request. Such an entry is given to the projection as an
:class:`~explorer.analysis.compare.OmittedMessage` carrying its estimate, read from the
route figures stored with it, and its line is not read.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from django.db import connection

from explorer import line_text_store, route_store
from explorer.key_lookups import rows_for_keys
from explorer.models import Entry, Session
from explorer.queries.entries import entries_with_secrets
from explorer.queries.routes import LightEntry
from explorer.session import jsonfmt
from explorer.session.tokens import OmittedMessage

# Lines at least this long are stood in for; shorter ones cost less to parse than to check.
# The same threshold as the row texts stored with such lines (``line_text_store``), so a
# stand-in a page shows has its texts stored.
BIG_LINE = line_text_store.BIG_LINE
# Roles whose message the projection passes through as it is, whatever its content (never a
# system message, which a compaction supersedes, nor an assistant reply, whose model the
# settings and whose usage the estimate read).
OMITTED_ROLES = frozenset(("user", "toolResult"))


def omitted_entries(
    session: Session, light: Sequence[LightEntry], parsed: Collection[str]
) -> dict[str, dict]:
    """Stand-ins (id → entry) for the entries of ``light`` not in ``parsed`` whose line is
    at least :data:`BIG_LINE` bytes and whose estimate is exactly known without it.

    An entry qualifies when it is a user or tool-result message that holds no secret (its
    masked text is its text, the one the stored figures estimated), that no context edit
    of the session targets (so every route projects its message untouched), and whose
    stored figures and its parent's say it added exactly one message: the difference of
    their ``every_estimate`` is then that message's estimate, as :func:`next_figures`
    adds it. Anything else is parsed as before."""
    by_id = {e.entry_id: e for e in light if e.type == "message" and e.entry_id not in parsed}
    if not by_id:
        return {}
    big = big_lines(session, list(by_id))
    holding = entries_with_secrets(session)
    big = {
        eid: role
        for eid, role in big.items()
        if eid not in holding and jsonfmt.visible(eid) == eid and role in OMITTED_ROLES
    }
    if not big:
        return {}
    targeted = _edit_targets(session, list(big))
    big = {eid: role for eid, role in big.items() if eid not in targeted}
    parents = {eid: by_id[eid].parent_id for eid in big}
    figures = route_store.figures_of(
        session, [*big, *(p for p in parents.values() if p is not None)]
    )
    out: dict[str, dict] = {}
    for eid, role in big.items():
        own = figures.get(eid)
        parent = parents[eid]
        base = figures.get(parent) if parent is not None else None
        if own is None or (parent is not None and base is None):
            continue
        every = own.every_estimate - (base.every_estimate if base is not None else 0.0)
        added = own.messages - (base.messages if base is not None else 0)
        if added != 1 or not math.isfinite(every) or every < 0 or every != int(every):
            continue
        out[eid] = {
            "type": "message",
            "id": eid,
            "parentId": parent,
            "message": OmittedMessage(role, int(every)),
        }
    return out


def _edit_targets(session: Session, ids: list[str]) -> set[str]:
    """The ids among ``ids`` that a context edit of the session targets, by the targets'
    partial index. Named on SQLite: without it the planner (no statistics) prefers the
    covering skeleton index and steps over every entry of the session (18 ms at 150,000
    entries, against 0.1 ms)."""
    table = Entry._meta.db_table
    hint = "INDEXED BY entry_by_target" if connection.vendor == "sqlite" else ""
    rows = rows_for_keys(
        f"SELECT target_id FROM {table} {hint} "  # noqa: S608
        "WHERE session_id = %s AND NOT (target_id = '') AND type = 'context_edit' "
        "AND target_id IN ({keys})",
        ids,
        before=[session.pk],
    )
    return {target for (target,) in rows}


def big_lines(session: Session, ids: list[str]) -> dict[str, str]:
    """Id → role of the entries among ``ids`` whose line is at least :data:`BIG_LINE` bytes:
    index columns only, stored before the line (migration 0024), so no line is read."""
    table = Entry._meta.db_table
    rows = rows_for_keys(
        f"SELECT entry_id, role FROM {table} "  # noqa: S608
        "WHERE session_id = %s AND size >= %s AND entry_id IN ({keys})",
        ids,
        before=[session.pk, BIG_LINE],
    )
    return {eid: role or "" for eid, role in rows}
