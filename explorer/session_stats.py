"""Session list helpers: search by first message, sort by activity, default-path totals.

The list itself belongs to the site core; these helpers give it the explorer's questions
(what was the session about, when was it last active, what did its main route cost) without
loading whole sessions: filters are subqueries, and the path totals are computed per session
on request and cached until the session changes.
"""

from __future__ import annotations

from typing import Any

from django.core.cache import cache
from django.db.models import OuterRef, Q, QuerySet, Subquery

from explorer import treedata
from explorer.models import Entry, Session
from explorer.session import jsonfmt
from explorer.session.describe import cost_of, entry_text, total_tokens_of

SORTS = {
    "activity": ("-last_activity", "Last activity"),
    "created": ("-header_timestamp", "Created"),
    "entries": ("-entry_count", "Entries"),
    "name": ("name", "Name"),
}


def annotate_sessions(qs: QuerySet[Session]) -> QuerySet[Session]:
    """Adds `first_message_raw` (first user message line) and `last_activity` (timestamp of
    the newest entry in file order)."""
    first = Entry.objects.filter(session=OuterRef("pk"), type="message", role="user").order_by(
        "position"
    )
    last = Entry.objects.filter(session=OuterRef("pk")).order_by("-position")
    return qs.annotate(
        first_message_raw=Subquery(first.values("raw")[:1]),
        last_activity=Subquery(last.values("timestamp")[:1]),
    )


def search_sessions(qs: QuerySet[Session], q: str, sort: str = "activity") -> QuerySet[Session]:
    """Filter by name, id, cwd or first user message; order by the chosen key."""
    qs = annotate_sessions(qs)
    if q:
        needle = jsonfmt.dumps(q)[1:-1]  # as the text is spelled inside the JSON line
        qs = qs.filter(
            Q(name__icontains=q)
            | Q(session_id__icontains=q)
            | Q(cwd__icontains=q)
            | Q(first_message_raw__icontains=needle)
        )
    order = SORTS.get(sort, SORTS["activity"])[0]
    return qs.order_by(order, "-pk")


def first_message_text(session: Any, limit: int = 140) -> str:
    raw = getattr(session, "first_message_raw", None)
    if not raw:
        return ""
    try:
        data = jsonfmt.loads(raw)
    except ValueError:
        return ""
    text = " ".join(entry_text(data).split()) if isinstance(data, dict) else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def default_path_totals(session: Session) -> dict[str, Any]:
    """Provider-reported tokens and cost along the default leaf's path (cached per version)."""
    key = "explorer:pathtotals:" + treedata.content_key(session)
    hit = cache.get(key)
    if hit is not None:
        return hit
    light = treedata.light_path(session, treedata.default_leaf_id(session))
    ids = [
        e.entry_id for e in light if e.type in ("message", "usage", "compaction", "branch_summary")
    ]
    tokens = 0.0
    cost = 0.0
    for k in range(0, len(ids), 500):
        data = treedata.load_entries(session, ids[k : k + 500])
        for d in data.values():
            tokens += total_tokens_of(d)
            cost += cost_of(d)
    result = {
        "tokens": tokens,
        "cost": cost,
        "path_length": len(light),
    }
    cache.set(key, result, 24 * 3600)
    return result
