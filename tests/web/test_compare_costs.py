"""Compare: wasted and abandoned cost on a tree whose answers are known by hand, the aligned
projection difference, and a leaf compared with itself.

The tree (cost of each assistant in dollars; users cost nothing)::

    u1 ─ a1 (0.01) ─ u2 ─ a2 (0.02) ─┬─ u3 ─ a3 (0.04)
                   │                 └─ u4 ─ a4 (0.08)
                   └─ u5 ─ a5 (0.16)

Powers of two make every sum of costs unique, so a wrong set of entries cannot match.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

HEADER = {
    "type": "session",
    "version": 3,
    "id": "0195f3a2-7c41-7d2e-9b1a-000000000c05",
    "timestamp": "2025-03-04T05:06:07.089Z",
    "cwd": "/home/ana/costs",
}
TREE = [  # (id, parent, role, cost)
    ("u1", None, "user", 0),
    ("a1", "u1", "assistant", 0.01),
    ("u2", "a1", "user", 0),
    ("a2", "u2", "assistant", 0.02),
    ("u3", "a2", "user", 0),
    ("a3", "u3", "assistant", 0.04),
    ("u4", "a2", "user", 0),
    ("a4", "u4", "assistant", 0.08),
    ("u5", "a1", "user", 0),
    ("a5", "u5", "assistant", 0.16),
]


def _line(i: int, eid: str, parent: str | None, role: str, cost: float) -> dict:
    ts = 1741064768000 + i * 1000
    message: dict = {"role": role, "content": f"turn {eid}", "timestamp": ts}
    if role == "assistant":
        message.update(
            content=[{"type": "text", "text": f"answer {eid}"}],
            api="anthropic-messages",
            provider="anthropic",
            model="claude-sonnet-4-5",
            usage={
                "input": 100 * (i + 1),
                "output": 10,
                "cacheRead": 0,
                "cacheWrite": 0,
                "totalTokens": 100 * (i + 1) + 10,
                "cost": {"total": cost},
            },
            stopReason="stop",
        )
    return {
        "type": "message",
        "id": eid,
        "parentId": parent,
        "timestamp": f"2025-03-04T05:{6 + i:02d}:08.000Z",
        "message": message,
    }


@pytest.fixture
def tree(make_session):
    lines = [HEADER] + [_line(i, *row) for i, row in enumerate(TREE)]
    return make_session(("\n".join(json.dumps(x) for x in lines) + "\n").encode())


def _compare(client, session, **params) -> dict:
    r = client.get(reverse("explorer:compare", args=[session.pk]), {**params, "format": "json"})
    assert r.status_code == 200
    return r.json()


@pytest.mark.parametrize(
    ("a", "b", "cursor", "wasted", "abandoned"),
    [
        # The trunk u2/a2 is on the cursor's route: only u3/a3 is wasted (the old figure
        # counted everything after the ancestor a1: 0.06).
        ("a1", "a3", "a4", 0.04, 0.20),
        ("a3", "a4", "a4", 0.04, 0.20),
        ("a5", "a3", "a4", 0.20, 0.20),
        # The cursor on the other side of the tree: the trunk u2/a2 is abandoned now.
        ("a3", "a4", "a5", 0.14, 0.14),
        ("a4", "a4", "a4", 0.0, 0.20),
    ],
)
def test_wasted_cost_counts_only_entries_off_the_cursors_route(
    viewer_client, tree, a, b, cursor, wasted, abandoned
):
    data = _compare(viewer_client, tree, a=a, b=b, leaf=cursor)
    assert data["cursor"] == cursor
    assert data["result"]["wasted"] == pytest.approx(wasted)
    assert data["result"]["abandoned_total"] == pytest.approx(abandoned)
    page = viewer_client.get(
        reverse("explorer:compare", args=[tree.pk]), {"a": a, "b": b, "leaf": cursor}
    ).content.decode()
    assert f'id="wasted-cost">${wasted:.4f}<' in page
    assert f'id="abandoned-cost">${abandoned:.4f}<' in page


def test_projection_difference_is_aligned_and_counts_shared_messages_once(viewer_client, tree):
    result = _compare(viewer_client, tree, a="a3", b="a4")["result"]
    # Shared: u1 a1 u2 a2 (one run); then A's u3 a3 and B's u4 a4.
    assert result["diff_counts"] == {"both": 4, "a": 2, "b": 2, "content": 0}
    sides = [(d["side"], d.get("source_id") or d["first_id"]) for d in result["diff"]]
    assert sides == [("both", "u1"), ("a", "u3"), ("a", "a3"), ("b", "u4"), ("b", "a4")]
    assert result["diff"][0]["count"] == 4 and result["diff"][0]["last_id"] == "a2"
    assert result["same"] is False


def test_the_difference_lists_each_sides_newest_lines_and_counts_every_line(
    viewer_client, tree, monkeypatch
):
    """At most ``DIFF_SHOWN`` lines are listed, page and JSON alike: the newest of each side
    in turn, numbered as in the whole difference, so one side's long run cannot hide the
    other's; the page says how many are not listed; the counts still cover every line."""
    from explorer import queries

    monkeypatch.setattr(queries.compare, "DIFF_SHOWN", 2)
    result = _compare(viewer_client, tree, a="a3", b="a4")["result"]
    assert result["diff_counts"] == {"both": 4, "a": 2, "b": 2, "content": 0}
    # The whole: 1 shared run, 2 u3, 3 a3, 4 u4, 5 a4; B's lines come after A's.
    assert [(d["n"], d["source_id"]) for d in result["diff"]] == [(3, "a3"), (5, "a4")]
    assert result["diff_hidden"] == 3
    url = reverse("explorer:compare", args=[tree.pk])
    page = viewer_client.get(url, {"a": "a3", "b": "a4"}).content.decode()
    assert 'id="diff-hidden">3 lines of the difference not listed' in page
    context_url = reverse("explorer:context", args=[tree.pk])
    assert f'href="{context_url}?leaf=a3">Raw vs projected of A' in page  # the whole of each
    assert f'href="{context_url}?leaf=a4">of B' in page
    listed = page.split('<ol class="pdiff small">', 1)[1].split("</ol>", 1)[0]
    assert listed.count("<li ") == 2 and "u4" not in listed and "u3" not in listed
    assert '<li class="pd-a" value="3">' in listed and '<li class="pd-b" value="5">' in listed
    monkeypatch.setattr(queries.compare, "DIFF_SHOWN", 4)
    queries.forget_reads()
    from django.core.cache import cache

    cache.clear()
    four = _compare(viewer_client, tree, a="a3", b="a4")["result"]["diff"]
    assert [d["n"] for d in four] == [1, 2, 3, 5]  # in turn: A, B, the shared run, A
    monkeypatch.setattr(queries.compare, "DIFF_SHOWN", 5)
    tree.refresh_from_db()
    queries.forget_reads()
    from django.core.cache import cache

    cache.clear()
    whole = _compare(viewer_client, tree, a="a3", b="a4")["result"]
    assert whole["diff_hidden"] == 0 and [d["n"] for d in whole["diff"]] == [1, 2, 3, 4, 5]
    page = viewer_client.get(url, {"a": "a3", "b": "a4"}).content.decode()
    assert 'id="diff-hidden"' not in page


def test_a_leaf_compared_with_itself_says_so(viewer_client, tree):
    url = reverse("explorer:compare", args=[tree.pk])
    page = viewer_client.get(url, {"a": "a3", "b": "a3"}).content.decode()
    assert 'id="same-leaf"' in page and "the same entry" in page
    result = _compare(viewer_client, tree, a="a3", b="a3")["result"]
    assert result["same"] is True and result["diff_counts"]["a"] == result["diff_counts"]["b"] == 0


def test_ids_keep_their_real_case(viewer_client, make_session):
    lines = [HEADER] + [_line(0, "AbCdEf01", None, "user", 0)]
    lines.append(_line(1, "xYz00002", "AbCdEf01", "assistant", 0.01))
    session = make_session(("\n".join(json.dumps(x) for x in lines) + "\n").encode())
    page = viewer_client.get(
        reverse("explorer:compare", args=[session.pk]), {"a": "xYz00002", "b": "AbCdEf01"}
    ).content.decode()
    assert '<span class="mono small ids">xYz00002</span>' in page
    from pathlib import Path

    css = (Path(__file__).resolve().parents[2] / "static/explorer/explorer.css").read_text()
    assert ".ids, th .mono { text-transform: none;" in css


def test_an_append_elsewhere_changes_only_the_costs_off_the_cursor(viewer_client, tree):
    """The two routes and their difference do not change when the session grows elsewhere
    (they are read from stored rows, nothing kept); the costs off the cursor's route do."""
    from explorer import services

    before = _compare(viewer_client, tree, a="a3", b="a4", leaf="a4")["result"]
    assert before["abandoned_total"] == pytest.approx(0.20)
    # A costly answer on a new branch off u5: off the cursor's route, so abandoned.
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2, "cost": {"total": 0.32}}  # fmt: skip
    message = {"role": "assistant", "content": [{"type": "text", "text": "late"}], "api": "anthropic-messages", "provider": "anthropic", "model": "m", "usage": usage, "stopReason": "stop", "timestamp": 1741064900000}  # fmt: skip
    services.append_message(tree, None, message, leaf_id="u5")
    tree.refresh_from_db()
    after = _compare(viewer_client, tree, a="a3", b="a4", leaf="a4")["result"]
    assert after["abandoned_total"] == pytest.approx(0.52)
    assert {k: v for k, v in after.items() if k != "abandoned_total"} == {
        k: v for k, v in before.items() if k != "abandoned_total"
    }


def test_messages_that_orjson_cannot_encode_are_still_told_apart():
    """Parsed lines can hold lone surrogates and integers beyond 64 bits."""
    from explorer.analysis.compare import _signature

    assert _signature({"content": "a\ud800"}) != _signature({"content": "b\ud800"})
    assert _signature({"n": 2**70}) != _signature({"n": 2**71})
    assert _signature({"n": 2**70}) == _signature({"n": 2**70})
    assert _signature({"content": "same"}) == _signature({"content": "same"})
