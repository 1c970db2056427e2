"""Raw vs projected judges compaction against the configured window, like the Live meter.

The Live tab's meter and the turn runner's auto-compaction use the configured context window
and reserve (``SESSIONS_CONTEXT_WINDOW``, ``SESSIONS_COMPACTION``). Raw vs projected once
defaulted to a window of its own (200,000 tokens): at a context of 150,005 tokens the Live
tab said "auto-compaction above 111,616 tokens" and marked the meter over, while Raw vs
projected said compaction was "not needed" below a threshold of 183,616. A window or reserve
asked for in the query still overrides the default there.
"""

from __future__ import annotations

import re

import pytest
from django.test import override_settings
from django.urls import reverse

from explorer import conf
from explorer.session.tokens import CompactionSettings

from . import crafted

pytestmark = pytest.mark.django_db

HEADER = crafted.header("7a0c1e22-0d4b-4b1e-9c55-2f6a8d3e4b14")
ENTRIES = [
    crafted.message("u1", None, "user", "hello", 1, ms=1),
    crafted.message("a1", "u1", "assistant", "ok", 2, ms=2, usage=crafted.usage(150000)),
]


def _meter(html: str) -> dict:
    panel = re.search(r'<section id="projection-panel" class="projection-panel( over)?" data-tokens="(\d+)"', html)  # fmt: skip
    threshold = re.search(r"Auto-compaction above (\d+) tokens", html)
    assert panel and threshold, "the Live tab has no meter"
    return {"over": bool(panel.group(1)), "tokens": int(panel.group(2)), "threshold": int(threshold.group(1))}  # fmt: skip


def _session():
    return crafted.imported(crafted.session_bytes(HEADER, ENTRIES), "window.jsonl")


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
