"""``?format=json`` on every page: same login and roles, the same builder's figures as the
page, JSON ``null`` (never Python ``None``), and a session list without a request per row."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from explorer import queries
from explorer.models import Session

TAB_PAGES = [
    ("explorer:session_detail", {}),
    ("explorer:entry", {"id": "b2c3d4e5"}),
    ("explorer:context", {}),
    ("explorer:compactions", {}),
    ("explorer:compare", {"a": "d4e5f6a7", "b": "e5f6a7b8"}),
    ("explorer:timeline", {}),
    ("explorer:session_search", {"q": "demo"}),
    ("explorer:integrity", {}),
]


@pytest.fixture
def session(make_session):
    return make_session()


@pytest.mark.parametrize(("name", "params"), TAB_PAGES)
def test_every_tab_answers_json_to_viewers_only(viewer_client, norole_user, session, name, params):
    url = reverse(name, args=[session.pk])
    r = viewer_client.get(url, {**params, "format": "json"})
    assert r.status_code == 200
    assert r["Content-Type"].startswith("application/json")
    data = json.loads(r.content)
    assert isinstance(data, dict) and data
    assert "None" not in r.content.decode().replace('"None"', "")
    anonymous = Client().get(url, {**params, "format": "json"})
    assert anonymous.status_code in (302, 403) and not anonymous["Content-Type"].startswith(
        "application/json"
    )
    c = Client()
    c.force_login(norole_user)
    assert c.get(url, {**params, "format": "json"}).status_code in (403, 404)


def test_the_session_list_json_and_page_show_the_same_cumulative_usage(viewer_client, session):
    data = viewer_client.get(reverse("explorer:session_list"), {"format": "json"}).json()
    row = next(s for s in data["sessions"] if s["id"] == session.session_id)
    assert row["default_path_usage"] == queries.default_path_totals(session)
    assert row["default_path_usage"]["tokens"] == 1240 + 1312
    html = viewer_client.get(reverse("explorer:session_list")).content.decode()
    assert "Default path usage" in html and "not the context size" in html
    assert "2,552" in html
    assert "session_stats" not in html and "/stats/" not in html  # no request per row


def test_the_session_list_costs_the_same_queries_for_2_or_6_sessions(viewer_client, make_session):
    from tests.conftest import SMALL_SESSION

    def add(n: int) -> None:
        for i in range(n):
            make_session(SMALL_SESSION.replace(b"3c5d7e9f1a2b", f"{i:012d}".encode(), 1))

    assert Session.objects.count() == 0

    def count() -> int:
        url = reverse("explorer:session_list")
        viewer_client.get(url)  # warm the per-version cache
        with CaptureQueriesContext(connection) as ctx:
            assert viewer_client.get(url).status_code == 200
        return len(ctx.captured_queries)

    add(2)
    two = count()
    for i in range(4):
        make_session(SMALL_SESSION.replace(b"3c5d7e9f1a2b", f"{100 + i:012d}".encode(), 1))
    assert count() == two


def test_integrity_json_says_null_and_lists_import_warnings(viewer_client, make_session):
    from tests.conftest import SMALL_SESSION

    dangling = SMALL_SESSION + (
        b'{"type":"message","id":"ffff0001","parentId":"gone0000","timestamp":'
        b'"2025-03-04T05:11:00.000Z","message":{"role":"user","content":"orphan","timestamp":1}}\n'
    )
    session = make_session(dangling)
    r = viewer_client.get(reverse("explorer:integrity", args=[session.pk]), {"format": "json"})
    body = r.content.decode()
    assert "None" not in body
    data = r.json()
    found = [i for s in data["sections"] for i in s["items"]]
    assert any(i["id"] == "ffff0001" for i in found)
    assert data["total"] == len(found) + len(data["tools"])
    assert isinstance(data["import_problems"], list)


def test_tree_and_timeline_json_cover_the_whole_route(viewer_client, session):
    tree = viewer_client.get(
        reverse("explorer:session_detail", args=[session.pk]), {"format": "json"}
    ).json()
    assert len(tree["nodes"]) == session.entry_count
    on_route = [n["id"] for n in tree["nodes"] if n["on_route"]]
    assert on_route == [e.entry_id for e in queries.light_path(session, tree["cursor"])]
    timeline = viewer_client.get(
        reverse("explorer:timeline", args=[session.pk]), {"format": "json"}
    ).json()
    assert timeline["turns"] == len(timeline["points"]) > 0
    assert timeline["path_length"] == len(on_route)


# Session URLs that are files or pieces of a page rather than pages: each answers in its own
# format (a download, an image, an htmx fragment), which is why it is no page's JSON.
NOT_PAGES = {
    "export": "the session as a JSONL download",
    "branch_download": "a route as a JSONL download",
    "export_html": "the single-file HTML export",
    "graph_svg": "the Tree tab's graph as an SVG image",
    "tree_chain": "rows of a folded chain, an htmx fragment of the Tree tab",
    "session_search_count": "the count of a search, an htmx fragment of the Search tab",
}
# What a page needs in its query string to show anything (an entry it is about).
PAGE_PARAMS = {
    "entry": {"id": "b2c3d4e5"},
    "compare": {"a": "d4e5f6a7", "b": "e5f6a7b8"},
    "session_search": {"q": "demo"},
    "review_entry": {"entry": "b2c3d4e5"},
    "edit": {"target": "d4e5f6a7"},
    "label": {"target": "d4e5f6a7"},
    "navigate": {"target": "b2c3d4e5"},
}


def _session_patterns():
    from explorer import urls

    for pattern in urls.urlpatterns:
        route = str(pattern.pattern)
        if "<int:pk>" in route and route.count("<") == 1:  # one session, no other object
            yield pattern.name, pattern.callback


def test_every_session_page_answers_format_json(admin_client, session):
    """Walk every URL pattern of one session: each page a person reads answers
    ``?format=json`` with a JSON object (the README promises it for every page). A page
    that only takes a POST says so with 405; the files and fragments are listed above."""
    walked = []
    for name, _view in _session_patterns():
        if name in NOT_PAGES:
            continue
        url = reverse(f"explorer:{name}", args=[session.pk])
        r = admin_client.get(url, {**PAGE_PARAMS.get(name, {}), "format": "json"})
        if r.status_code == 405:
            continue  # a POST-only action: nothing to read
        if r.status_code == 302 and name == "undo":
            continue  # undo is a POST; a GET goes back to Raw vs projected
        assert r["Content-Type"].startswith("application/json"), (name, r.status_code)
        assert r.status_code == 200, (name, r.content[:300])
        assert isinstance(r.json(), dict) and r.json(), name
        walked.append(name)
    assert {"transcript", "live", "session_secrets", "problems", "session_detail"} <= set(walked)
    assert len(walked) >= 15


def test_global_secrets_answers_json_with_masked_previews(admin_client, session):
    r = admin_client.get(reverse("explorer:secrets"), {"format": "json"})
    assert r["Content-Type"].startswith("application/json")
    data = r.json()
    assert set(data["counts"]) == {"open", "false_positive", "rotated"}
    assert isinstance(data["findings"], list)


def test_transcript_json_lists_the_window_on_the_route(viewer_client, session):
    data = viewer_client.get(
        reverse("explorer:transcript", args=[session.pk]), {"format": "json"}
    ).json()
    on_route = [e.entry_id for e in queries.light_path(session, data["leaf"])]
    assert [e["id"] for e in data["entries"]] == on_route
    assert data["route_length"] == len(on_route)
    assert data["entries"][0]["type"] == "message"


def test_share_lists_answer_json_without_tokens(admin_client, session):
    from explorer import shares
    from explorer.models import ShareLink

    shares.create(session)
    link = ShareLink.objects.get()
    data = admin_client.get(
        reverse("explorer:session_shares", args=[session.pk]), {"format": "json"}
    ).json()
    assert [row["id"] for row in data["links"]] == [link.pk]
    assert data["links"][0]["state"] == "active" and "token" not in str(data)
    everything = admin_client.get(reverse("explorer:shares"), {"format": "json"}).json()
    assert everything["links"][0]["session"] == session.pk
