"""The Integrity tab's finding count is its JSON's ``total``, on the page and its partials.

The tool-result check loads after the page (its own request). The page's badge once counted
the tree checks alone and said "no problems found" while the JSON's ``total``, with the tool
results without calls, said 2; loading the check did not change the badge either.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from . import crafted

pytestmark = pytest.mark.django_db

TS = "2025-03-04T05:06:08.000Z"


def _session():
    """A clean tree whose two tool results answer no call."""
    entries = [
        crafted.entry("u1", None, {"role": "user", "content": "hi", "timestamp": 1}, TS),
        crafted.tool_result("r1", "u1", "c-nowhere", "x", TS),
        crafted.tool_result("r2", "r1", "c-elsewhere", "x", TS),
    ]
    data = crafted.session_bytes(crafted.header("total-session", timestamp=TS), entries)
    return crafted.imported(data, "total.jsonl")


def _badge(html: str) -> str:
    found = re.search(r'<span id="integrity-total"[^>]*>(.*?)</span>', html, re.S)
    assert found, "no finding count"
    return found.group(1)


def test_the_badge_never_says_less_than_the_json(viewer_client):
    session = _session()
    url = reverse("explorer:integrity", args=[session.pk])
    total = viewer_client.get(url, {"format": "json"}).json()["total"]
    assert total == 2
    # Before the tool check has run, the page does not claim to know the count.
    first = _badge(viewer_client.get(url).content.decode())
    assert "no problems found" not in first and "checking" in first
    # The check, loaded by htmx, brings the count with it (out of band)...
    part = viewer_client.get(url, {"section": "tools"}, HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-swap-oob="true"' in part and _badge(part) == f"{total} findings"
    # ...and the page without script (the check's link) shows the same.
    whole = viewer_client.get(url, {"section": "tools"}).content.decode()
    assert _badge(whole) == f"{total} findings"
