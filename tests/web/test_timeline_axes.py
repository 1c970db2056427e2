"""Timeline axes: each gridline labelled with its exact value, an x-axis of turn numbers and
times, and marks a screen reader can name and a keyboard can reach."""

from __future__ import annotations

import re

from django.urls import reverse

from explorer.analysis.timeline import TimelinePoint, timeline_svg_data


def _points(values: list[int]) -> list[TimelinePoint]:
    return [
        TimelinePoint(
            2 * k + 1, f"a{k}", v, None, k + 1, f"2025-03-04T05:{10 + k:02d}:00.000Z", estimate=v
        )
        for k, v in enumerate(values)
    ]


def test_gridline_labels_name_the_value_they_sit_on():
    chart = timeline_svg_data(_points([100, 4000, 4900]), [], 7)
    labels = [t["label"] for t in chart["ticks"]]
    assert labels == ["0", "1.25k", "2.5k", "3.75k", "5k"]  # top 5,000: quarters are exact
    bottom, top = chart["ticks"][0]["y"], chart["ticks"][-1]["y"]
    assert bottom == chart["bottom"] and top == chart["top"]


def test_the_x_axis_names_turns_and_times():
    chart = timeline_svg_data(_points([10 * k for k in range(1, 21)]), [], 41)
    ticks = chart["xticks"]
    assert ticks[0]["turn"] == 1 and ticks[-1]["turn"] == 20 and len(ticks) == 6
    assert ticks[0]["time"] == "05:10" and ticks[-1]["time"] == "05:29"
    assert [t["x"] for t in ticks] == sorted(t["x"] for t in ticks)


def test_the_page_draws_both_axes_and_accessible_marks(viewer_client, make_session):
    session = make_session()
    html = viewer_client.get(reverse("explorer:timeline", args=[session.pk])).content.decode()
    svg = re.search(r'<svg class="timeline".*?</svg>', html, re.S).group(0)
    assert 'role="group"' in svg and 'aria-labelledby="timeline-title"' in svg
    assert re.search(r'class="tick xtick"[^>]*>turn 1<', svg)
    dots = re.findall(r'<a href="[^"]*" aria-label="(Turn \d+[^"]*)"><circle', svg)
    assert dots and all("projected" in d and "tokens" in d for d in dots)
    marks = re.findall(r'aria-label="([^"]*)"><line', svg)
    assert any(m.startswith("hide ") for m in marks)  # the small session's context edit


def test_a_long_route_keeps_the_chart_the_same_weight():
    """Dots are capped (the page weight does not grow with the route); the peak and the last
    turn always keep theirs, and the lines still pass through every turn."""
    from explorer.analysis.timeline import TimelinePoint, timeline_svg_data

    points = [
        TimelinePoint(
            index=i,
            entry_id=f"e{i:04d}",
            projected=999 if i == 421 else 10 + i % 7,
            reported=None,
            turn=i + 1,
            estimate=10 + i % 7,
        )
        for i in range(1000)
    ]
    chart = timeline_svg_data(points, [], 1000, max_dots=150)
    ids = [d["id"] for d in chart["dots"]]
    assert 140 <= len(ids) <= 150 and chart["dots_shown"] == len(ids)
    assert "e0421" in ids and "e0999" in ids and "e0000" in ids
    assert len(chart["projected"].split()) == 1000


def test_the_end_labels_stay_inside_the_chart():
    """The last label is centred on the chart's right edge no more: it ends at its tick (the
    drawing cut it off), the first begins at its own, the rest are centred."""
    ticks = timeline_svg_data(_points([10 * k for k in range(1, 21)]), [], 41)["xticks"]
    assert [t["anchor"] for t in ticks] == ["start"] + ["middle"] * 4 + ["end"]
    one = timeline_svg_data(_points([10]), [], 1)["xticks"]
    assert [t["anchor"] for t in one] == ["middle"]


def test_the_page_anchors_the_last_label_at_its_end(viewer_client, make_session):
    session = make_session()
    html = viewer_client.get(reverse("explorer:timeline", args=[session.pk])).content.decode()
    labels = re.findall(r'class="tick xtick" text-anchor="(\w+)">turn', html)
    assert len(labels) > 1 and labels[-1] == "end" and labels[0] == "start"
