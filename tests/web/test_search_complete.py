"""Search finds every hit: a word planted in N of M sessions returns exactly those N, every
hit counted and reachable page by page, including words that also occur in JSON keys
("cache" is in every assistant's ``cacheRead``), and entries appended later."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from explorer import queries, services

M_SESSIONS = 12
PLANTED = {1, 2, 4, 5, 7, 9, 11}  # the N sessions that contain the word in their text
HITS_PER_SESSION = 9  # 7 × 9 = 63 hits: more than one page of 50


def _session_bytes(n: int, word: str, planted: bool) -> bytes:
    lines: list[dict] = [
        {
            "type": "session",
            "version": 3,
            "id": f"0195f3a2-7c41-7d2e-9b1a-{n:012d}",
            "timestamp": "2025-03-04T05:06:07.089Z",
            "cwd": f"/home/ana/s{n}",
        }
    ]
    parent = None
    for k in range(20):
        eid = f"s{n:02d}e{k:03d}"
        if k % 2 == 0:
            text = (
                f'please "{word}" that, then say "done"\nturn {k}'
                if (planted and k < 2 * HITS_PER_SESSION)
                else f"ordinary turn {k} of session {n}"
            )
            message = {"role": "user", "content": text, "timestamp": 1741064768000 + k}
        else:
            message = {
                "role": "assistant",
                "content": [{"type": "text", "text": f"reply {k}"}],
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "usage": {
                    "input": 10,
                    "output": 5,
                    "cacheRead": 3,
                    "cacheWrite": 0,
                    "totalTokens": 18,
                    "cost": {"total": 0.001},
                },
                "stopReason": "stop",
                "timestamp": 1741064768000 + k,
            }
        lines.append(
            {
                "type": "message",
                "id": eid,
                "parentId": parent,
                "timestamp": "2025-03-04T05:06:08.000Z",
                "message": message,
            }
        )
        parent = eid
    return ("\n".join(json.dumps(x) for x in lines) + "\n").encode()


@pytest.fixture
def sessions(make_session):
    def make(word: str):
        return [make_session(_session_bytes(n, word, n in PLANTED)) for n in range(M_SESSIONS)]

    return make


@pytest.mark.parametrize("word", ["cache", "zebrafish", "Cache"])
def test_a_planted_word_returns_exactly_its_sessions_across_pages(viewer_client, sessions, word):
    stored = sessions(word.lower())
    expected = {stored[n].session_id for n in PLANTED}
    url = reverse("explorer:search") + "?" + f"q={word}&format=json"
    first = viewer_client.get(url).json()
    assert first["total"] == len(PLANTED) * HITS_PER_SESSION
    assert {s["session"] for s in first["sessions"]} == expected
    assert all(s["hits"] == HITS_PER_SESSION for s in first["sessions"])
    assert first["capped"] is True and first["next"]
    seen = []
    page = first
    while True:
        seen += [(r["session"], r["entry_id"]) for r in page["results"]]
        if not page["next"]:
            assert page["capped"] is False
            break
        page = viewer_client.get(page["next"]).json()
    assert len(seen) == len(set(seen)) == first["total"]
    assert {s for s, _ in seen} == expected


def test_the_page_counts_every_hit_and_links_the_next_page(viewer_client, sessions):
    sessions("cache")
    r = viewer_client.get(reverse("explorer:search"), {"q": "cache"})
    html = r.content.decode()
    assert "<strong>63</strong> hits in <strong>7</strong> sessions" in html
    assert "showing 1–50" in html and 'id="search-next"' in html
    second = viewer_client.get(reverse("explorer:search"), {"q": "cache", "offset": "50"})
    assert "showing 51–63" in second.content.decode()
    assert 'id="search-next"' not in second.content.decode()


def test_snippets_are_text_not_json_escapes(viewer_client, sessions):
    sessions("cache")
    data = viewer_client.get(reverse("explorer:search"), {"q": "cache", "format": "json"}).json()
    snippet = data["results"][0]["snippet"]
    assert 'please "cache" that, then say "done" turn 0' in snippet
    assert "\\" not in snippet
    page = viewer_client.get(reverse("explorer:search"), {"q": "cache"}).content.decode()
    assert "please &quot;<mark>cache</mark>&quot; that" in page


def test_an_appended_entry_is_found_at_once(viewer_client, editor_user, sessions):
    stored = sessions("cache")
    quiet = stored[0]  # has no "cache" in its text
    assert queries.search_entries("cache", session=quiet)["total"] == 0
    services.set_label(quiet, editor_user, "s00e004", "cache warm-up point", leaf_id="s00e019")
    data = viewer_client.get(
        reverse("explorer:session_search", args=[quiet.pk]),
        {"q": "cache", "type": "label", "format": "json"},
    ).json()
    assert data["total"] == 1 and data["results"][0]["type"] == "label"


def test_two_character_queries_scan_the_same_index(viewer_client, sessions):
    stored = sessions("qx")
    data = viewer_client.get(reverse("explorer:search"), {"q": "QX", "format": "json"}).json()
    assert {s["session"] for s in data["sessions"]} == {stored[n].session_id for n in PLANTED}


def test_the_index_follows_deletes(viewer_client, admin_user, sessions):
    from django.db import connection

    from explorer.models import EntryText

    stored = sessions("cache")
    planted = stored[1]

    def fts_hits() -> int:
        with connection.cursor() as cur:
            cur.execute(
                "SELECT count(*) FROM explorer_entrytext_fts WHERE text LIKE %s", ["%cache%"]
            )
            return cur.fetchone()[0]

    before = EntryText.objects.count()
    if connection.vendor == "sqlite":  # the FTS5 index itself holds every planted hit
        assert fts_hits() == len(PLANTED) * HITS_PER_SESSION
    services.delete_session(planted, admin_user)
    assert EntryText.objects.count() == before - 20
    if connection.vendor == "sqlite":  # and the delete trigger took the session's rows out
        assert fts_hits() == (len(PLANTED) - 1) * HITS_PER_SESSION
    data = viewer_client.get(reverse("explorer:search"), {"q": "cache", "format": "json"}).json()
    assert data["total"] == (len(PLANTED) - 1) * HITS_PER_SESSION
    assert planted.session_id not in {s["session"] for s in data["sessions"]}


def test_wildcards_are_plain_characters(viewer_client, make_session):
    lines = _session_bytes(0, "100%_done", True)
    make_session(lines)
    make_session(_session_bytes(1, "100xxdone", True))
    data = viewer_client.get(reverse("explorer:search"), {"q": "100%_done", "format": "json"})
    assert data.json()["total"] == HITS_PER_SESSION
    assert len(data.json()["sessions"]) == 1
