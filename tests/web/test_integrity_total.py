"""The Integrity tab's finding count is its JSON's ``total``, on the page and its partials.

The tool-result check loads after the page (its own request). The page's badge once counted
the tree checks alone and said "no problems found" while the JSON's ``total``, with the tool
results without calls, said 2; loading the check did not change the badge either.
"""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from explorer import services

pytestmark = pytest.mark.django_db

TS = "2025-03-04T05:06:08.000Z"


def _result(eid: str, parent: str, call: str) -> dict:
    message = {"role": "toolResult", "toolCallId": call, "toolName": "read", "content": [{"type": "text", "text": "x"}], "isError": False, "timestamp": 3}  # fmt: skip
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": TS, "message": message}


def _session():
    """A clean tree whose two tool results answer no call."""
    entries = [
        {
            "type": "message",
            "id": "u1",
            "parentId": None,
            "timestamp": TS,
            "message": {"role": "user", "content": "hi", "timestamp": 1},
        },  # fmt: skip
        _result("r1", "u1", "c-nowhere"),
        _result("r2", "r1", "c-elsewhere"),
    ]
    header = {"type": "session", "version": 3, "id": "total-session", "timestamp": TS, "cwd": "/p"}
    data = "".join(json.dumps(e) + "\n" for e in [header, *entries]).encode()
    result = services.import_bytes(data, source_path="total.jsonl", user=None)
    assert result.ok, [str(p) for p in result.problems]
    return result.session


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
