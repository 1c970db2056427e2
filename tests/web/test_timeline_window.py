"""On a route longer than the Timeline shows, each turn's figure is still Raw vs projected's.

The Timeline draws the newest ``TIMELINE_MAX_PATH`` entries of a route. It once estimated
those turns over the window alone, as if the route began there: a turn whose provider usage
the engine does not trust (an aborted reply after a context edit) lost the whole context
before the window, 2,007 tokens on the Timeline against 7,017 on Raw vs projected (and
``pisession context``) for the same reply.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from explorer import queries, services
from explorer.session import SessionManager
from explorer.session.context import projection_from_path
from explorer.session.tokens import estimate_projected_context_tokens

pytestmark = pytest.mark.django_db

HEADER = {
    "type": "session",
    "version": 3,
    "id": "7a0c1e22-0d4b-4b1e-9c55-2f6a8d3e4b13",
    "timestamp": "2025-03-04T05:06:07.089Z",
    "cwd": "/p",
}
COST = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0.01}
USAGE = {"input": 100, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 105, "cost": COST}  # fmt: skip


def _message(eid: str, parent: str | None, role: str, text: str, stop: str = "stop") -> dict:
    message: dict = {"role": role, "content": text, "timestamp": 1741064768000}
    if role == "assistant":
        message["content"] = [{"type": "text", "text": text}]
        message.update(api="anthropic-messages", provider="anthropic", model="m", stopReason=stop, usage=USAGE)  # fmt: skip
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": "2025-03-04T05:07:01.000Z", "message": message}  # fmt: skip


def _entries(pairs: int) -> list[dict]:
    """``pairs`` user questions of 400 words with short answers, then an edit hiding the last
    question and an aborted reply (no usage the engine trusts: it re-estimates everything)."""
    out, parent = [], None
    for k in range(pairs):
        out.append(_message(f"u{k:05d}", parent, "user", "word " * 400))
        out.append(_message(f"a{k:05d}", f"u{k:05d}", "assistant", "ok"))
        parent = f"a{k:05d}"
    out.append({"type": "context_edit", "id": "e1", "parentId": parent, "timestamp": "2025-03-04T05:07:02.000Z", "targetId": f"u{pairs - 1:05d}", "replacement": None})  # fmt: skip
    out.append(_message("z1", "e1", "assistant", "partial", stop="aborted"))
    return out


def test_a_clipped_timeline_gives_each_turn_the_context_of_its_whole_route(
    viewer_client, tmp_path, monkeypatch
):
    # A short window stands for the 6,000 entries, so the route stays small.
    monkeypatch.setattr(queries, "TIMELINE_MAX_PATH", 20)
    monkeypatch.setattr(queries, "TIMELINE_STEP", 10)
    data = "".join(json.dumps(e) + "\n" for e in [HEADER, *_entries(15)]).encode()
    result = services.import_bytes(data, source_path="long.jsonl", user=None)
    assert result.ok, [str(p) for p in result.problems]
    session = result.session
    path_file = tmp_path / "long.jsonl"
    path_file.write_bytes(data)
    branch = SessionManager.open(str(path_file)).get_branch()
    engine = int(estimate_projected_context_tokens(projection_from_path(branch), branch))

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
