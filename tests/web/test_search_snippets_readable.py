"""Search snippets show a tool call as readable text (``write(path: a.py, content: …)``),
not as its JSON with escaped newlines and quotes."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from explorer.session.describe import readable_tool_calls
from tests.conftest import SMALL_SESSION

pytestmark = pytest.mark.django_db

CALL = {
    "type": "message", "id": "w1w1w1w1", "parentId": "d4e5f6a7",
    "timestamp": "2025-03-04T05:06:20.000Z",
    "message": {"role": "assistant", "content": [
        {"type": "text", "text": "Writing the notes."},
        {"type": "toolCall", "id": "call_9", "name": "write",
         "arguments": {"path": "notes.md", "content": "first zebraline\nsecond \"quoted\" line"}}],
        "stopReason": "toolUse", "timestamp": 1741064780000},
}  # fmt: skip
DATA = b"".join(SMALL_SESSION.splitlines(keepends=True)[:5]) + json.dumps(CALL).encode() + b"\n"


@pytest.mark.parametrize("scope", ["session", "all"])
def test_a_tool_call_hit_reads_as_text(viewer_client, make_session, scope):
    session = make_session(DATA)
    url = (
        reverse("explorer:session_search", args=[session.pk])
        if scope == "session"
        else reverse("explorer:search")
    )
    data = viewer_client.get(url, {"q": "zebraline", "format": "json"}).json()
    snippet = data["results"][0]["snippet"]
    assert "\\n" not in snippet and '\\"' not in snippet and '{"path"' not in snippet
    assert 'write(path: notes.md, content: first zebraline second "quoted" line)' in snippet
    page = viewer_client.get(url, {"q": "zebraline"}).content.decode()
    assert "content: first <mark>zebraline</mark> second &quot;quoted&quot; line" in page


def test_lines_that_are_not_tool_calls_stay_as_they_are():
    text = 'plain {not json}\nread {"path":"a"}\nnote [1, 2]'
    assert readable_tool_calls(text) == "plain {not json}\nread(path: a)\nnote [1, 2]"
