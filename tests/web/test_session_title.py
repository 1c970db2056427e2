"""One title per session everywhere: the session list's rule (its name; else its first user
message and its file) on the session page, the page title, import results, search's hits
per session and the JSON ``name``, never an id prefix that many sessions share."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from explorer import services
from explorer.models import Session

pytestmark = pytest.mark.django_db

SID = "019b76ea-7c41-7d2e-9b1a-00000000aaaa"
TITLE = "Fix the parser for nested quotes · 2025-03-05T05-06-07-089Z_aaaa.jsonl"


def _unnamed(sid: str = SID, first: str = "Fix the parser for nested quotes") -> bytes:
    header = {"type": "session", "version": 3, "id": sid, "timestamp": "2025-03-05T05:06:07.089Z",
              "cwd": "/home/ana/other"}  # fmt: skip
    user = {"type": "message", "id": "u1", "parentId": None, "timestamp": "2025-03-05T05:06:08.000Z",
            "message": {"role": "user", "content": first, "timestamp": 1741151168000}}  # fmt: skip
    return (json.dumps(header) + "\n" + json.dumps(user) + "\n").encode()


@pytest.fixture
def unnamed(make_session):
    return make_session(_unnamed(), source_path="/pi/--x--/2025-03-05T05-06-07-089Z_aaaa.jsonl")


def test_the_session_page_and_its_tabs_carry_the_lists_title(viewer_client, unnamed):
    assert unnamed.display_name == TITLE
    for name in ("session_detail", "transcript", "context", "timeline"):
        html = viewer_client.get(reverse(f"explorer:{name}", args=[unnamed.pk])).content.decode()
        assert f'<h1 id="session-name">{TITLE}</h1>' in html, name
        assert "Session 019b76ea" not in html
    listed = viewer_client.get(reverse("explorer:session_list")).content.decode()
    assert "Fix the parser for nested quotes" in listed and "Session 019b76ea" not in listed


def test_the_json_name_and_search_hits_per_session_use_the_title(viewer_client, unnamed):
    data = viewer_client.get(reverse("explorer:session_list"), {"format": "json"}).json()
    assert [s["name"] for s in data["sessions"]] == [TITLE]
    found = viewer_client.get(reverse("explorer:search"), {"q": "nested", "format": "json"}).json()
    assert [s["session_name"] for s in found["sessions"]] == [TITLE]
    assert found["results"][0]["session_name"] == TITLE
    html = viewer_client.get(reverse("explorer:search"), {"q": "nested"}).content.decode()
    assert TITLE in html and "Session 019b76ea" not in html


def test_two_unnamed_sessions_with_one_id_prefix_get_two_titles(make_session):
    a = make_session(_unnamed(), source_path="/p/a.jsonl")
    b = make_session(
        _unnamed(SID.replace("aaaa", "bbbb"), "Write the docs"), source_path="/p/b.jsonl"
    )
    assert a.display_name != b.display_name
    assert {a.display_name, b.display_name} == {
        "Fix the parser for nested quotes · a.jsonl",
        "Write the docs · b.jsonl",
    }


def test_a_name_wins_and_a_session_without_message_or_file_shows_its_whole_id(make_session):
    s = make_session(_unnamed(), source_path="/p/a.jsonl")
    services.rename_session(s, None, "Parser work")
    assert Session.objects.get(pk=s.pk).display_name == "Parser work"
    header = {"type": "session", "version": 3, "id": SID.replace("aaaa", "cccc"), "cwd": "/x",
              "timestamp": "2025-03-05T05:06:07.089Z"}  # fmt: skip
    bare = make_session((json.dumps(header) + "\n").encode())
    assert bare.display_name == f"Session {SID.replace('aaaa', 'cccc')}"


def test_import_results_name_the_session_by_its_title(admin_client):
    upload = SimpleUploadedFile("2025-03-05T05-06-07-089Z_aaaa.jsonl", _unnamed())
    html = admin_client.post(reverse("explorer:import"), {"files": upload}).content.decode()
    assert "Open “Fix the parser for nested quotes · 2025-03-05T05-06-07-089Z_aaaa.jsonl”" in html


def test_the_list_shows_no_server_path(viewer_client, make_session):
    make_session(
        _unnamed(), source_path="/srv/pi/sessions/--x--/2025-03-05T05-06-07-089Z_aaaa.jsonl"
    )
    html = viewer_client.get(reverse("explorer:session_list")).content.decode()
    assert "2025-03-05T05-06-07-089Z_aaaa.jsonl" in html and "/srv/pi/sessions" not in html
