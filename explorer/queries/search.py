"""The Search tab: text search within a session and across sessions (a scan for small
sessions, the text index for big ones), and finding text on a route.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, models
from django.db.models import Q, QuerySet

from explorer.models import EntryText, Session
from explorer.queries.entries import importing_pks, with_first_message
from explorer.queries.keep import extended, mask_key
from explorer.queries.routes import light_path
from explorer.session import jsonfmt

# ---------------------------------------------------------------------------------------------
# Search: the visible-text index filled at import and on every append


SEARCH_PAGE = 50
_HIT_FIELDS = ("session_id", "entry_id", "type", "role", "text")


# A session-scoped search on SQLite scans the session's own text rows when it has at most
# this many entries, instead of asking the trigram index: the index answers for the whole
# corpus before the session filter applies, so a 500-entry session beside a 50,000-entry one
# paid the big one's match (bench_pages: 1.2 s against 40 ms alone). Above it the index wins
# for rare words (a scan reads every character of the session's text).
SEARCH_SCAN_ENTRIES = 5000


def _text_matches(
    query: str, session: Session | None = None, *, scan: bool = False
) -> QuerySet[EntryText]:
    """Every indexed entry (of ``session``, if given) whose visible text contains ``query``
    (case-insensitive).

    SQLite answers from the trigram FTS5 index (``LIKE`` on it uses the index for three
    characters or more); PostgreSQL from the ``pg_trgm`` GIN index of migration 0011, which
    serves ``ILIKE`` (``icontains`` compiles to ``UPPER(text) LIKE UPPER(…)``, which no index
    serves). On SQLite a query of fewer than three characters or with LIKE's own wildcards,
    and a small session's own rows (:data:`SEARCH_SCAN_ENTRIES`), are scanned with
    ``icontains``, as other databases are. On
    SQLite both ways end in the built-in ``LIKE`` (the index only narrows the rows it checks),
    so they find the same hits: ASCII letters fold, other letters match as written; a test
    compares them. Either way the match is on the text a reader sees, never on JSON keys or
    ids. ``scan``: the caller narrows the rows to a few itself (the entries of an append)."""
    from django.db.models.expressions import RawSQL

    query = jsonfmt.visible(query)  # the index holds the visible form of the text
    qs = EntryText.objects.all()
    if session is not None:
        qs = qs.filter(session=session)
    small = scan or (session is not None and session.entry_count <= SEARCH_SCAN_ENTRIES)
    # The trigram index serves only three characters or more; a shorter query of multi-byte
    # characters ("日本", an emoji) it answers with nothing at all rather than a scan.
    if connection.vendor == "sqlite" and _index_serves(query) and not small:
        sql = "SELECT rowid FROM explorer_entrytext_fts WHERE text LIKE %s"
        params: list[Any] = [f"%{query}%"]
        span = _text_id_span(session) if session is not None else None
        if span is not None and span[1] - span[0] < _text_id_span(None)[1] // 2:
            # The index answers for the whole corpus, and checks each candidate's text; its
            # rows are the text rows' ids, so the session's id span keeps every other
            # session's hits out (a common word's 20,000 hits in one big session cost a
            # search of another session 60 ms before its own rows were looked at). Only
            # when the span leaves most of the corpus out: over most of it, the bound made
            # the index's own walk a third slower (90 against 70 ms for 20,000 hits).
            sql += " AND rowid BETWEEN %s AND %s"
            params += list(span)
        return qs.filter(id__in=RawSQL(sql, params))
    if connection.vendor == "postgresql":
        escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        quote = connection.ops.quote_name
        column = f"{quote(EntryText._meta.db_table)}.{quote('text')}"
        ilike = RawSQL(f"{column} ILIKE %s", [f"%{escaped}%"], output_field=models.BooleanField())
        return qs.filter(ilike)
    return qs.filter(text__icontains=query)


def _index_serves(visible: str) -> bool:
    """Whether SQLite's trigram index answers ``LIKE`` for this (visible) query: three
    characters or more, without LIKE's own wildcards."""
    return len(visible) >= 3 and not any(c in visible for c in "%_\\")


def _text_id_span(session: Session | None) -> tuple[int, int]:
    """The lowest and highest search-text row id of ``session`` (of every session when
    None; (0, -1) when there are none): lookups on the session's index, which SQLite keeps
    in row id order, or on the table's own key."""
    table = EntryText._meta.db_table
    with connection.cursor() as cur:
        if session is None:
            cur.execute(f"SELECT (SELECT min(id) FROM {table}), (SELECT max(id) FROM {table})")
        else:
            cur.execute(
                f"SELECT (SELECT min(id) FROM {table} WHERE session_id = %s),"
                f" (SELECT max(id) FROM {table} WHERE session_id = %s)",
                [session.pk, session.pk],
            )
        lo, hi = cur.fetchone()
    return (0, -1) if lo is None else (lo, hi)


def search_entries(
    query: str,
    *,
    session: Session | None = None,
    entry_type: str = "",
    offset: int = 0,
    limit: int = SEARCH_PAGE,
    exact: bool = True,
    hide: dict[int, frozenset[str]] | None = None,
) -> dict[str, Any]:
    """Every hit counted, grouped by session, one page of them listed (page, partial, JSON).

    ``hide``: session pk → entry ids whose hits are left out (archived branches); the
    answer's ``left_out`` says how many hits that was.

    Returns ``total`` (every hit), ``sessions`` (each with its hit count, most hits first),
    ``hits`` (this page, in session then file order, with the text to make snippets from)
    and ``next_offset`` (None on the last page).

    ``exact=False`` (the session page): when counting would mean matching every hit of a
    big session afresh, only this page's hits are found and ``total`` is None when there
    are more; the page asks the count view for it afterwards (``exact=True``)."""
    hide = {pk: ids for pk, ids in (hide or {}).items() if ids}
    if session is not None:
        return _session_search(
            query, session, entry_type, offset, limit, exact, hide.get(session.pk, frozenset())
        )
    qs = _text_matches(query, session)
    if entry_type:
        qs = qs.filter(type=entry_type)
    if importing := importing_pks():  # their batches are indexed, not yet shown
        qs = qs.exclude(session_id__in=importing)
    left_out = 0
    if hide:
        archived = Q()
        for pk, ids in hide.items():
            archived |= Q(session_id=pk, entry_id__in=sorted(ids))
        left_out = qs.filter(archived).count()
        qs = qs.exclude(archived)
    per_session = list(
        qs.values("session_id").annotate(n=models.Count("id")).order_by("-n", "session_id")
    )
    total = sum(r["n"] for r in per_session)
    sessions = with_first_message(Session.objects.all()).in_bulk(
        [r["session_id"] for r in per_session]
    )
    page = list(qs.order_by("session_id", "position").values(*_HIT_FIELDS)[offset : offset + limit])
    for hit in page:
        hit["session"] = sessions.get(hit["session_id"])
    return {
        "total": total,
        "sessions": [
            {"session": sessions[r["session_id"]], "hits": r["n"]}
            for r in per_session
            if r["session_id"] in sessions
        ],
        "hits": page,
        "offset": offset,
        "next_offset": offset + limit if offset + limit < total else None,
        "left_out": left_out,
    }


def _session_search(
    query: str,
    session: Session,
    entry_type: str,
    offset: int,
    limit: int,
    exact: bool,
    hide: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """:func:`search_entries` within one session: the ids of every hit, in file order, are
    kept (so the next page of the same search, or the same search again, reads 50 rows by id
    instead of matching and counting every hit again: a word in 20,000 entries of a big
    session cost about 0.4 s each time), and after an append only the new entries' text is
    matched (:func:`session_hit_ids`).

    Not ``exact``, a big session whose hits nobody has listed yet has only this page's hits
    found (:func:`_first_hit_ids`): the first page of a common word's 20,000 hits in 0.4
    ms instead of 150; ``total`` is then exact only when the page reached the last hit."""
    ids = session_hit_ids(
        query,
        session,
        entry_type,
        compute=exact or bool(hide) or not _counting_is_costly(query, session),
    )
    left_out = 0
    if hide and ids is not None:
        # Archived entries' hits left out: their text rows, by id (the kept list is of ids).
        dropped = set(
            EntryText.objects.filter(session=session, entry_id__in=sorted(hide)).values_list(
                "id", flat=True
            )
        )
        kept = [i for i in ids if i not in dropped]
        left_out, ids = len(ids) - len(kept), kept
    total: int | None
    if ids is None:
        ids = _first_hit_ids(query, session, entry_type, offset + limit + 1)
        total = len(ids) if len(ids) <= offset + limit else None
    else:
        total = len(ids)
    wanted = ids[offset : offset + limit]
    page = list(EntryText.objects.filter(id__in=wanted).order_by("position").values(*_HIT_FIELDS))
    for hit in page:
        hit["session"] = session
    more = len(ids) > offset + limit
    return {
        "total": total,
        "sessions": [{"session": session, "hits": total}] if total or total is None else [],
        "hits": page,
        "offset": offset,
        "next_offset": offset + limit if more else None,
        "left_out": left_out,
    }


def search_is_counted(query: str, session: Session, entry_type: str = "") -> bool:
    """Whether a session's page of ``query`` hits comes with its exact count: always for a
    small session, for a big one once its hit list is kept (the page's fragment is drawn
    once per version and per this answer, so the count, once asked for, is shown)."""
    if not _counting_is_costly(query, session):
        return True
    return session_hit_ids(query, session, entry_type, compute=False) is not None


def _counting_is_costly(query: str, session: Session) -> bool:
    """Whether counting means matching the index over a big session (a small session's own
    rows are scanned in a few milliseconds, and so counted at once)."""
    return session.entry_count > SEARCH_SCAN_ENTRIES and len(jsonfmt.visible(query)) >= 3


def _first_hit_ids(query: str, session: Session, entry_type: str, n: int) -> list[int]:
    """The search-text row ids of the first ``n`` hits of ``query`` in ``session``, in file
    order, matching only as far as the ``n``-th hit.

    On SQLite the trigram index is walked in row id order and stops at the ``n``-th row of
    the session: a session's text rows are stored in file order (the one writer,
    ``files.store_search_rows``, is given them by position and refuses them otherwise), so
    row id order is file order. ``CROSS JOIN`` keeps SQLite from driving the join from the
    session's rows, which asks the index once per row (seconds). Elsewhere the database
    walks the session's rows by position and stops at the ``n``-th match."""
    visible = jsonfmt.visible(query)
    if connection.vendor == "sqlite" and _index_serves(visible):
        lo, hi = _text_id_span(session)
        table = EntryText._meta.db_table
        sql = (
            f"SELECT t.id FROM explorer_entrytext_fts f CROSS JOIN {table} t ON t.id = f.rowid"
            " WHERE f.text LIKE %s AND f.rowid BETWEEN %s AND %s AND t.session_id = %s"
        )
        params: list[Any] = [f"%{visible}%", lo, hi, session.pk]
        if entry_type:
            sql += " AND t.type = %s"
            params.append(entry_type)
        sql += " ORDER BY f.rowid LIMIT %s"
        params.append(n)
        with connection.cursor() as cur:
            cur.execute(sql, params)
            return [row[0] for row in cur.fetchall()]
    qs = _text_matches(query, session, scan=True)
    if entry_type:
        qs = qs.filter(type=entry_type)
    return list(qs.order_by("position").values_list("id", flat=True)[:n])


def session_hit_ids(
    query: str, session: Session, entry_type: str = "", *, compute: bool = True
) -> list[int] | None:
    """The search-text row ids of every hit of ``query`` in ``session``, in file order.

    Search text is stored once per entry when the entry arrives (in the transaction that
    stores it) and never changes, so the hits up to file position P stay the hits up to P:
    the list is kept under the session's identity with the position it reached, and after
    an append only the rows past it are matched, by a scan of those few rows (the trigram
    index would answer for the whole corpus first). A hit list is read up to the position
    read first, so a write landing in between is matched next time, never twice.
    ``compute=False``: None when no list is kept to answer from or extend."""
    return extended(
        session,
        f"search-hits|{mask_key(session)}|{entry_type}|{query}",
        # The first list asks the trigram index; an extension scans the few rows past it.
        lambda since, upto: _hit_ids(query, session, entry_type, since, upto, scan=since >= 0),
        compute=compute,
    )


def _hit_ids(
    query: str, session: Session, entry_type: str, after: int, upto: int, *, scan: bool
) -> list[int]:
    qs = _text_matches(query, session, scan=scan).filter(position__gt=after, position__lte=upto)
    if entry_type:
        qs = qs.filter(type=entry_type)
    # Read straight from the cursor: a common word has tens of thousands of hits, and the
    # ORM's row iteration cost a quarter of a cold search of 20,000 (about 25 ms).
    sql, params = qs.order_by("position").values_list("id", flat=True).query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return [row[0] for row in cur.fetchall()]


def route_find(session: Session, leaf: str | None, needle: str, limit: int = 200) -> list[str]:
    """Ids on the route root → ``leaf`` whose visible text contains ``needle``, in route
    order: find-in-route through the search index (the text a reader sees, secrets masked,
    never JSON keys) and the one route query."""
    if not leaf or not needle:
        return []
    order = {e.entry_id: i for i, e in enumerate(light_path(session, leaf))}
    hits = _text_matches(needle, session).values_list("entry_id", flat=True)
    return sorted({h for h in hits if h in order}, key=order.__getitem__)[:limit]
