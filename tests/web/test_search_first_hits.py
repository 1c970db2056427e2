"""A big session's first search of a word lists its first hits before counting them all.

Counting means matching every hit (a common word has 20,000 in a big session); the first
page needs 50. The page therefore shows its first hits with "more than 50" and asks for the
count afterwards. What it lists must be exactly the first page of the counted search, and the
count exactly every hit: these tests hold the quick way to the exact one."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from explorer import files, queries
from explorer.models import EntryText, Session
from tests.web import crafted
from tests.web.crafted import EPOCH_MS

HITS = 130  # more than two pages of 50


def _session_bytes(hits: int = HITS, tag: str = "1") -> bytes:
    """A session whose user messages say "fix" ``hits`` times among others that do not, some
    in upper case."""
    entries: list[dict] = []
    parent = None
    for k in range(hits * 2):
        eid = f"f{tag}{k:05d}"
        text = f"step {k}: " + (
            ("FIX the bug" if k % 7 == 0 else "fix it") if k % 2 else "all good"
        )
        entries.append(crafted.message(eid, parent, "user", text, k % 60, ms=EPOCH_MS + k))
        parent = eid
    head = crafted.header(f"0195f3a2-7c41-7d2e-9b1a-5ea2c000000{tag}", cwd="/home/ana/first")
    return crafted.session_bytes(head, entries)


def _say(session: Session, text: str, k: int) -> Session:
    from explorer import services

    message = {"role": "user", "content": text, "timestamp": 1741064900000 + k}
    result = services.append_message(session, None, message, source="test")
    assert result.entry is not None
    return Session.objects.get(pk=session.pk)


@pytest.fixture
def big(monkeypatch):
    """Every session counts as big: its search asks the index, and counting is deferred."""
    monkeypatch.setattr(queries.search, "SEARCH_SCAN_ENTRIES", -1)


@pytest.mark.django_db
def test_the_first_hits_are_the_counted_searchs_first_hits(make_session, big):
    session = make_session(_session_bytes())
    other = make_session(_session_bytes(40, tag="2"))
    # The other session's rows come to lie inside this session's id span.
    for k in range(3):
        other = _say(other, f"fix in the other session {k}", k)
        session = _say(session, f"a later fix {k}", 10 + k)
    every = queries.session_hit_ids("fix", session)
    assert len(every) == HITS + 3
    for n in (1, 2, 49, 50, 51, 100, HITS + 2, HITS + 3, HITS + 10):
        assert queries._first_hit_ids("fix", session, "", n) == every[:n]
    assert queries._first_hit_ids("nowhere", session, "", 51) == []
    only = queries.session_hit_ids("FIX", session, "message")
    assert queries._first_hit_ids("FIX", session, "message", 60) == only[:60]
    assert queries._first_hit_ids("fix", session, "compaction", 60) == []


@pytest.mark.django_db
def test_a_big_sessions_page_lists_first_and_counts_after(make_session, big, viewer_client):
    session = make_session(_session_bytes())
    cache.clear()
    url = reverse("explorer:session_search", args=[session.pk])
    with CaptureQueriesContext(connection) as seen:
        page = viewer_client.get(url, {"q": "fix"}).content.decode()
    if connection.vendor == "sqlite":  # the index walked only as far as the page's hits
        walks = [q["sql"] for q in seen.captured_queries if "_fts" in q["sql"]]
        assert walks and all("LIMIT 51" in sql for sql in walks)
    assert "More than 50</strong> hits · showing 1–50" in page
    assert queries.session_hit_ids("fix", session, compute=False) is None  # nothing counted
    listed = re.findall(r'result-link" href="[^"]*\?entry=([^&]+)', page)
    exact = queries.search_entries("fix", session=session, exact=True)
    assert listed == [h["entry_id"] for h in exact["hits"]]
    cache.clear()
    # The count the page asks for: every hit, and kept for the next pages.
    m = re.search(r'hx-get="([^"]+)" hx-trigger="load"', page)
    assert m, page
    count = viewer_client.get(m.group(1).replace("&amp;", "&")).content.decode()
    assert f"<strong>{HITS}</strong> hits in <strong>1</strong> session" in count
    assert 'id="search-count"' in count and "<html" not in count
    assert len(queries.session_hit_ids("fix", session, compute=False)) == HITS
    # Once counted, the page (drawn again for the same version) shows the count at once.
    again = viewer_client.get(url, {"q": "fix"}).content.decode()
    assert f"<strong>{HITS}</strong> hits" in again and "More than" not in again
    # The next pages read the kept hits; the last one has no next link.
    last = viewer_client.get(url, {"q": "fix", "offset": 100}).content.decode()
    assert "showing 101–130" in last and 'id="search-next"' not in last


@pytest.mark.django_db
def test_a_cold_next_page_and_the_no_script_link(make_session, big, viewer_client):
    session = make_session(_session_bytes())
    cache.clear()
    url = reverse("explorer:session_search", args=[session.pk])
    second = viewer_client.get(url, {"q": "fix", "offset": 50}).content.decode()
    assert "More than 100</strong> hits · showing 51–100" in second
    assert 'id="search-next"' in second and "Previous hits" in second
    cache.clear()
    third = viewer_client.get(url, {"q": "fix", "offset": 100}).content.decode()
    # The page reached the last hit: its count is exact without asking.
    assert f"<strong>{HITS}</strong> hits" in third and "More than" not in third
    assert 'id="search-next"' not in third
    cache.clear()
    counted = viewer_client.get(url, {"q": "fix", "exact": "1"}).content.decode()
    assert f"<strong>{HITS}</strong> hits" in counted


@pytest.mark.django_db
def test_few_hits_and_no_hits_are_counted_at_once(make_session, big, viewer_client):
    session = make_session(_session_bytes())
    url = reverse("explorer:session_search", args=[session.pk])
    cache.clear()
    few = viewer_client.get(url, {"q": "FIX the"}).content.decode()
    n = len(queries.session_hit_ids("FIX the", session))
    assert 0 < n < 50 and f"<strong>{n}</strong> hits" in few and "More than" not in few
    cache.clear()
    none = viewer_client.get(url, {"q": "nowhere at all"}).content.decode()
    assert "No match for “nowhere at all”." in none


@pytest.mark.django_db
def test_the_json_answer_lists_first_and_counts_on_request(make_session, big, viewer_client):
    """Like the page: the first hits at once, ``total`` null with the counted answer's
    address; that address (``exact=1``) counts every hit, and the same question asked again
    is counted from the kept hits."""
    session = make_session(_session_bytes())
    cache.clear()
    url = reverse("explorer:session_search", args=[session.pk])
    first = viewer_client.get(url, {"q": "fix", "format": "json"}).json()
    assert first["total"] is None and len(first["results"]) == 50 and first["next"]
    assert "exact=1" in first["exact"] and "format=json" in first["exact"]
    counted = viewer_client.get(first["exact"]).json()
    assert counted["total"] == HITS and counted["exact"] is None
    assert [r["entry_id"] for r in counted["results"]] == [r["entry_id"] for r in first["results"]]
    again = viewer_client.get(url, {"q": "fix", "format": "json"}).json()
    assert again["total"] == HITS


@pytest.mark.django_db
def test_a_small_session_is_counted_with_its_first_page(make_session, viewer_client):
    session = make_session(_session_bytes())
    assert session.entry_count <= queries.SEARCH_SCAN_ENTRIES
    cache.clear()
    url = reverse("explorer:session_search", args=[session.pk])
    page = viewer_client.get(url, {"q": "fix"}).content.decode()
    assert f"<strong>{HITS}</strong> hits" in page and 'hx-trigger="load"' not in page


@pytest.mark.django_db
def test_search_rows_out_of_file_order_are_refused(make_session):
    session = make_session(_session_bytes(3))
    before = EntryText.objects.filter(session=session).count()
    rows = [
        (session.pk, "late", 900, "message", "user", "fix late"),
        (session.pk, "early", 800, "message", "user", "fix early"),
    ]
    with pytest.raises(ValueError, match="file order"):
        files.store_search_rows(rows)
    assert EntryText.objects.filter(session=session).count() == before
