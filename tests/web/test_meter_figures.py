"""The Live tab's meter and Raw vs projected give the same context figures, the engine's.

A provider's usage measures the context it was sent; once a context edit (or compaction)
comes later on the route, that context no longer exists and the engine re-estimates
(`estimate_projected_context`, what `pisession context` prints). The meter once added the
newer messages to the stale usage: 50,005 tokens on the Live tab against 1 on Raw vs
projected for the same leaf.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from . import crafted

pytestmark = pytest.mark.django_db

HEADER = crafted.header("7a0c1e22-0d4b-4b1e-9c55-2f6a8d3e4b11")
ENTRIES = [
    crafted.message("u1", None, "user", "x " * 4000, 1, ms=1),
    crafted.message("a1", "u1", "assistant", "ok", 2, ms=2, usage=crafted.usage(50000)),
    crafted.context_edit("e1", "a1", "u1", 3),
]


def _meter(html: str) -> tuple[int, int]:
    found = re.search(r'id="projection-panel"[^>]*data-tokens="(\d+)" data-messages="(\d+)"', html)
    assert found, "the Live tab has no meter"
    return int(found.group(1)), int(found.group(2))


def test_the_meter_distrusts_usage_older_than_an_edit_like_the_page(viewer_client, tmp_path):
    data = crafted.session_bytes(HEADER, ENTRIES)
    session = crafted.imported(data, "edit.jsonl")
    engine = crafted.engine_tokens(data, tmp_path)  # as `pisession context` computes it
    assert engine < 100  # the hidden 4,000 words and the stale 50,000 are both gone

    page = viewer_client.get(reverse("explorer:context", args=[session.pk]), {"format": "json"})
    figures = page.json()
    assert (figures["projected_tokens"], figures["message_count"]) == (engine, 1)
    live = viewer_client.get(reverse("explorer:live", args=[session.pk])).content.decode()
    assert _meter(live) == (engine, 1)
