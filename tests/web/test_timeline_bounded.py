"""The Timeline reads a placed route's replies and marks only, never the whole route, and
its page and JSON draw a bounded number of marks whatever the route holds.

A placed leaf's route length is its stored depth and its rows one statement over the
route's segments returning only the replies, the marks and the leaf
(``queries.timeline._segment_rows``): the route is not walked (``light_path``), and the
rows read are those the tab counts. A route with more marks than the chart shows draws
the newest ``MARKS_SHOWN``, says how many there are of each kind and pages back with
``?marks_before=``.
"""

from __future__ import annotations

import json
import re

import pytest

from explorer import queries, segment_store
from explorer.queries import routes, timeline
from explorer.queries.timeline import MARKS_SHOWN
from tests.web.test_timeline_rows import _cold, _long_session

pytestmark = pytest.mark.django_db


def _tool_heavy_session(pairs: int):
    """A route of user, assistant, tool result triples: two of every three entries are no
    reply, so a read of the whole route reads far more rows than the tab's."""
    from explorer import services

    lines = [{"type": "session", "version": 3, "id": "s-tools", "timestamp": "t", "cwd": "/w"}]
    parent = None
    for k in range(pairs):
        user = {"type": "message", "id": f"u{k}", "parentId": parent, "timestamp": f"t{k}",
                "message": {"role": "user", "content": "go"}}  # fmt: skip
        reply = {"type": "message", "id": f"a{k}", "parentId": f"u{k}", "timestamp": f"t{k}",
                 "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}],
                             "usage": {"input": 10 + k, "output": 1, "cacheRead": 0,
                                       "cacheWrite": 0, "totalTokens": 11 + k}}}  # fmt: skip
        tool = {"type": "message", "id": f"r{k}", "parentId": f"a{k}", "timestamp": f"t{k}",
                "message": {"role": "toolResult", "toolCallId": f"c{k}", "toolName": "bash",
                            "content": [{"type": "text", "text": "out " * 20}]}}  # fmt: skip
        lines += [user, reply, tool]
        parent = f"r{k}"
    data = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    return services.import_bytes(data).session


def test_a_placed_route_is_not_walked_and_only_its_replies_and_marks_are_read(monkeypatch):
    session = _tool_heavy_session(300)
    leaf = queries.default_leaf_id(session)
    want = queries.timeline_figures(session, leaf)
    assert want["turns"] == 300 and want["path_length"] == 900

    def no_walk(*args, **kwargs):
        raise AssertionError("the whole route was read")

    read: list[int] = []
    real_rows = segment_store.route_rows

    def counted(*args, **kwargs):
        rows = real_rows(*args, **kwargs)
        read.append(len(rows))
        return rows

    _cold()
    monkeypatch.setattr(timeline, "light_path", no_walk)
    monkeypatch.setattr(routes, "light_path", no_walk)
    monkeypatch.setattr(timeline, "route_rows", counted)
    got = queries.timeline_figures(session, leaf)
    # One statement, its rows the replies and the leaf (a tool result), not the route.
    assert read == [want["turns"] + 1]
    assert got == want


def test_an_unplaced_leaf_still_walks_its_route(monkeypatch):
    """Where the segments do not settle the route (no stored depth), the walk answers."""
    session = _tool_heavy_session(20)
    leaf = queries.default_leaf_id(session)
    want = queries.timeline_figures(session, leaf)
    monkeypatch.setattr(timeline, "stored_depth", lambda *a: None)
    _cold()
    assert queries.timeline_figures(session, leaf) == want


def test_more_marks_than_shown_are_bounded_counted_and_paged(viewer_client):
    extra = 25
    session = _long_session(MARKS_SHOWN + extra + 5, edits=MARKS_SHOWN + extra)
    leaf = queries.default_leaf_id(session)
    figures = queries.timeline_figures(session, leaf)
    marks = figures["marks"]
    assert len(marks) == MARKS_SHOWN
    assert figures["marks_total"] == MARKS_SHOWN + extra
    assert figures["marks_not_shown"] == extra
    assert figures["mark_counts"] == {
        "compaction": 0,
        "edit": MARKS_SHOWN + extra,
        "branch_summary": 0,
    }
    # The newest: the last edit is x{MARKS_SHOWN + extra - 1}.
    assert [m.entry_id for m in marks] == [f"x{k}" for k in range(extra, MARKS_SHOWN + extra)]
    assert len(figures["chart"]["marks"]) == MARKS_SHOWN
    assert figures["older_marks"] == marks[0].index

    assert (figures["marks_older"], figures["marks_newer"]) == (extra, 0)
    older = queries.timeline_figures(session, leaf, figures["older_marks"])
    assert [m.entry_id for m in older["marks"]] == [f"x{k}" for k in range(extra)]
    assert older["older_marks"] is None
    assert (older["marks_older"], older["marks_newer"]) == (0, MARKS_SHOWN)
    # Everything but the marks is the same figure.
    for key in ("points", "peak", "turns", "path_length", "clipped", "now_point"):
        assert older[key] == figures[key], key

    url = f"/sessions/{session.pk}/timeline/"
    page = viewer_client.get(url).content.decode()
    assert f"{MARKS_SHOWN} of the {MARKS_SHOWN + extra} marks" in page
    assert f"{extra} more not drawn" in page
    assert len(re.findall(r'aria-label="hide [^"]*"><line', page)) == MARKS_SHOWN
    link = re.search(r'href="\?([^"]*marks_before=(\d+))"', page)
    assert link is not None and int(link.group(2)) == figures["older_marks"]
    back = viewer_client.get(url, {"marks_before": link.group(2)}).content.decode()
    assert len(re.findall(r'aria-label="hide [^"]*"><line', back)) == extra
    assert 'aria-label="hide x0"' in back and 'aria-label="hide x0"' not in page
    # Paged back: which marks are left out, and the way back to the newest.
    assert f"0 older, {MARKS_SHOWN} newer" in back and "Newest marks" in back
    assert "Newest marks" not in page

    data = viewer_client.get(url, {"format": "json"}).json()
    assert len(data["marks"]) == MARKS_SHOWN and data["marks_total"] == MARKS_SHOWN + extra
    assert data["older_marks"] == figures["older_marks"]
    back = viewer_client.get(url, {"format": "json", "marks_before": data["older_marks"]}).json()
    assert [m["entry_id"] for m in back["marks"]] == [f"x{k}" for k in range(extra)]
    assert (back["marks_older"], back["marks_newer"]) == (0, MARKS_SHOWN)
    for bad in ("x", "-3", "0", "9" * 40):
        answer = viewer_client.get(url, {"format": "json", "marks_before": bad})
        assert answer.status_code == 200 and answer.json()["marks"] == data["marks"], bad


def test_the_json_is_no_longer_with_more_marks(viewer_client):
    """Twice the marks past the bound: the same number of marks in the answer."""
    sizes = []
    for edits in (MARKS_SHOWN + 10, 2 * MARKS_SHOWN + 20):
        session = _long_session(2 * MARKS_SHOWN + 20, edits=edits)
        data = viewer_client.get(f"/sessions/{session.pk}/timeline/", {"format": "json"}).json()
        assert data["marks_total"] == edits
        sizes.append(len(data["marks"]))
        session.delete()  # the next one has the same session id
    assert sizes == [MARKS_SHOWN, MARKS_SHOWN]


def test_a_drawn_chart_is_not_read_again(viewer_client, monkeypatch):
    """The page's chart is a shared fragment: once drawn, a page request reads no figures
    (the JSON still does: it has no fragment)."""
    session = _long_session(30, edits=3)
    url = f"/sessions/{session.pk}/timeline/"
    _cold()
    first = viewer_client.get(url).content.decode()
    assert "Context size per turn" in first

    def no_read(*args, **kwargs):
        raise AssertionError("figures read for a drawn chart")

    monkeypatch.setattr(queries, "timeline_figures", no_read)
    again = viewer_client.get(url).content.decode()
    chart = re.search(r'<section id="timeline-panel".*?</section>', first, re.S)
    assert chart is not None and chart.group(0) in again
    with pytest.raises(AssertionError, match="figures read"):
        viewer_client.get(url, {"format": "json"})
