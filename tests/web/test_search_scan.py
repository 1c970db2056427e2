"""A small session's search scans its own rows; a big one's asks the index. Both must find
exactly the same hits, whatever the letters: the scan exists only to spare a small session
the whole corpus's index match, never to change what a search finds."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from explorer import queries
from explorer.models import EntryText

TEXTS = [
    "Ärger im Büro, ärger noch",
    "ÄRGER",
    "abc FIX def",
    "fixture fix-up Fixing",
    "straße",
    "STRASSE and Strasse",
    "İstanbul istanbul ISTANBUL",
    "ǅemal ǆ Ǆ",
    "ΣΊΣΥΦΟΣ σίσυφος",
    "emoji 🙂 here 🙂🙂",
    "100% done_with a\\back slash",
    "日本語のテキスト",
    "tab\tand\nnew line",
]
QUERIES = [
    "ärger",
    "Ärger",
    "ÄRG",
    "fix",
    "FIX",
    "Fix",
    "strasse",
    "ß",
    "İstanbul",
    "istanbul",
    "ǆ",
    "σίσυφος",
    "ΣΊΣ",
    "🙂",
    "🙂🙂",
    "100%",
    "done_with",
    "a\\back",
    "日本",
    "テキスト",
    "and new",
    "nowhere at all",
    "ix",
]


def _session_bytes() -> bytes:
    lines: list[dict] = [
        {
            "type": "session",
            "version": 3,
            "id": "0195f3a2-7c41-7d2e-9b1a-5ea2c0000001",
            "timestamp": "2025-03-04T05:06:07.089Z",
            "cwd": "/home/ana/scan",
        }
    ]
    parent = None
    for k, text in enumerate(TEXTS):
        eid = f"scan{k:04d}"
        lines.append(
            {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": "2025-03-04T05:06:08.000Z",
                "message": {"role": "user", "content": text, "timestamp": 1741064768000 + k},
            }
        )
        parent = eid
    return ("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n").encode()


def _hits(query: str, session) -> list[str]:
    return sorted(queries._text_matches(query, session).values_list("entry_id", flat=True))


@pytest.mark.django_db
def test_the_scan_and_the_index_find_the_same_hits(make_session, monkeypatch):
    session = make_session(_session_bytes())
    make_session()  # another session in the corpus, whose rows neither way may return
    monkeypatch.setattr(queries.search, "SEARCH_SCAN_ENTRIES", 10**9)
    scanned = {q: _hits(q, session) for q in QUERIES}
    monkeypatch.setattr(queries.search, "SEARCH_SCAN_ENTRIES", -1)
    indexed = {q: _hits(q, session) for q in QUERIES}
    assert scanned == indexed
    # The comparison means something: hits were found, with ASCII case folded and the
    # other letters as written.
    assert scanned["fix"] == scanned["FIX"] == ["scan0002", "scan0003"]
    assert scanned["Ärger"] == ["scan0000", "scan0001"]
    assert scanned["🙂🙂"] == ["scan0009"]
    assert scanned["nowhere at all"] == []
    # Two CJK characters or one emoji: fewer than three characters, which the trigram index
    # answered with nothing (not even a scan) before queries that short were scanned.
    assert indexed["日本"] == ["scan0011"]
    assert indexed["🙂"] == ["scan0009"]


@pytest.mark.django_db
def test_the_search_page_finds_two_cjk_characters_across_sessions(viewer_client, make_session):
    from django.urls import reverse

    make_session(_session_bytes())
    make_session()
    r = viewer_client.get(reverse("explorer:search"), {"q": "日本"})
    assert r.status_code == 200
    assert "<mark>日本</mark>語のテキスト" in r.content.decode()
    assert "No matches" not in r.content.decode()


@pytest.mark.django_db
def test_a_small_session_is_searched_without_the_corpus_index(make_session, monkeypatch):
    from django.core.cache import cache

    session = make_session(_session_bytes())
    assert session.entry_count <= queries.SEARCH_SCAN_ENTRIES
    with CaptureQueriesContext(connection) as small:
        found = queries.search_entries("fix", session=session)
    assert found["total"] == 2
    assert not any("_fts" in q["sql"] for q in small.captured_queries)
    monkeypatch.setattr(queries.search, "SEARCH_SCAN_ENTRIES", -1)
    cache.clear()  # the kept hits of the first search would answer
    with CaptureQueriesContext(connection) as big:
        assert queries.search_entries("fix", session=session)["total"] == 2
    if connection.vendor == "sqlite":
        assert any("_fts" in q["sql"] for q in big.captured_queries)


@pytest.mark.django_db
def test_find_in_route_uses_the_same_matching(make_session, monkeypatch):
    session = make_session(_session_bytes())
    leaf = queries.default_leaf_id(session)
    monkeypatch.setattr(queries.search, "SEARCH_SCAN_ENTRIES", 10**9)
    scanned = queries.route_find(session, leaf, "Strasse")
    monkeypatch.setattr(queries.search, "SEARCH_SCAN_ENTRIES", -1)
    assert queries.route_find(session, leaf, "Strasse") == scanned == ["scan0005"]


def _append_text(session, text: str) -> None:
    from explorer import services

    leaf = queries.default_leaf_id(session)
    services.append_message(session, None, {"role": "user", "content": text}, leaf_id=leaf)


@pytest.mark.django_db
def test_a_session_search_is_kept_per_version_and_sees_an_append(make_session):
    from django.core.cache import cache

    session = make_session(_session_bytes())
    cache.clear()
    first = queries.search_entries("fix", session=session)
    with CaptureQueriesContext(connection) as again:
        repeated = queries.search_entries("fix", session=session)
    assert [h["entry_id"] for h in repeated["hits"]] == [h["entry_id"] for h in first["hits"]]
    assert repeated["total"] == first["total"] == 2
    # The kept ids answer: no text match runs again, only the page's rows are read by id.
    assert not any("LIKE" in q["sql"] for q in again.captured_queries)
    _append_text(session, "one more fix here")
    grown = queries.search_entries("fix", session=session)
    assert grown["total"] == 3
    assert "one more fix here" in [h["text"] for h in grown["hits"]]


@pytest.mark.django_db
def test_session_search_pages_follow_file_order(make_session):
    session = make_session(_session_bytes())
    for k in range(7):
        _append_text(session, f"paged fix number {k}")
    seen = []
    offset = 0
    while offset is not None:
        found = queries.search_entries("fix", session=session, offset=offset, limit=3)
        assert found["total"] == 9
        seen += [h["text"] for h in found["hits"]]
        offset = found["next_offset"]
    assert seen[:2] == [TEXTS[2], TEXTS[3]]
    assert seen[2:] == [f"paged fix number {k}" for k in range(7)]


def _say(session, text: str, k: int):
    from explorer import services
    from explorer.models import Session

    message = {"role": "user", "content": text, "timestamp": 1741064900000 + k}
    result = services.append_message(session, None, message, source="test")
    assert result.entry is not None and result.entry.type == "message"
    return Session.objects.get(pk=session.pk)


@pytest.mark.django_db
def test_after_an_append_only_the_new_entries_are_matched(make_session, monkeypatch):
    monkeypatch.setattr(queries.search, "SEARCH_SCAN_ENTRIES", -1)  # the big-session way: the index
    session = make_session(_session_bytes())
    make_session()
    first = queries.search_entries("fix", session=session)
    assert first["total"] == 2
    grown = session
    additions = ["a new FIX here", "nothing to see", "fixed again, and fix", "ärger fix"]
    for k, text in enumerate(additions):
        grown = _say(grown, text, k)
        with CaptureQueriesContext(connection) as seen:
            kept = queries.session_hit_ids("fix", grown)
        if connection.vendor == "sqlite":  # the new rows scanned, not the corpus index asked
            assert not any("_fts" in q["sql"] for q in seen.captured_queries)
        fresh = queries._hit_ids("fix", grown, "", -1, queries.last_position(grown), scan=False)
        assert kept == fresh
    texts = queries.search_entries("fix", session=grown)
    assert texts["total"] == 2 + 3
    assert [h["entry_id"] for h in texts["hits"]] == list(
        EntryText.objects.filter(id__in=kept)
        .order_by("position")
        .values_list("entry_id", flat=True)
    )
    # a type filter is kept on its own, and extended the same way
    only_users = queries.search_entries("fix", session=grown, entry_type="message")
    assert only_users["total"] == 5
    grown = _say(grown, "last fix", 9)
    assert queries.search_entries("fix", session=grown, entry_type="message")["total"] == 6
    assert queries.search_entries("FIX", session=grown)["total"] == 6


@pytest.mark.django_db
def test_the_index_is_asked_for_the_sessions_own_rows_only(make_session, monkeypatch):
    """The trigram index answers for the corpus; a session's search bounds it by the
    session's text row ids, and rows of a session stored in between are still left out."""
    from django.core.cache import cache

    from tests.web import crafted

    monkeypatch.setattr(queries.search, "SEARCH_SCAN_ENTRIES", -1)
    session = make_session(_session_bytes())
    other = make_session()
    _append_text(other, "fix in the other session")
    between = _say(session, "a fix after the other session's rows", 1)
    lo, hi = queries._text_id_span(between)
    others = EntryText.objects.filter(session=other).values_list("id", flat=True)
    assert lo < min(others) and max(others) < hi  # the other session's rows lie inside

    def asked_index() -> list[str]:
        cache.clear()
        with CaptureQueriesContext(connection) as seen:
            found = queries.search_entries("fix", session=between)
        assert found["total"] == 3
        assert {h["session"].pk for h in found["hits"]} == {session.pk}
        return [q["sql"] for q in seen.captured_queries if "_fts" in q["sql"]]

    # The session spans most of the corpus: the bound would only slow the index down.
    wide = asked_index()
    # A later, bigger session: now the bound keeps most of the corpus out.
    entries = [
        crafted.message(f"c{k}", f"c{k - 1}" if k else None, "user", "fix", k) for k in range(60)
    ]
    crafted.imported(crafted.session_bytes(crafted.header(_LATER), entries), "later.jsonl")
    assert hi - lo < queries._text_id_span(None)[1] // 2
    bounded = asked_index()
    if connection.vendor == "sqlite":
        assert wide and not any("rowid BETWEEN" in q for q in wide)
        assert bounded and all("rowid BETWEEN" in q for q in bounded)
    assert queries._text_id_span(type(session)(pk=10**9)) == (0, -1)


_LATER = "7f4e9d0a-3b5c-4e8d-9f2a-9c0d1e2f3a4b"
