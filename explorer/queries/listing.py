"""The session list: search and sort of sessions, each row's labels and route totals, and
an upload's import progress.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.core.cache import cache
from django.db.models import Case, F, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import Lower

from explorer.models import Entry, Session
from explorer.queries.entries import load_entries, with_first_message
from explorer.queries.routes import default_leaf_id, light_path
from explorer.secrets import redact_for_search
from explorer.session import jsonfmt
from explorer.session.describe import cost_of, total_tokens_of
from explorer.titles import file_part, shown_text

# ---------------------------------------------------------------------------------------------
# The session list


SORTS = {
    "activity": ("-last_activity", "Last activity"),
    "created": ("-header_timestamp", "Created"),
    "entries": ("-entry_count", "Entries"),
    "name": ("name", "Name"),
}


def annotate_sessions(qs: QuerySet[Session]) -> QuerySet[Session]:
    """Adds `first_message_raw` (first user message line), `last_activity` (timestamp of
    the newest entry in file order) and `last_position` (so the content key of every listed
    session needs no query of its own)."""
    last = Entry.objects.filter(session=OuterRef("pk")).order_by("-position")
    return with_first_message(qs).annotate(
        last_activity=Subquery(last.values("timestamp")[:1]),
        last_position=Subquery(last.values("position")[:1]),
    )


def search_sessions(qs: QuerySet[Session], q: str, sort: str = "activity") -> QuerySet[Session]:
    """Filter by name, id, cwd or first user message; order by the chosen key."""
    qs = annotate_sessions(qs)
    if q and redact_for_search(q) != q:
        # The query is itself a secret: matching it against stored text would tell which
        # session holds it (its directory too, which may hold a secret), so only the id is
        qs = qs.filter(session_id__icontains=q)
    elif q:
        needle = jsonfmt.dumps(q)[1:-1]  # as the text is spelled inside the JSON line
        q = jsonfmt.visible(q)  # the columns' form (PostgreSQL refuses NUL in a pattern)
        qs = qs.filter(
            Q(name__icontains=q)
            | Q(session_id__icontains=q)
            | Q(cwd__icontains=q)
            | Q(source_path__icontains=q)
            | Q(first_message_raw__icontains=needle)
        )
    if sort == "name":
        # Named sessions A→Z (case aside), then the unnamed ones, newest first: "" sorted
        # first put a wall of "Session 019b…" rows above every name.
        unnamed = Case(When(name="", then=Value(1)), default=Value(0))
        return qs.order_by(unnamed, Lower("name"), F("last_activity").desc(nulls_last=True), "-pk")
    order = SORTS.get(sort, SORTS["activity"])[0]
    return qs.order_by(order, "-pk")


def list_row_labels(session: Session) -> dict[str, str]:
    """What tells one listed session from another when names repeat or are missing: the
    file it came from, and the session it was forked or branched from (a fork keeps the
    original's name)."""
    # A path may hold a secret (a token in a directory or file name): shown masked, as the
    # header's cwd is.
    parent = shown_text(session.parent_session or "")
    source = shown_text(session.source_path or "")
    return {
        "file_name": file_part(source),
        "fork_of": file_part(parent[3:] if parent.startswith("db:") else parent),
        "fork_of_full": parent,
        "source_path": source,
    }


def default_path_totals(session: Session) -> dict[str, Any]:
    """Cumulative provider-reported usage (tokens and cost of every request) along the default
    leaf's path, read from its stored route figures (one row: nothing to keep). Not a
    context size: every request is counted."""
    return _path_totals(session)


def list_path_totals(sessions: Iterable[Session]) -> dict[int, dict[str, Any]]:
    """``default_path_totals`` for every session of a list page at once (pk → totals).

    Read from the stored route figures in two queries for the page; a session without
    rows (none of the app's writers leaves one so, bar an empty one) from its walk."""
    from explorer import route_store

    items = list(sessions)
    # The newest entries' stored route figures, two queries for the page (what
    # :func:`_path_totals` reads for one session); the rest, if any, as before.
    out: dict[int, dict[str, Any]] = {
        pk: {"tokens": f.tokens, "cost": f.cost, "path_length": f.depth + 1}
        for pk, f in route_store.figures_at_tips(items).items()
    }
    for s in items:
        if s.pk not in out:
            out[s.pk] = _path_totals(s)
    return out


def _path_totals(session: Session) -> dict[str, Any]:
    # The default leaf's stored route figures (``explorer.route_store``): one row, whatever
    # the route's length. Summed in route order like ``pisession stats``; the walk below is
    # for a session without rows (written by none of the app's writers).
    from explorer import route_store

    leaf = default_leaf_id(session)
    figures = route_store.figures_at(session, leaf)
    if figures is not None:
        return {"tokens": figures.tokens, "cost": figures.cost, "path_length": figures.depth + 1}
    light = light_path(session, leaf)
    ids = [
        e.entry_id for e in light if e.type in ("message", "usage", "compaction", "branch_summary")
    ]
    tokens = 0.0
    cost = 0.0
    for k in range(0, len(ids), 500):
        data = load_entries(session, ids[k : k + 500])
        for d in data.values():
            tokens += total_tokens_of(d)
            cost += cost_of(d)
    return {"tokens": tokens, "cost": cost, "path_length": len(light)}


def import_progress_key(user, token: str) -> str:
    """The cache key of one upload's progress (written by ``services``, read here): per
    user, so a token names nothing of others."""
    return f"import-progress:{getattr(user, 'pk', 0)}:{token}"


def import_progress(user, token: str) -> dict | None:
    """How far the upload ``token`` of ``user`` got (written by the importer as it streams,
    ``services.import_progress_tracker``), or None before it starts."""
    return cache.get(import_progress_key(user, token))
