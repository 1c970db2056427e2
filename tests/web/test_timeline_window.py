"""On a route longer than the Timeline shows, each turn's figure is still Raw vs projected's.

The Timeline draws the newest ``TIMELINE_MAX_PATH`` entries of a route. It once estimated
those turns over the window alone, as if the route began there: a turn whose provider usage
the engine does not trust (an aborted reply after a context edit) lost the whole context
before the window, 2,007 tokens on the Timeline against 7,017 on Raw vs projected (and
``pisession context``) for the same reply.
"""

from __future__ import annotations

import pytest
from django.urls import reverse

from explorer import queries

from . import crafted

pytestmark = pytest.mark.django_db

HEADER = crafted.header("7a0c1e22-0d4b-4b1e-9c55-2f6a8d3e4b13")
USAGE = crafted.usage(100, cost=0.01)


def _message(eid: str, parent: str | None, role: str, text: str, stop: str = "stop") -> dict:
    return crafted.message(eid, parent, role, text, 1, usage=USAGE, stop=stop, ms=crafted.EPOCH_MS)


def _entries(pairs: int) -> list[dict]:
    """``pairs`` user questions of 400 words with short answers, then an edit hiding the last
    question and an aborted reply (no usage the engine trusts: it re-estimates everything)."""
    out, parent = [], None
    for k in range(pairs):
        out.append(_message(f"u{k:05d}", parent, "user", "word " * 400))
        out.append(_message(f"a{k:05d}", f"u{k:05d}", "assistant", "ok"))
        parent = f"a{k:05d}"
    out.append(crafted.context_edit("e1", parent, f"u{pairs - 1:05d}", 2))
    out.append(_message("z1", "e1", "assistant", "partial", stop="aborted"))
    return out


def test_a_clipped_timeline_gives_each_turn_the_context_of_its_whole_route(
    viewer_client, tmp_path, monkeypatch
):
    # A short window stands for the 6,000 entries, so the route stays small.
    monkeypatch.setattr(queries.timeline, "TIMELINE_MAX_PATH", 20)
    monkeypatch.setattr(queries.timeline, "TIMELINE_STEP", 10)
    data = crafted.session_bytes(HEADER, _entries(15))
    session = crafted.imported(data, "long.jsonl")
    engine = crafted.engine_tokens(data, tmp_path)  # as `pisession context` computes it

    figures = viewer_client.get(
        reverse("explorer:timeline", args=[session.pk]), {"format": "json"}
    ).json()
    assert figures["clipped"] > 0  # the window does not reach the route's start
    last = figures["points"][-1]
    assert last["entry_id"] == "z1"
    assert last["projected"] == engine
    for point in figures["points"]:
        context = viewer_client.get(
            reverse("explorer:context", args=[session.pk]),
            {"format": "json", "leaf": point["entry_id"]},
        ).json()
        assert point["projected"] == context["projected_tokens"], point
    # The chart's dot for that turn says the same.
    page = viewer_client.get(reverse("explorer:timeline", args=[session.pk])).content.decode()
    assert f"projected {engine} tokens" in page
