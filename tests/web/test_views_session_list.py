"""Session list: search by first message, sort by activity, default-path totals."""

from __future__ import annotations

from django.urls import reverse

from explorer.queries import default_path_totals


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
