"""The Timeline's figures cover every turn of the route, though its chart draws at most
about 240: the header's turn count and peak are the route's, the peak turn is always among
the drawn ones, and the note under the chart says how many the lines pass through."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from benchmarks.gen_session import generate_session
from explorer import queries
from explorer.analysis.timeline import PENDING, TimelinePoint, peak_of, sampled_points

pytestmark = pytest.mark.django_db


def _points(values: list[int]) -> list[TimelinePoint]:
    return [TimelinePoint(2 * k, f"a{k}", v, None, k + 1) for k, v in enumerate(values)]


def test_the_peak_is_drawn_whatever_the_sampling():
    values = [10] * 1000
    values[517] = 9999  # not on the even grid of 240 samples
    shown = sampled_points(_points(values))
    assert 517 not in {int(k * 1000 / 240) for k in range(240)}
    assert len(shown) <= 242 and shown[0].turn == 1 and shown[-1].turn == 1000
    assert max(p.projected for p in shown) == 9999
    assert [p.turn for p in shown] == sorted(p.turn for p in shown)


def test_the_peak_counts_every_computed_turn_and_the_drawn_ones():
    every = _points([5, 80, PENDING, 7])
    drawn = [TimelinePoint(4, "a2", 120, None, 3)]  # the pending turn, settled when drawn
    assert peak_of(every, drawn) == 120
    assert peak_of(every, []) == 80
    assert peak_of([], []) == 0


def test_a_long_route_counts_all_its_turns(make_session, tmp_path, viewer_client):
    path = generate_session(tmp_path / "long.jsonl", entries=2500, branch_points=2, seed=4)
    session = make_session(path.read_bytes())
    leaf = queries.default_leaf_id(session)
    figures = queries.timeline_figures(session, leaf)
    points = figures["points"]
    turns = points[-1].turn - points[0].turn + 1  # every turn of the window is a point
    assert len(points) < turns == figures["turns"]
    assert figures["peak"] == max(p.projected for p in points)
    html = viewer_client.get(reverse("explorer:timeline", args=[session.pk])).content.decode()
    assert f"{turns} turns on a path of {figures['path_length']} entries" in html
    assert re.search(rf"the lines go through {len(points)} of them", html)
    data = viewer_client.get(
        reverse("explorer:timeline", args=[session.pk]), {"format": "json"}
    ).json()
    assert data["turns"] == turns and len(data["points"]) == len(points)
