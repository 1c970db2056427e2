"""Session list: search by first message, sort by activity, default-path totals."""

from __future__ import annotations

from django.urls import reverse

from explorer.queries.listing import default_path_totals


def test_it_searches_by_first_message(viewer_client, make_session):
    s = make_session()
    r = viewer_client.get(reverse("explorer:session_list"), {"q": "summarise it"})
    html = r.content.decode()
    assert r.status_code == 200
    assert s.session_id in html
    assert "Read demo.txt and summarise it" in html  # the first message is shown
    r = viewer_client.get(reverse("explorer:session_list"), {"q": "no such words here"})
    assert s.session_id not in r.content.decode()


def test_it_sorts_and_shows_edit_counts(viewer_client, make_session):
    make_session()
    for sort in ("activity", "created", "entries", "name", "bogus"):
        r = viewer_client.get(reverse("explorer:session_list"), {"sort": sort})
        assert r.status_code == 200
    html = viewer_client.get(reverse("explorer:session_list")).content.decode()
    assert "Last activity" in html and "Edits" in html
    assert "2025-03-04T05:10:00.000Z" in html  # timestamp of the newest entry


def test_it_totals_the_default_path(viewer_client, make_session):
    s = make_session()
    totals = default_path_totals(s)
    # default leaf 1b2c3d4e: path through b2c3d4e5 (1240 tokens) and d4e5f6a7 (1312)
    assert totals["tokens"] == 1240 + 1312
    assert round(totals["cost"], 4) == round(0.0042 + 0.0041, 4)
    r = viewer_client.get(
        reverse("explorer:session_stats", args=[s.pk]), headers={"HX-Request": "true"}
    )
    assert r.status_code == 200
    assert "2,552" in r.content.decode() or "2552" in r.content.decode()


def test_stats_need_a_role(norole_user, make_session):
    from django.test import Client

    s = make_session()
    c = Client()
    c.force_login(norole_user)
    assert c.get(reverse("explorer:session_stats", args=[s.pk])).status_code in (403, 404)


def _unnamed(sid: str, first: str) -> bytes:
    import json

    header = {"type": "session", "version": 3, "id": sid, "timestamp": "2025-03-05T05:06:07.089Z",
              "cwd": "/home/ana/other"}  # fmt: skip
    user = {"type": "message", "id": "u1", "parentId": None, "timestamp": "2025-03-05T05:06:08.000Z",
            "message": {"role": "user", "content": first, "timestamp": 1741151168000}}  # fmt: skip
    return (json.dumps(header) + "\n" + json.dumps(user) + "\n").encode()


def test_unnamed_sessions_show_file_and_first_message_and_sort_after_named(
    viewer_client, make_session
):
    named = make_session(source_path="/pi/--home-ana-proj--/named.jsonl")
    from explorer import services

    services.rename_session(named, None, "Zebra work")
    a = make_session(_unnamed("0195f3a2-7c41-7d2e-9b1a-00000000aaaa", "Fix the parser"),
                     source_path="/pi/--x--/2025-03-05T05-06-07-089Z_aaaa.jsonl")  # fmt: skip
    b = make_session(_unnamed("0195f3a2-7c41-7d2e-9b1a-00000000bbbb", "Write the docs"),
                     source_path="/pi/--x--/2025-03-05T05-06-07-089Z_bbbb.jsonl")  # fmt: skip
    html = viewer_client.get(reverse("explorer:session_list"), {"sort": "name"}).content.decode()
    # Each unnamed row says which file it is and what it began with, not "Session 0195f3a2".
    assert "2025-03-05T05-06-07-089Z_aaaa.jsonl" in html and "Fix the parser" in html
    assert "2025-03-05T05-06-07-089Z_bbbb.jsonl" in html and "Write the docs" in html
    assert "Session 0195f3a2" not in html
    # By name: the named session first, then the unnamed ones.
    assert html.index("Zebra work") < html.index("Fix the parser")
    assert html.index("Zebra work") < html.index("Write the docs")
    # The filter matches the file name.
    html = viewer_client.get(
        reverse("explorer:session_list"), {"q": "_bbbb.jsonl"}
    ).content.decode()
    assert "Write the docs" in html and "Fix the parser" not in html
    data = viewer_client.get(
        reverse("explorer:session_list"), {"q": "_aaaa", "format": "json"}
    ).json()
    assert [s["file_name"] for s in data["sessions"]] == ["2025-03-05T05-06-07-089Z_aaaa.jsonl"]
    assert a.pk != b.pk


def test_a_fork_keeps_the_name_and_is_marked(viewer_client, make_session):
    from explorer import services

    original = make_session(source_path="/pi/--home-ana-proj--/orig.jsonl")
    services.rename_session(original, None, "Original work")
    fork = services.fork_session(original, None)
    html = viewer_client.get(reverse("explorer:session_list")).content.decode()
    assert html.count("Original work") == 2  # the fork keeps the name ...
    assert "fork of orig.jsonl" in html  # ... and says whose fork it is
    rows = html.split("<tr>")
    marked = [r for r in rows if "fork of orig.jsonl" in r]
    assert len(marked) == 1 and f"/sessions/{fork.pk}/" in marked[0]
