"""Raw vs projected lists its rows a window at a time: the page, its "N more" partial and
the JSON show at most ``limit`` rows (150 unless asked), the figures still cover every row,
and walking the windows back from the newest lists every row exactly once, in order."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from benchmarks.gen_session import generate_session
from explorer import queries

pytestmark = pytest.mark.django_db


@pytest.fixture
def long_route(make_session, tmp_path):
    """A generated session whose default route's live range holds more than one window."""
    src = generate_session(tmp_path / "gen.jsonl", entries=900, branch_points=0, seed=3)
    return make_session(src.read_bytes())


def _ids(body: str) -> list[str]:
    return re.findall(r'class="mono small" href="[^"]*\?entry=([^"]+)"', body)


def test_json_windows_walk_back_over_every_row(long_route, viewer_client):
    session = long_route
    leaf = queries.default_leaf_id(session)
    every = queries.context_summary(session, leaf, 200_000, 16_384)
    assert len(every["rows"]) > 150  # more than one window, or the test proves nothing
    url = reverse("explorer:context", args=[session.pk]) + "?format=json&limit=100"
    seen: list[str] = []
    pages = 0
    while url:
        data = viewer_client.get(url).json()
        assert len(data["rows"]) <= 100
        assert data["row_count"] == len(every["rows"])
        assert data["rows_to"] - data["rows_from"] == len(data["rows"])
        # Every figure is the whole live range's, whatever the window.
        for name in ("projected_tokens", "raw_tokens", "projected_sum", "differences"):
            assert data[name] == every[name]
        seen = [r["id"] for r in data["rows"]] + seen
        url = data["next"]
        pages += 1
    assert pages == -(-len(every["rows"]) // 100)
    assert seen == [r["id"] for r in every["rows"]]


def test_the_page_shows_the_newest_window_and_a_more_control(long_route, viewer_client):
    session = long_route
    leaf = queries.default_leaf_id(session)
    rows = queries.context_summary(session, leaf, 200_000, 16_384)["rows"]
    url = reverse("explorer:context", args=[session.pk])
    body = viewer_client.get(url).content.decode()
    table = body[body.index('id="align-table"') :]
    assert _ids(table) == [r["id"] for r in rows[-150:]]
    hidden = len(rows) - 150
    # A real link (keyboard-reachable, works without scripts) saying how many are left.
    more = re.search(
        r'<a href="\?([^"]*)" hx-get="[^"]*partial=earlier-rows"[^>]*>(\d+) more', table
    )
    assert more is not None and int(more.group(2)) == hidden
    assert f"before={hidden}" in more.group(1)
    # The htmx partial: the earlier window, then its own control when rows are left.
    part = viewer_client.get(
        f"{url}?before={hidden}&partial=earlier-rows", headers={"HX-Request": "true"}
    ).content.decode()
    assert _ids(part) == [r["id"] for r in rows[max(0, hidden - 150) : hidden]]
    assert ("more earlier rows" in part) is (hidden > 150)
    assert "<section" not in part  # only rows: they go in place of the control


def test_bytes_do_not_grow_with_the_route(make_session, viewer_client, tmp_path):
    sizes = []
    for n in (700, 1400):
        src = generate_session(tmp_path / f"g{n}.jsonl", entries=n, branch_points=0, seed=3)
        session = make_session(src.read_bytes())
        url = reverse("explorer:context", args=[session.pk]) + "?format=json"
        data = viewer_client.get(url).json()
        assert len(data["rows"]) == min(150, data["row_count"])
        sizes.append(data["row_count"])
    assert sizes[1] > sizes[0] > 150
