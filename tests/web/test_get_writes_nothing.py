"""No GET writes a row (issue 27).

A reader's request must leave the database as it found it: what is stored with a session
(route figures, segments, the stored whole-session figures) is written by the import and
the appends, never by whoever happens to read first. A page that wrote on the way to its
answer took SQLite's write lock behind a running import, raced other readers' writes and
made a read-only replica fail; and what it stored depended on which page was read first.

The test imports a big generated session (above ``stored_figures.STORE_FROM`` entries, with
branches, compactions, context edits that hide and replace, branch summaries, labels, an
archived branch and a secret) through the real import, forgets every cached copy, and GETs
every page of it with a wrapper on the database connection that records each statement
that would write. Then it appends more than ``stored_figures.STORE_LAG`` entries through
the real append paths (outside the wrapper) and reads every page cold again: the stored
copies are then behind, which is when a reader used to write them again.

The one GET that writes by design is a share link's page: it logs the view (who read what
through the link, for the link's owner), in the share log's two tables and nothing else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.urls import reverse

from benchmarks.gen_session import generate_session
from explorer import queries, services, shared_copies, shares, stored_figures
from explorer.models import Entry, Session
from tests.web import crafted

pytestmark = pytest.mark.django_db

WRITES = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE|CREATE|DROP|ALTER)\b", re.I)
# What a share link's page may write: its view log (``shares.record_view``), by design.
SHARE_LOG = re.compile(r'^\s*(INSERT INTO|UPDATE) "explorer_share(view|link)"', re.I)
FAKE_KEY = "AKIAQ3EGRTQNW7ZK5XPD"  # an AWS access key id's shape, not a real key


@contextmanager
def recorded_writes() -> Iterator[list[str]]:
    """Every statement run on the default connection in this block that would write."""
    seen: list[str] = []

    def record(execute, sql, params, many, context):
        if WRITES.match(sql):
            seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield seen


def _cold() -> None:
    """What a new worker starts with: no shared cache, no copies of its own."""
    shared_copies.flush()
    cache.clear()
    queries._GROWN.clear()


def _chain(parent: str, n: int, tag: str) -> tuple[list[str], list[str]]:
    """``n`` plain messages, each the child of the one before, under ``parent``."""
    lines, ids = [], []
    for k in range(n):
        eid = f"{tag}{k:05d}"
        role = "user" if k % 2 == 0 else "assistant"
        lines.append(json.dumps(crafted.message(eid, parent, role, f"{tag} line {k}", 1000 + k)))
        ids.append(eid)
        parent = eid
    return lines, ids


def _off_route_branch(session: Session) -> str:
    """The first entry of a branch the session's own leaf is not on (to archive)."""
    route = {e.entry_id for e in queries.light_path(session, queries.default_leaf_id(session))}
    parents = (
        Entry.objects.filter(session=session, parent_id__in=route)
        .exclude(entry_id__in=route)
        .order_by("position")
        .values_list("entry_id", flat=True)
    )
    return next(iter(parents))


def _user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


@pytest.fixture
def big_session(tmp_path, admin_user) -> Session:
    path = generate_session(
        tmp_path / "big.jsonl", entries=stored_figures.STORE_FROM + 100, branch_points=20,
        seed=5, compact_after=40_000,
    )  # fmt: skip
    result = services.import_bytes(path.read_bytes(), source_path="big.jsonl", user=admin_user)
    assert result.ok, [str(p) for p in result.problems]
    session = result.session
    assert stored_figures.wanted(session)
    kinds = set(Entry.objects.filter(session=session).values_list("type", flat=True))
    assert {"compaction", "context_edit", "branch_summary", "label"} <= kinds
    services.archive_branch(session, admin_user, _off_route_branch(session), "test: set aside")
    tip = queries.default_leaf_id(session)
    services.append_message(session, None, _user(f"my key is {FAKE_KEY}"), leaf_id=tip)
    session.refresh_from_db()
    assert session.secret_findings.exists()
    return session


def _pages(session: Session) -> list[str]:
    """Every GET of the session a reader can make, with the parameters that pick the
    heavier builders (another leaf, a branch summary, archived branches shown)."""
    pk = session.pk
    tip = queries.default_leaf_id(session)
    assert tip is not None
    leaves = [c["id"] for c in queries.leaf_choices(session) if c["id"] != tip]
    other = leaves[0]
    summary = (
        Entry.objects.filter(session=session, type="branch_summary")
        .order_by("position")
        .values_list("entry_id", flat=True)
        .first()
    )
    compaction = (
        Entry.objects.filter(session=session, type="compaction")
        .order_by("-position")
        .values_list("entry_id", flat=True)
        .first()
    )
    edit = (
        Entry.objects.filter(session=session, type="context_edit")
        .order_by("position")
        .values_list("entry_id", flat=True)
        .first()
    )
    archived = session.archived.values_list("entry_id", flat=True).first()

    def url(name: str, query: str = "", *args) -> str:
        return reverse(f"explorer:{name}", args=[pk, *args]) + (f"?{query}" if query else "")

    tabs = [
        url("session_detail"),
        url("session_detail", "archived=show"),
        url("session_detail", f"leaf={other}"),
        url("session_detail", f"root={archived}&archived=show"),
        url("session_detail", f"arrivals={tip}"),
        url("graph_svg"),
        url("graph_svg", "archived=show"),
        url("tree_chain", f"first={other}"),
        url("entry", f"id={tip}"),
        url("entry", f"id={compaction}&raw=1"),
        url("transcript"),
        url("transcript", f"leaf={summary}"),
        url("transcript", "leaf=no-such-entry"),  # a warning for the next page, no row
        url("context"),
        url("context", f"leaf={edit}"),
        url("compactions"),
        url("compactions", f"c={compaction}"),
        url("compactions", f"leaf={summary}&b={summary}"),
        url("compare", f"a={tip}&b={other}"),
        url("timeline"),
        url("timeline", f"leaf={other}"),
        url("session_search", "q=file"),
        url("session_search_count", "q=file"),
        url("integrity"),
        url("integrity", "section=tools"),
        url("live"),
        url("review"),
        url("session_secrets"),
        url("session_stats"),
        url("problems"),
    ]
    pages: list[str] = []
    for page in tabs:
        join = "&" if "?" in page else "?"
        pages += [page, page + join + "format=json"]
    pages += [
        url("export"),
        url("export", "archived=without"),
        url("branch_download", f"leaf={other}"),
        url("export_html"),
        url("export_html", "scope=tree"),
        url("export_atif"),
        url("export_size"),
        url("edit", f"target={tip}"),
        url("label", f"target={tip}"),
        url("rename"),
        url("navigate", f"target={other}"),
        url("compact"),
        url("session_shares"),
        reverse("explorer:session_list"),
        reverse("explorer:session_list") + "?format=json",
        reverse("explorer:search") + "?q=file",
        reverse("explorer:secrets"),
        reverse("explorer:audit"),
        reverse("explorer:shares"),
    ]
    return pages


def _read_everything(client: Client, session: Session) -> list[str]:
    """GET every page (whole and as its htmx partial), cold; the writes it made."""
    pages = _pages(session)
    _cold()
    found: list[str] = []
    for page in pages:
        for headers in ({}, {"HX-Request": "true"}):
            with recorded_writes() as writes:
                response = client.get(page, headers=headers)
                assert response.status_code < 400, (page, response.status_code)
                if hasattr(response, "streaming_content"):
                    b"".join(response.streaming_content)
                shared_copies.flush()  # what is written after the answer is counted too
            found += [f"{page} {sorted(headers)}: {sql[:120]}" for sql in writes]
    return found


def _append_more(session: Session, user) -> None:
    """More than STORE_LAG entries through the append paths a writer uses (followed lines,
    a label, a context edit, a turn's message), so every stored copy is behind."""
    tip = queries.default_leaf_id(session)
    lines, ids = _chain(tip, stored_figures.STORE_LAG + 20, "zz")
    assert services.append_lines_verbatim(session, lines, ids, source="test") == len(ids)
    session.refresh_from_db()
    services.set_label(session, user, ids[-3], "after the append", leaf_id=ids[-1])
    session.refresh_from_db()
    services.add_context_edit(
        session, user, ids[-5], None, leaf_id=queries.default_leaf_id(session)
    )
    session.refresh_from_db()
    services.append_message(
        session, user, _user("one more"), leaf_id=queries.default_leaf_id(session)
    )
    session.refresh_from_db()


def test_no_get_writes_a_row_before_or_after_an_append(big_session, admin_client, admin_user):
    session = big_session
    writes = _read_everything(admin_client, session)
    assert not writes, "\n".join(writes)
    _append_more(session, admin_user)
    # The appends stored the figures again (they were STORE_LAG behind): the readers below
    # load copies at most STORE_LAG positions old.
    last = queries.last_position(session)
    stored = stored_figures.positions(session)
    assert last - stored["skeleton"] < stored_figures.STORE_LAG
    assert last - stored["integrity-report"] < stored_figures.STORE_LAG
    writes = _read_everything(admin_client, session)
    assert not writes, "after the append:\n" + "\n".join(writes)


def test_a_share_links_pages_write_only_their_view_log(big_session, admin_user):
    session = big_session
    link = shares.create(session, user=admin_user)
    reader = Client()
    base = link.path
    tabs = ["", "transcript/", "context/", "compactions/", "timeline/", "integrity/", "compare/"]
    _cold()
    with recorded_writes() as writes:
        for tab in tabs:
            response = reader.get(f"{base}sessions/{session.pk}/{tab}")
            assert response.status_code == 200, (tab, response.status_code)
            shared_copies.flush()
    assert writes, "a share page logs its view"
    assert [sql for sql in writes if not SHARE_LOG.match(sql)] == []
