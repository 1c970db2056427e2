"""Integrity panel: each kind of damage is found and located."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from explorer.session import jsonfmt


def _broken() -> bytes:
    ts = "2025-03-04T05:06:08.000Z"
    lines = [
        {"type": "session", "version": 3, "id": "broken-session", "timestamp": ts, "cwd": "/p"},
        {
            "type": "message",
            "id": "u1",
            "parentId": None,
            "timestamp": ts,
            "message": {"role": "user", "content": "hi", "timestamp": 1},
        },
        {
            "type": "message",
            "id": "a1",
            "parentId": "u1",
            "timestamp": ts,
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "type": "toolCall",
                        "id": "call_ok",
                        "name": "read",
                        "arguments": {"path": "x"},
                    }
                ],
                "api": "a",
                "provider": "p",
                "model": "m",
                "usage": {
                    "input": 1,
                    "output": 1,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "totalTokens": 2,
                },
                "stopReason": "toolUse",
                "timestamp": 2,
            },
        },
        {
            "type": "message",
            "id": "t1",
            "parentId": "a1",
            "timestamp": ts,
            "message": {
                "role": "toolResult",
                "toolCallId": "call_ok",
                "toolName": "read",
                "content": [{"type": "text", "text": "ok"}],
                "isError": False,
                "timestamp": 3,
            },
        },
        {
            "type": "message",
            "id": "t2",
            "parentId": "t1",
            "timestamp": ts,
            "message": {
                "role": "toolResult",
                "toolCallId": "call_missing",
                "toolName": "read",
                "content": [{"type": "text", "text": "?"}],
                "isError": False,
                "timestamp": 4,
            },
        },
        {
            "type": "compaction",
            "id": "c1",
            "parentId": "t2",
            "timestamp": ts,
            "summary": "s",
            "firstKeptEntryId": "zzzzzzzz",
            "tokensBefore": 5,
        },
        {
            "type": "context_edit",
            "id": "e1",
            "parentId": "c1",
            "timestamp": ts,
            "targetId": "c1",
            "replacement": None,
        },
        {
            "type": "message",
            "id": "o1",
            "parentId": "gone0000",
            "timestamp": ts,
            "message": {"role": "user", "content": "orphan", "timestamp": 5},
        },
    ]
    return b"".join(jsonfmt.dumps(x).encode() + b"\n" for x in lines)


@pytest.fixture
def broken(make_session):
    from explorer import services

    result = services.import_bytes(_broken(), source_path="", user=None)
    assert result.session is not None
    return result.session


def test_it_lists_structural_problems(viewer_client, broken):
    """The panel and ``pisession validate`` name the same problems in the same words."""
    html = viewer_client.get(reverse("explorer:integrity", args=[broken.pk])).content.decode()
    # The engine's own diagnostics (the words ``pisession validate`` prints for the file).
    assert "parentId &quot;gone0000&quot; names no entry" in html
    assert "firstKeptEntryId &quot;zzzzzzzz&quot; is not before the compaction on its path" in html
    assert "context_edit target &quot;c1&quot; does not contribute editable content" in html


def test_it_finds_tool_results_without_calls_on_request(viewer_client, broken):
    url = reverse("explorer:integrity", args=[broken.pk])
    r = viewer_client.get(url, {"section": "tools"}, headers={"HX-Request": "true"})
    html = r.content.decode()
    assert r.status_code == 200 and "<html" not in html
    assert "no assistant call call_missing above it" in html
    assert ">t1<" not in html  # answered results are fine
    full = viewer_client.get(url, {"section": "tools"}).content.decode()
    assert "call_missing" in full and "<html" in full
    # Findings keep their section open; the structural ones too.
    assert '<details class="integrity-section" id="tool-results" open>' in html


def test_a_clean_session_has_no_findings(viewer_client, make_session):
    s = make_session()
    html = viewer_client.get(
        reverse("explorer:integrity", args=[s.pk]), {"section": "tools"}
    ).content.decode()
    assert "no problems found" in html
    # Nothing to show: every section is folded, the tool results' too (it opened empty).
    assert re.findall(r'<details class="integrity-section"[^>]*>', html)
    assert not re.findall(r'<details class="integrity-section"[^>]*\bopen\b', html)


def test_the_tool_results_section_is_open_while_it_is_checked(viewer_client, make_session):
    s = make_session()
    html = viewer_client.get(reverse("explorer:integrity", args=[s.pk])).content.decode()
    assert '<details class="integrity-section" id="tool-results" open>' in html
    assert "Checking every tool result" in html
