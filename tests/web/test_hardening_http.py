"""The request-size guard answers before any body is read; the import takes big bodies
from admins only."""

from __future__ import annotations

import pytest
from asgiref.testing import ApplicationCommunicator
from channels.db import database_sync_to_async
from django.test import override_settings

from tests.live.conftest import session_cookie

pytestmark = pytest.mark.django_db(transaction=True)

MIB = 1024 * 1024


def http_scope(path: str, *, method: str = "POST", headers=()) -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


async def answer(comm: ApplicationCommunicator) -> tuple[int, bytes]:
    start = await comm.receive_output(timeout=10)
    assert start["type"] == "http.response.start"
    body = b""
    while True:
        message = await comm.receive_output(timeout=10)
        body += message.get("body", b"")
        if not message.get("more_body"):
            return start["status"], body


def app():
    from sessions_site.asgi import application

    return application


@pytest.mark.parametrize(
    ("path", "length", "status"),
    [
        ("/", 600 * MIB, 413),  # a small cap on every page
        ("/sessions/1/label/", 9 * MIB, 413),
        ("/import/", 5 * 1024 * MIB, 413),  # beyond the 4 GiB upload limit
        ("/import/", 600 * MIB, 403),  # within it, but anonymous
        ("/", "12abc", 413),  # a malformed length is never guessed
        ("/", "²", 413),
    ],
)
async def test_it_answers_before_reading_a_declared_body(path, length, status):
    comm = ApplicationCommunicator(
        app(), http_scope(path, headers=[(b"content-length", str(length).encode())])
    )
    # No body is ever sent: the answer comes from the headers alone.
    code, body = await answer(comm)
    assert code == status
    assert (b"limit" in body) if status == 413 else (b"Only admins" in body)
    await comm.wait(timeout=5)


async def test_it_counts_streamed_bytes_when_no_length_is_declared():
    comm = ApplicationCommunicator(
        app(), http_scope("/sessions/1/label/", headers=[(b"transfer-encoding", b"chunked")])
    )
    chunk = b"x" * MIB
    for _ in range(9):
        await comm.send_input({"type": "http.request", "body": chunk, "more_body": True})
    code, body = await answer(comm)
    assert code == 413
    assert b"8,388,608 bytes" in body
    await comm.wait(timeout=5)


async def test_a_length_that_lies_is_caught_by_the_count():
    comm = ApplicationCommunicator(
        app(), http_scope("/sessions/1/label/", headers=[(b"content-length", b"10")])
    )
    for _ in range(9):
        await comm.send_input({"type": "http.request", "body": b"y" * MIB, "more_body": True})
    code, _body = await answer(comm)
    assert code == 413
    await comm.wait(timeout=5)


async def test_an_admin_may_send_a_large_import_and_nobody_else(admin_user, viewer_user):
    for user, guarded in ((viewer_user, True), (admin_user, False)):
        cookie = await database_sync_to_async(session_cookie)(user)
        comm = ApplicationCommunicator(
            app(),
            http_scope(
                "/import/",
                headers=[(b"content-length", str(20 * MIB).encode()), (b"cookie", cookie)],
            ),
        )
        if not guarded:
            # Past the guard Django reads the body (and its CSRF check refuses a bare post).
            for last in [False] * 19 + [True]:
                await comm.send_input(
                    {"type": "http.request", "body": b"z" * MIB, "more_body": not last}
                )
        code, body = await answer(comm)
        assert code == 403
        assert (b"Only admins may import" in body) is guarded
        await comm.wait(timeout=10)


@override_settings(SESSIONS_MAX_UPLOAD_BYTES=1000)
async def test_the_import_limit_follows_the_setting(admin_user):
    cookie = await database_sync_to_async(session_cookie)(admin_user)
    comm = ApplicationCommunicator(
        app(),
        http_scope(
            "/import/", headers=[(b"content-length", str(200 * 1024).encode()), (b"cookie", cookie)]
        ),
    )
    code, body = await answer(comm)
    assert code == 413 and b"SESSIONS_MAX_UPLOAD_BYTES" in body
    await comm.wait(timeout=5)


async def test_small_requests_pass():
    comm = ApplicationCommunicator(app(), http_scope("/healthz", method="GET"))
    await comm.send_input({"type": "http.request", "body": b"", "more_body": False})
    code, body = await answer(comm)
    assert (code, body) == (200, b"ok")
    await comm.wait(timeout=5)


# -- WebSocket origin ----------------------------------------------------------------------


async def ws_handshake(headers, *, user=None, scheme: str = "ws") -> bool:
    from channels.testing import WebsocketCommunicator

    if user is not None:
        headers = [*headers, (b"cookie", await database_sync_to_async(session_cookie)(user))]
    comm = WebsocketCommunicator(app(), "/ws/sessions/999999/", headers=headers)
    comm.scope["scheme"] = scheme
    connected, _code = await comm.connect(timeout=5)
    await comm.disconnect()
    return connected


@pytest.mark.parametrize(
    ("host", "origin", "scheme", "allowed"),
    [
        (b"localhost:8000", b"http://localhost:8000", "ws", True),
        (b"localhost:8000", b"http://localhost:9999", "ws", False),  # another local page
        (b"localhost:8000", b"http://localhost", "ws", False),
        (b"localhost", b"http://localhost:80", "ws", True),  # the default port
        (b"localhost:8000", b"https://localhost:8000", "ws", False),  # another scheme
        (b"localhost:8443", b"https://localhost:8443", "wss", True),
        (b"evil.example", b"http://evil.example", "ws", False),  # not an allowed host
        (b"localhost:8000", b"null", "ws", False),
        (b"localhost:8000", b"http://localhost:8000/x", "ws", False),
        (b"localhost:8000", b"http://localhost:99999999", "ws", False),
        (b"localhost:8000", None, "ws", False),
    ],
)
async def test_the_websocket_origin_must_match_scheme_host_and_port(
    viewer_user, host, origin, scheme, allowed
):
    headers = [(b"host", host)] + ([(b"origin", origin)] if origin else [])
    assert await ws_handshake(headers, user=viewer_user, scheme=scheme) is allowed


async def test_a_trusted_origin_may_connect(viewer_user, settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://explorer.example.org"]
    headers = [(b"host", b"127.0.0.1:8000"), (b"origin", b"https://explorer.example.org")]
    assert await ws_handshake(headers, user=viewer_user)
    headers = [(b"host", b"127.0.0.1:8000"), (b"origin", b"https://explorer.example.org:8443")]
    assert not await ws_handshake(headers, user=viewer_user)


async def test_behind_a_tls_proxy_the_forwarded_scheme_counts(viewer_user, settings):
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    headers = [
        (b"host", b"localhost"),
        (b"origin", b"https://localhost"),
        (b"x-forwarded-proto", b"https"),
    ]
    assert await ws_handshake(headers, user=viewer_user)
