"""Crafted content that used to end in a 500: a lone surrogate in a message (the context
JSON), an entry nested a thousand levels deep (the entry JSON), and usage figures past any
real context (the Timeline)."""

from __future__ import annotations

import json

import pytest

HEADER = (
    b'{"type":"session","version":3,"id":"0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a99",'
    b'"timestamp":"2025-03-04T05:06:07.089Z","cwd":"/p"}\n'
)


def _user(eid: str, parent: str | None, content: str, second: int = 8) -> str:
    """A user message line; ``content`` is JSON text (it may hold what json.dumps won't)."""
    p = "null" if parent is None else f'"{parent}"'
    return (
        f'{{"type":"message","id":"{eid}","parentId":{p},'
        f'"timestamp":"2025-03-04T05:06:{second:02d}.000Z","message":{{"role":"user",'
        f'"content":{content},"timestamp":1741064768000}}}}\n'
    )


def test_the_context_json_of_a_message_with_a_lone_surrogate(make_session, viewer_client):
    s = make_session(HEADER + _user("a1b2c3d4", None, r'"bad \ud800 here"').encode())
    r = viewer_client.get(f"/sessions/{s.pk}/context/?format=json")
    assert r.status_code == 200
    text = r.content.decode("utf-8")  # valid UTF-8
    assert "bad \ufffd here" in json.dumps(json.loads(text), ensure_ascii=False)


def test_the_entry_json_of_an_entry_nested_a_thousand_deep(make_session, viewer_client):
    deep = "[" * 1000 + '"the bottom"' + "]" * 1000
    content = '[{"type":"text","text":"hi","deep":' + deep + "}]"
    s = make_session(HEADER + _user("a1b2c3d4", None, content).encode())
    r = viewer_client.get(f"/sessions/{s.pk}/entry/?id=a1b2c3d4&format=json")
    assert r.status_code == 200
    body = r.content.decode()
    assert body.count("[") >= 1000 and '"the bottom"' in body
    assert '"entry_id": "a1b2c3d4"' in body


@pytest.mark.parametrize(
    "number",
    ["12345678901234567890123", "1e308", "-12345678901234567890123", "9" * 28, "9" * 35, "9" * 310],
)
def test_the_timeline_of_usage_past_any_context(make_session, viewer_client, number):
    usage = (
        f'{{"input":{number},"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":{number},'
        '"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}'
    )
    lines = [HEADER.decode()]
    parent = None
    for i in range(3):
        lines.append(_user(f"a{i}000000", parent, '"q"', 10 + 2 * i))
        lines.append(
            f'{{"type":"message","id":"b{i}000000","parentId":"a{i}000000",'
            f'"timestamp":"2025-03-04T05:06:{11 + 2 * i}.000Z","message":{{"role":"assistant",'
            f'"content":[{{"type":"text","text":"a"}}],"usage":{usage if i == 1 else usage.replace(number, "100")},'
            f'"stopReason":"stop","provider":"p","model":"m","api":"x","timestamp":1741064769000}}}}\n'
        )
        parent = f"b{i}000000"
    s = make_session("".join(lines).encode())
    page = viewer_client.get(f"/sessions/{s.pk}/timeline/")
    assert page.status_code == 200 and "<svg" in page.content.decode()
    data = viewer_client.get(f"/sessions/{s.pk}/timeline/?format=json")
    assert data.status_code == 200 and data.json()["turns"] == 3
