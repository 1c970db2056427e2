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


FORMS = [
    ("explorer:edit", {"target": "d4e5f6a7", "mode": "replace"}, "edit-form"),
    ("explorer:label", {"target": "d4e5f6a7"}, "label-form"),
    ("explorer:rename", {}, "rename-form"),
    ("explorer:navigate", {"target": "e5f6a7b8"}, "navigate-form"),
    ("explorer:compact", {}, "compact-form"),
]


@pytest.mark.parametrize(("name", "params", "partial_id"), FORMS)
def test_it_renders_action_forms_as_page_and_partial(
    editor_client, session, name, params, partial_id
):
    url = reverse(name, args=[session.pk])
    full = editor_client.get(url, params)
    assert full.status_code == 200
    assert "<html" in full.content.decode() and f'id="{partial_id}"' in full.content.decode()
    part = editor_client.get(url, params, headers={"HX-Request": "true"})
    assert part.status_code == 200
    assert "<html" not in part.content.decode() and f'id="{partial_id}"' in part.content.decode()


def test_it_serves_the_graph_as_svg(viewer_client, session):
    r = viewer_client.get(reverse("explorer:graph_svg", args=[session.pk]))
    assert r.status_code == 200
    assert r["Content-Type"] == "image/svg+xml"
    assert r.content.decode().lstrip().startswith("<svg")
    assert "default-src 'none'" in r["Content-Security-Policy"]


def test_it_unfolds_a_chain_on_request(viewer_client, session):
    r = viewer_client.get(reverse("explorer:tree_chain", args=[session.pk]), {"first": "b2c3d4e5"})
    html = r.content.decode()
    assert r.status_code == 200
    assert 'data-id="b2c3d4e5"' in html and 'data-id="c3d4e5f6"' in html


def test_permalinks_to_leaf_and_entry(viewer_client, session):
    r = viewer_client.get(
        reverse("explorer:session_detail", args=[session.pk]),
        {"leaf": "e5f6a7b8", "entry": "a1b2c3d4"},
    )
    html = r.content.decode()
    assert 'data-entry-id="a1b2c3d4"' in html  # the entry opens in the side panel
    ctx = viewer_client.get(
        reverse("explorer:context", args=[session.pk]), {"leaf": "e5f6a7b8"}
    ).content.decode()
    assert "Another route." in ctx and "The file says hello world." not in ctx


def test_unknown_entries_and_sessions_are_404(viewer_client, session):
    assert (
        viewer_client.get(reverse("explorer:entry", args=[session.pk]), {"id": "nope"}).status_code
        == 404
    )
    assert (
        viewer_client.get(reverse("explorer:session_detail", args=[session.pk + 999])).status_code
        == 404
    )


def test_entry_raw_json_loads_on_demand(viewer_client, session):
    url = reverse("explorer:entry", args=[session.pk])
    lazy = viewer_client.get(
        url, {"id": "b2c3d4e5"}, headers={"HX-Request": "true"}
    ).content.decode()
    assert "&quot;toolCall&quot;" not in lazy.split("raw-body")[1]
    raw = viewer_client.get(
        url, {"id": "b2c3d4e5", "raw": "1"}, headers={"HX-Request": "true"}
    ).content.decode()
    assert "&quot;toolCall&quot;" in raw and "<html" not in raw


def test_tool_calls_are_paired_with_results(viewer_client, session):
    html = viewer_client.get(
        reverse("explorer:entry", args=[session.pk]), {"id": "b2c3d4e5"}
    ).content.decode()
    assert "result in" in html and "c3d4e5f6" in html and "hello world" in html
    back = viewer_client.get(
        reverse("explorer:entry", args=[session.pk]), {"id": "c3d4e5f6"}
    ).content.decode()
    assert "Result of" in back and "b2c3d4e5" in back


def test_search_answers_as_a_narrow_retrieval_tool(viewer_client, session):
    r = viewer_client.get(reverse("explorer:search"), {"q": "hello world", "format": "json"})
    data = r.json()
    assert r.status_code == 200 and data["query"] == "hello world"
    hit = next(h for h in data["results"] if h["entry_id"] == "c3d4e5f6")
    assert hit["session"] == session.session_id and "hello world" in hit["snippet"]
    assert hit["url"].endswith(f"/sessions/{session.pk}/entry/?id=c3d4e5f6&raw=1")
    scoped = viewer_client.get(
        reverse("explorer:session_search", args=[session.pk]), {"q": "hello", "format": "json"}
    ).json()
    assert {h["entry_id"] for h in scoped["results"]} >= {"c3d4e5f6", "d4e5f6a7"}
