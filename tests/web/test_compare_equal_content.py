"""Compare aligns equal content, not only equal source entries: two routes whose contexts
begin with the same system prompt (each from its own compaction's checkpoint) share it, and
the page says it is shared by content, from which entries."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from explorer.analysis.compare import projection_diff

pytestmark = pytest.mark.django_db

SYSTEM = {"role": "system", "content": "You are careful.", "timestamp": 5}
HEADER = {"type": "session", "version": 3, "id": "0195f3a2-0000-7000-8000-00000000c0c0",
          "timestamp": "2025-03-04T05:06:07.089Z", "cwd": "/w"}  # fmt: skip
USER = {"type": "message", "id": "u0", "parentId": None, "timestamp": "2025-03-04T05:06:08.000Z",
        "message": {"role": "user", "content": "start", "timestamp": 1}}  # fmt: skip


def _compaction(i: str, summary: str) -> dict:
    return {"type": "compaction", "id": i, "parentId": "u0", "timestamp": "2025-03-04T05:06:09.000Z",
            "summary": summary, "firstKeptEntryId": None, "tokensBefore": 10,
            "systemMessage": SYSTEM}  # fmt: skip


A, B = _compaction("ca", "A went left"), _compaction("cb", "B went right")


def test_equal_content_from_different_entries_is_shared():
    rows = projection_diff([USER, A], [USER, B])
    shared = [r for r in rows if r.side == "both"]
    assert [(r.source_id, r.source_b, r.role) for r in shared] == [("ca", "cb", "system")]
    assert sorted((r.side, r.source_id) for r in rows if r.side != "both") == [
        ("a", "ca"),
        ("b", "cb"),
    ]


def test_the_compare_page_says_which_are_shared_by_content(viewer_client, make_session):
    session = make_session(("\n".join(json.dumps(e) for e in (HEADER, USER, A, B)) + "\n").encode())
    url = reverse("explorer:compare", args=[session.pk])
    data = viewer_client.get(url, {"a": "ca", "b": "cb", "format": "json"}).json()
    assert data["result"]["diff_counts"] == {"both": 1, "a": 1, "b": 1, "content": 1}
    line = data["result"]["diff"][0]
    assert (line["first_id"], line["first_b"]) == ("ca", "cb")
    html = viewer_client.get(url, {"a": "ca", "b": "cb"}).content.decode()
    assert "1 shared (1 by equal content from different entries)" in html
    assert (
        'shared message by equal content from different entries (A: <span class="mono ids">ca</span>, B: <span class="mono ids">cb</span>)'
        in html
    )
