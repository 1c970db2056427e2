"""Hostile content in messages, labels, names and tool output is rendered inert."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from explorer.rendering import image_data_uri, render_markdown, sanitize_html
from explorer.session import jsonfmt
from explorer.session.graph import GraphNode, fold_tree, to_dot

PAYLOADS = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(2)">',
    "<svg onload=alert(3)><circle r=5 /></svg>",
    "[click](javascript:alert(4))",
    '<a href="javascript:alert(5)">x</a>',
    "<iframe src=//evil.example></iframe>",
    '<div style="background:url(javascript:alert(6))" onclick="alert(7)">d</div>',
    "<svg><foreignObject><script>alert(8)</script></foreignObject></svg>",
    '"><svg/onload=alert(9)>',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(10)>",
    "[x](  JaVaScRiPt:alert(11))",
    "<object data=javascript:alert(12)></object>",
    "<form action=javascript:alert(13)><button>go</button></form>",
    '<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxNCk8L3NjcmlwdD4=">d</a>',
    "![img](javascript:alert(15))",
]

_TAG = re.compile(r"<([a-zA-Z][\w:-]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>")
_ATTR = re.compile(r"([\w:-]+)\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>]+)")
_BAD_TAGS = {"iframe", "object", "embed", "foreignobject", "base", "use"}


def active_markup(html: str) -> list[str]:
    """Real tags (not escaped text) that could run code: dangerous elements, event handler
    attributes, script URLs. The page's own static scripts are allowed."""
    found = []
    for m in _TAG.finditer(html):
        tag = m.group(1).lower()
        attrs = {k.lower(): v.strip("\"'").strip().lower() for k, v in _ATTR.findall(m.group(2))}
        bad = tag in _BAD_TAGS
        if tag == "script" and not attrs.get("src", "").startswith("/static/"):
            bad = True
        if any(k.startswith("on") for k in attrs):
            bad = True
        for k in ("href", "src", "action", "xlink:href", "formaction"):
            if attrs.get(k, "").startswith(("javascript:", "vbscript:", "data:text")):
                bad = True
        if bad:
            found.append(m.group(0)[:200])
    return found


def DANGER_search(html: str) -> list[str]:  # noqa: N802 - reads like the regex it replaced
    return active_markup(html)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_it_sanitises_markdown(payload):
    html = str(render_markdown(payload))
    assert not DANGER_search(html), html
    assert not re.search(r"<a\b[^>]*href=[\"']?\s*javascript:", html, re.I), html
    assert "<img" not in html


def test_raw_html_in_a_message_shows_as_escaped_text():
    html = str(render_markdown('Look: <script>alert(1)</script> and <b onclick="x()">b</b>'))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b onclick" in html and "<b" not in html.replace("&lt;b", "")
    assert "<code>&lt;i&gt;</code>" in str(render_markdown("`<i>`"))


def test_it_keeps_ordinary_markdown():
    html = str(render_markdown("# Title\n\n**bold** and `code` and [link](https://example.com)"))
    assert "<strong>bold</strong>" in html
    assert "<code>code</code>" in html
    assert 'href="https://example.com"' in html
    assert "noopener" in html


def test_it_drops_page_classes_but_keeps_code_language():
    html = str(
        sanitize_html('<div class="button primary">x</div><code class="language-python">y</code>')
    )
    assert "button" not in html
    assert 'class="language-python"' in html


def test_it_refuses_unsafe_images():
    assert image_data_uri("PHN2Zz4=", "image/svg+xml") is None
    assert image_data_uri("abc<def", "image/png") is None
    assert image_data_uri("iVBORw0KGgo=", "image/png") == "data:image/png;base64,iVBORw0KGgo="


def test_it_escapes_dot_labels():
    nodes = [
        GraphNode(
            "r", None, "message", "user", label='"]; x [URL="javascript:alert(1)', title="<b>t</b>"
        )
    ]
    dot = to_dot(fold_tree(nodes))
    assert 'URL="javascript' not in dot
    assert '\\"]; x [URL=\\"javascript' in dot


def _hostile_session() -> bytes:
    p = PAYLOADS
    lines = [
        {
            "type": "session",
            "version": 3,
            "id": "xss-session",
            "timestamp": "2025-03-04T05:06:07.089Z",
            "cwd": p[0],
        },
        {
            "type": "message",
            "id": "u1",
            "parentId": None,
            "timestamp": "2025-03-04T05:06:08.000Z",
            "message": {"role": "user", "content": "\n\n".join(p), "timestamp": 1},
        },
        {
            "type": "message",
            "id": "a1",
            "parentId": "u1",
            "timestamp": "2025-03-04T05:06:09.000Z",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": p[1]},
                    {"type": "text", "text": p[2] + p[3]},
                    {
                        "type": "toolCall",
                        "id": "c1",
                        "name": p[0],
                        "arguments": {"path": p[8], "command": p[1]},
                    },
                ],
                "api": "x",
                "provider": p[0],
                "model": p[2],
                "usage": {
                    "input": 1,
                    "output": 1,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "totalTokens": 2,
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
                },
                "stopReason": "toolUse",
                "timestamp": 2,
            },
        },
        {
            "type": "message",
            "id": "t1",
            "parentId": "a1",
            "timestamp": "2025-03-04T05:06:10.000Z",
            "message": {
                "role": "toolResult",
                "toolCallId": "c1",
                "toolName": p[0],
                "content": [
                    {"type": "text", "text": "\n".join(p)},
                    {"type": "image", "data": "PHN2Zz4=", "mimeType": "image/svg+xml"},
                ],
                "isError": False,
                "timestamp": 3,
            },
        },
        {
            "type": "label",
            "id": "l1",
            "parentId": "t1",
            "timestamp": "2025-03-04T05:06:11.000Z",
            "targetId": "u1",
            "label": p[8],
        },
        {
            "type": "compaction",
            "id": "c9",
            "parentId": "l1",
            "timestamp": "2025-03-04T05:06:12.000Z",
            "summary": "\n".join(p),
            "firstKeptEntryId": "a1",
            "tokensBefore": 10,
        },
        {
            "type": "session_info",
            "id": "s1",
            "parentId": "c9",
            "timestamp": "2025-03-04T05:06:13.000Z",
            "name": p[2],
        },
    ]
    return b"".join(jsonfmt.dumps(x).encode() + b"\n" for x in lines)


@pytest.fixture
def hostile(make_session):
    return make_session(_hostile_session())


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("explorer:session_detail", {}),
        ("explorer:session_detail", {"entry": "a1"}),
        ("explorer:entry", {"id": "u1"}),
        ("explorer:entry", {"id": "a1", "full": "1"}),
        ("explorer:entry", {"id": "t1"}),
        ("explorer:context", {}),
        ("explorer:compactions", {}),
        ("explorer:compare", {"a": "s1", "b": "u1"}),
        ("explorer:timeline", {}),
        ("explorer:session_search", {"q": "alert"}),
        ("explorer:integrity", {}),
        ("explorer:graph_svg", {}),
    ],
)
def test_it_renders_hostile_session_inert(viewer_client, hostile, name, params):
    r = viewer_client.get(reverse(name, args=[hostile.pk]), params)
    assert r.status_code == 200
    html = r.content.decode()
    assert not DANGER_search(html), DANGER_search(html)
    assert "<svg onload" not in html.lower()


def test_it_renders_hostile_global_search_inert(viewer_client, hostile):
    r = viewer_client.get(reverse("explorer:search"), {"q": "script"})
    assert r.status_code == 200
    html = r.content.decode()
    assert "&lt;script&gt;" in html or "<mark>script</mark>" in html
    assert not DANGER_search(html)


def test_one_reused_converter_keeps_messages_apart():
    """The per-thread Markdown converter is reset after each message: nothing of one
    message (code blocks, stashed raw text, a failed conversion) shows up in the next."""
    from explorer.rendering import render_markdown

    first = render_markdown("```python\nsecret_of_the_first = 1\n```\n\n<b>raw</b>")
    assert "secret_of_the_first" in first and "&lt;b&gt;raw&lt;/b&gt;" in first
    second = render_markdown("just *the second*")
    assert second.strip() == "<p>just <em>the second</em></p>"
    assert render_markdown("just *the second*") == second
