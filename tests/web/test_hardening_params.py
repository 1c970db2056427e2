"""Hostile parameter values on every URL and socket message: a 400 or the documented
fallback, never a 500; deep nesting renders without recursion limits."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from explorer import params
from tests.live.conftest import close_all, ws_connect  # noqa: F401 - the socket fixture

HOSTILE = [
    "²",  # isdigit() says yes, int() says no
    "٣",  # int() reads 3
    "1" * 5000,  # over int()'s 4,300 digits
    "9" * 30,  # over 64 bits
    "-1",
    "",
    "x" * 10240,
    "\x00",
    "1e999",
    "\ufffd",
    "%zz",
    "../../etc/passwd",
    '{"a":',
]
PARAMS = [
    "leaf", "entry", "id", "a", "b", "c", "q", "type", "format", "n", "indent", "stop",
    "first", "before", "after", "root", "expand", "filter", "window", "reserve", "offset",
    "all", "folded", "full", "raw", "section", "sort", "original", "partial", "target",
    "preview", "page", "via", "status",
]  # fmt: skip
SESSION_URLS = [
    "session_detail", "graph_svg", "tree_chain", "entry", "context", "compactions", "compare",
    "timeline", "session_search", "integrity", "live", "problems", "session_stats", "export",
    "branch_download", "edit", "undo", "label", "rename", "navigate", "compact", "fork",
    "transcript", "transcript_cursor", "session_secrets",
]  # fmt: skip
GLOBAL_URLS = ["session_list", "search", "import", "secrets"]


def deep_session(depth: int = 1000) -> bytes:
    nested = "[" * depth + "]" * depth
    obj = '{"k":' * depth + "1" + "}" * depth
    return (
        b'{"type":"session","version":3,"id":"deep","timestamp":"2025-03-04T05:06:07.089Z","cwd":"/"}\n'
        + (
            '{"type":"message","id":"u1","parentId":null,"timestamp":"2025-03-04T05:06:08.000Z",'
            f'"message":{{"role":"user","content":"deep","timestamp":1,"extra":{nested}}}}}\n'
            '{"type":"message","id":"a1","parentId":"u1","timestamp":"2025-03-04T05:06:09.000Z",'
            '"message":{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"x",'
            f'"arguments":{obj}}}],"api":"a","provider":"p","model":"m","stopReason":"toolUse",'
            '"timestamp":2}}\n'
        ).encode()
    )


@pytest.fixture
def sessions(make_session):
    return [make_session(), make_session(deep_session())]


def _get(client, url: str, query: dict) -> int:
    response = client.get(url, query)
    assert response.status_code < 500, (url, query, response.status_code)
    return response.status_code


@pytest.mark.parametrize("name", SESSION_URLS)
def test_every_session_url_survives_hostile_parameters(admin_client, sessions, name):
    for session in sessions:
        url = reverse(f"explorer:{name}", args=[session.pk])
        for value in HOSTILE:
            _get(admin_client, url, dict.fromkeys(PARAMS, value))
        for i, key in enumerate(PARAMS):
            _get(admin_client, url, {key: HOSTILE[i % len(HOSTILE)]})
            _get(admin_client, url, {key: HOSTILE[(i + 3) % len(HOSTILE)]})


@pytest.mark.parametrize("name", GLOBAL_URLS)
def test_every_global_url_survives_hostile_parameters(admin_client, sessions, name):
    url = reverse(f"explorer:{name}")
    for value in HOSTILE:
        _get(admin_client, url, dict.fromkeys(PARAMS, value))
    for i, key in enumerate(PARAMS):
        _get(admin_client, url, {key: HOSTILE[i % len(HOSTILE)]})


@pytest.mark.parametrize("name", ["edit", "undo", "label", "rename", "navigate", "compact"])
def test_every_write_survives_hostile_form_values(editor_client, sessions, name):
    fields = ["target", "leaf", "label", "name", "reason", "replacement", "summary", "mode",
              "keep_recent", "confirm", "edit", "entry", "text"]  # fmt: skip
    for session in sessions:
        url = reverse(f"explorer:{name}", args=[session.pk])
        for value in HOSTILE:
            response = editor_client.post(url, dict.fromkeys(fields, value))
            assert response.status_code < 500, (name, value[:20], response.status_code)


def test_the_unicode_digit_parameters_of_the_issue(viewer_client, sessions):
    url = reverse("explorer:tree_chain", args=[sessions[0].pk])
    for query in ({"first": "b2c3d4e5", "indent": "²"}, {"before": "d4e5f6a7", "n": "²"}):
        assert viewer_client.get(url, query).status_code == 200


def test_a_thousand_levels_render_with_the_raw_view(viewer_client, make_session):
    session = make_session(deep_session(1000))
    url = reverse("explorer:entry", args=[session.pk])
    for query in ({"id": "u1"}, {"id": "u1", "raw": "1"}, {"id": "a1", "full": "1", "raw": "1"}):
        response = viewer_client.get(url, query)
        assert response.status_code == 200, query
    assert "&quot;k&quot;" in response.content.decode()  # the raw view of the deep call


def test_a_hundred_thousand_levels_are_reported_with_their_depth(viewer_client, make_session):
    from explorer import files

    data = deep_session(100_000)
    session = make_session(data)
    problems = {p.line: p for p in session.problems.all()}
    assert problems[2].code == problems[3].code == "too-deep"
    assert "100,002 levels deep" in problems[2].message  # the entry, its message, the arrays
    assert files.export_bytes(session) == data
    for name in ("session_detail", "problems", "context", "integrity"):
        assert viewer_client.get(reverse(f"explorer:{name}", args=[session.pk])).status_code == 200


@pytest.mark.parametrize(
    ("value", "expected"),
    [("12", 12), ("-3", -3), ("²", None), ("٣", None), ("1" * 19, None), ("", None),
     (" 1", None), ("1\n", None), (True, None), (7, 7), (None, None), ([1], None)],
)  # fmt: skip
def test_parse_int_takes_ascii_digits_only(value, expected):
    assert params.parse_int(value) == expected


def test_int_param_clamps_and_falls_back():
    assert params.int_param("²", 5, 0, 10) == 5
    assert params.int_param("-50", 5, 0, 10) == 0
    assert params.int_param("999", 5, 0, 10) == 10


SOCKET_MESSAGES = [
    *({"type": "resume", "after": v} for v in [*HOSTILE, 10**30, -(10**30), 1.5, True, None, [1], {}]),
    *({"type": "resume", "after": 0, "tip": v, "follow": v} for v in HOSTILE),
    {"type": "resume", "after": {"nested": [1, 2]}, "tip": ["x"], "follow": {"a": 1}},
    {"type": "follow", "on": "x" * 10240},
    {"type": "sync"},
    {"type": "x" * 10240},
    {"type": None},
]  # fmt: skip
RAW_FRAMES = ["[1,2]", "null", "not json", "[" * 100_000 + "]" * 100_000, '{"type":' * 5000, "\x00"]


@pytest.mark.django_db(transaction=True)
async def test_every_socket_message_survives_hostile_values(ws_connect, viewer_user):  # noqa: F811
    from channels.db import database_sync_to_async

    from explorer import services
    from tests.conftest import SMALL_SESSION

    result = await database_sync_to_async(services.import_bytes)(SMALL_SESSION)
    comm, connected, _ = await ws_connect(
        f"/ws/sessions/{result.session.pk}/?format=json", user=viewer_user
    )
    assert connected
    try:
        frames = [json.dumps(m) for m in SOCKET_MESSAGES] + RAW_FRAMES
        for frame in frames:
            await comm.send_to(text_data=frame)
        # Still open and answering: a resume after everything gets its "resumed".
        await comm.send_to(text_data=json.dumps({"type": "resume", "after": 0}))
        while True:
            message = json.loads(await comm.receive_from(timeout=10))
            if message["type"] == "resumed" and message["lastPosition"] == 8:  # the last line
                break
    finally:
        await close_all([comm])
