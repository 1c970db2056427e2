"""Every explorer page renders as a full page and as its htmx partial."""

from __future__ import annotations

import pytest
from django.urls import reverse

PAGES = [
    ("explorer:session_detail", {}, "tree-and-graph"),
    ("explorer:entry", {"id": "b2c3d4e5"}, "entry-panel"),
    ("explorer:context", {}, "context-panel"),
    ("explorer:compactions", {}, "compaction-detail"),
    ("explorer:compare", {"a": "d4e5f6a7", "b": "e5f6a7b8"}, "compare-result"),
    ("explorer:timeline", {}, "timeline-panel"),
    ("explorer:session_search", {"q": "hello"}, "search-results"),
    ("explorer:integrity", {}, "integrity-panel"),
]


@pytest.fixture
def session(make_session):
    return make_session()


@pytest.mark.parametrize(("name", "params", "partial_id"), PAGES)
def test_it_renders_full_page(viewer_client, session, name, params, partial_id):
    r = viewer_client.get(reverse(name, args=[session.pk]), params)
    assert r.status_code == 200, r.content[:2000]
    html = r.content.decode()
    assert "<html" in html
    assert f'id="{partial_id}"' in html
    assert "Demo of a small session" in html


@pytest.mark.parametrize(("name", "params", "partial_id"), PAGES)
def test_it_renders_htmx_partial(viewer_client, session, name, params, partial_id):
    r = viewer_client.get(reverse(name, args=[session.pk]), params, headers={"HX-Request": "true"})
    assert r.status_code == 200
    html = r.content.decode()
    assert "<html" not in html
    assert f'id="{partial_id}"' in html
