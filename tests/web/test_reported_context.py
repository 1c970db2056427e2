"""One "provider-reported context" on every page (the engine's ``calculate_context_tokens``:
total tokens, else input + output + cache), an estimate line that plots estimates, a point
for the context after a trailing compaction, and Raw vs projected's big numbers on one
basis."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from explorer.session.context import projection_from_path
from explorer.session.tokens import estimate_every_message
from tests.conftest import SMALL_SESSION

pytestmark = pytest.mark.django_db

ANSWERED = b"".join(SMALL_SESSION.splitlines(keepends=True)[:5])
COMPACTED = ANSWERED + (
    b'{"type":"compaction","id":"e0e0e0e0","parentId":"d4e5f6a7","timestamp":'
    b'"2025-03-04T05:07:00.000Z","summary":"The user asked for demo.txt; it says hello.",'
    b'"firstKeptEntryId":"d4e5f6a7","tokensBefore":1312}\n'
)


def _json(client, name, session, **params):
    return client.get(
        reverse(f"explorer:{name}", args=[session.pk]), {**params, "format": "json"}
    ).json()


def test_every_page_reports_the_same_provider_context(viewer_client, make_session):
    session = make_session(ANSWERED)
    # input 1,200 + output 40: the provider's total is 1,240 (input + cache alone is 1,200)
    timeline = _json(viewer_client, "timeline", session)
    assert [p["reported"] for p in timeline["points"]] == [1240, 1312]
    context = _json(viewer_client, "context", session, leaf="b2c3d4e5")
    assert context["raw_reported"] == 1240 == context["projected_reported"]
    entry = _json(viewer_client, "entry", session, id="b2c3d4e5")
    assert entry["reported_context"] == 1240
    panel = viewer_client.get(reverse("explorer:entry", args=[session.pk]), {"id": "b2c3d4e5"})
    assert 'id="entry-reported-context"' in panel.content.decode()
    assert ">1240</dd>" in panel.content.decode()
    page = viewer_client.get(reverse("explorer:transcript", args=[session.pk])).content.decode()
    assert "1240 reported" in page and "billed" not in page
    legend = viewer_client.get(reverse("explorer:timeline", args=[session.pk])).content.decode()
    assert "provider-reported context (total tokens" in legend and "input + cache" not in legend


def test_the_estimate_line_plots_estimates(viewer_client, make_session):
    from explorer import queries

    session = make_session(ANSWERED)
    figures = queries.timeline_figures(session, "d4e5f6a7")
    last = figures["points"][-1]
    path, _ = queries.context_path(session, queries.light_path(session, "d4e5f6a7"))
    assert last.projected == 1312  # the engine's figure: the reply's own usage
    assert 0 < last.estimate < 100  # three short messages, every one estimated
    assert last.estimate == int(estimate_every_message(projection_from_path(path).messages).tokens)
    ys = [float(xy.split(",")[1]) for xy in figures["chart"]["projected"].split()]
    reported_ys = [float(xy.split(",")[1]) for xy in figures["chart"]["reported"].split()]
    assert ys[-1] > reported_ys[-1]  # SVG y grows downwards: the estimate is far below 1,312


def test_a_trailing_compaction_gets_a_point_for_the_context_now(viewer_client, make_session):
    session = make_session(COMPACTED)
    timeline = _json(viewer_client, "timeline", session)
    now = _json(viewer_client, "context", session)["projected_tokens"]
    assert timeline["now_point"]["projected"] == now < 1312
    assert timeline["now_point"]["kind"] == "compaction"
    assert [p["entry_id"] for p in timeline["points"]] == ["b2c3d4e5", "d4e5f6a7"]
    page = viewer_client.get(reverse("explorer:timeline", args=[session.pk])).content.decode()
    assert (
        f"the context now, after the compaction that followed the last reply: {now} tokens" in page
    )
    assert "Now, after the last reply" in page  # the point itself, with its figures


def test_raw_vs_projected_big_numbers_are_both_estimates(viewer_client, make_session):
    session = make_session(ANSWERED)
    html = viewer_client.get(reverse("explorer:context", args=[session.pk])).content.decode()
    bigs = re.findall(r'<div class="big" id="([a-z-]+)">(\d+)</div>', html)
    data = _json(viewer_client, "context", session)
    assert bigs[:2] == [
        ("raw-estimate", str(data["raw_tokens"])),
        ("projected-sum", str(data["projected_sum"])),
    ]
    assert data["projected_tokens"] == 1312  # the engine's figure, shown apart and labelled
    assert (
        'as <code>pisession context</code> and compaction judge it: <strong id="projected-estimate">1312<'
        in html
    )
