"""The Live tab's meter and Raw vs projected give the same context figures, the engine's.

A provider's usage measures the context it was sent; once a context edit (or compaction)
comes later on the route, that context no longer exists and the engine re-estimates
(`estimate_projected_context`, what `pisession context` prints). The meter once added the
newer messages to the stale usage: 50,005 tokens on the Live tab against 1 on Raw vs
projected for the same leaf.
"""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from explorer import services
from explorer.session import SessionManager
from explorer.session.context import projection_from_path
from explorer.session.tokens import estimate_projected_context_tokens

pytestmark = pytest.mark.django_db

HEADER = {
    "type": "session",
    "version": 3,
    "id": "7a0c1e22-0d4b-4b1e-9c55-2f6a8d3e4b11",
    "timestamp": "2025-03-04T05:06:07.089Z",
    "cwd": "/p",
}
COST = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
USAGE = {"input": 50000, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 50005, "cost": COST}  # fmt: skip
ENTRIES = [
    {
        "type": "message",
        "id": "u1",
        "parentId": None,
        "timestamp": "2025-03-04T05:07:01.000Z",
        "message": {"role": "user", "content": "x " * 4000, "timestamp": 1},
    },  # fmt: skip
    {
        "type": "message",
        "id": "a1",
        "parentId": "u1",
        "timestamp": "2025-03-04T05:07:02.000Z",
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}],
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "m",
            "stopReason": "stop",
            "timestamp": 2,
            "usage": USAGE,
        },
    },  # fmt: skip
    {
        "type": "context_edit",
        "id": "e1",
        "parentId": "a1",
        "timestamp": "2025-03-04T05:07:03.000Z",
        "targetId": "u1",
        "replacement": None,
    },  # fmt: skip
]


def _meter(html: str) -> tuple[int, int]:
    found = re.search(r'id="projection-panel"[^>]*data-tokens="(\d+)" data-messages="(\d+)"', html)
    assert found, "the Live tab has no meter"
    return int(found.group(1)), int(found.group(2))


def test_the_meter_distrusts_usage_older_than_an_edit_like_the_page(viewer_client, tmp_path):
    data = "".join(json.dumps(e) + "\n" for e in [HEADER, *ENTRIES]).encode()
    session = services.import_bytes(data, source_path="edit.jsonl", user=None).session
    # The engine's own figure, as `pisession context` computes it.
    path = tmp_path / "edit.jsonl"
    path.write_bytes(data)
    manager = SessionManager.open(str(path))
    branch = manager.get_branch()
    engine = int(estimate_projected_context_tokens(projection_from_path(branch), branch))
    assert engine < 100  # the hidden 4,000 words and the stale 50,000 are both gone

    page = viewer_client.get(reverse("explorer:context", args=[session.pk]), {"format": "json"})
    figures = page.json()
    assert (figures["projected_tokens"], figures["message_count"]) == (engine, 1)
    live = viewer_client.get(reverse("explorer:live", args=[session.pk])).content.decode()
    assert _meter(live) == (engine, 1)
