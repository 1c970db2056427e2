"""Raw vs projected judges compaction against the configured window, like the Live meter.

The Live tab's meter and the turn runner's auto-compaction use the configured context window
and reserve (``SESSIONS_CONTEXT_WINDOW``, ``SESSIONS_COMPACTION``). Raw vs projected once
defaulted to a window of its own (200,000 tokens): at a context of 150,005 tokens the Live
tab said "auto-compaction above 111,616 tokens" and marked the meter over, while Raw vs
projected said compaction was "not needed" below a threshold of 183,616. A window or reserve
asked for in the query still overrides the default there.
"""

from __future__ import annotations

import json
import re

import pytest
from django.test import override_settings
from django.urls import reverse

from explorer import conf, services
from explorer.session.tokens import CompactionSettings

pytestmark = pytest.mark.django_db

HEADER = {
    "type": "session",
    "version": 3,
    "id": "7a0c1e22-0d4b-4b1e-9c55-2f6a8d3e4b14",
    "timestamp": "2025-03-04T05:06:07.089Z",
    "cwd": "/p",
}
COST = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
USAGE = {"input": 150000, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 150005, "cost": COST}  # fmt: skip
ENTRIES = [
    {
        "type": "message",
        "id": "u1",
        "parentId": None,
        "timestamp": "2025-03-04T05:07:01.000Z",
        "message": {"role": "user", "content": "hello", "timestamp": 1},
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
]


def _meter(html: str) -> dict:
    panel = re.search(r'<section id="projection-panel" class="projection-panel( over)?" data-tokens="(\d+)"', html)  # fmt: skip
    threshold = re.search(r"Auto-compaction above (\d+) tokens", html)
    assert panel and threshold, "the Live tab has no meter"
    return {"over": bool(panel.group(1)), "tokens": int(panel.group(2)), "threshold": int(threshold.group(1))}  # fmt: skip


def _session():
    data = "".join(json.dumps(e) + "\n" for e in [HEADER, *ENTRIES]).encode()
    return services.import_bytes(data, source_path="window.jsonl", user=None).session


@pytest.mark.parametrize(
    "configured",
    [
        {},
        {
            "SESSIONS_CONTEXT_WINDOW": 1_000_000,
            "SESSIONS_COMPACTION": CompactionSettings(reserve_tokens=50_000),
        },
    ],  # fmt: skip
    ids=["default-settings", "configured-window"],
)
def test_raw_vs_projected_and_the_meter_judge_against_one_window(viewer_client, configured):
    with override_settings(**configured):
        session = _session()
        window = conf.context_window()
        threshold = window - conf.compaction_settings().reserve_tokens
        live = _meter(viewer_client.get(reverse("explorer:live", args=[session.pk])).content.decode())  # fmt: skip
        url = reverse("explorer:context", args=[session.pk])
        figures = viewer_client.get(url, {"format": "json"}).json()
        page = viewer_client.get(url).content.decode()
    assert live["tokens"] == figures["projected_tokens"] == 150005
    assert live["threshold"] == figures["threshold"] == threshold
    assert figures["window"] == window
    assert figures["would_compact"] is live["over"] is (threshold < 150005)
    assert f"Compaction at {window} tokens" in page
    assert ("would trigger" in page) is live["over"]


def test_a_window_asked_for_still_overrides_the_default(viewer_client):
    session = _session()
    url = reverse("explorer:context", args=[session.pk])
    figures = viewer_client.get(url, {"format": "json", "window": 400000, "reserve": 1000}).json()
    assert (figures["window"], figures["threshold"], figures["would_compact"]) == (400000, 399000, False)  # fmt: skip
