"""Helpers for websocket tests: logged-in communicators against the real ASGI application."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator


def session_cookie(user) -> bytes:
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


@pytest.fixture
def ws_connect():
    """``await ws_connect(path, user=None, origin=...)`` → a connected communicator (or the
    refusal); every communicator is disconnected at the end of the test."""
    from sessions_site.asgi import application

    opened: list[WebsocketCommunicator] = []

    async def connect(path: str, *, user=None, origin: bytes = b"http://testserver"):
        headers = [(b"host", b"testserver")]
        if origin:
            headers.append((b"origin", origin))
        if user is not None:
            headers.append((b"cookie", await database_sync_to_async(session_cookie)(user)))
        comm = WebsocketCommunicator(application, path, headers=headers)
        opened.append(comm)
        connected, code = await comm.connect(timeout=5)
        return comm, connected, code

    yield connect
    # Disconnect is async; the test functions do it themselves via ``close_all``.
    connect.opened = opened  # type: ignore[attr-defined]


async def close_all(comms) -> None:
    for comm in comms:
        with contextlib.suppress(Exception):  # already closed by the server
            await comm.disconnect()


async def settled() -> None:
    """Wait until every broadcast already queued was sent (the import's live meter among
    them, which the projection worker sends up to half a second later). Off the event loop:
    the workers hand their sends to it, so blocking it would stall them."""
    from explorer import broadcast

    assert await asyncio.get_running_loop().run_in_executor(None, broadcast.drain, 30)


async def frames_for(comm, seconds: float) -> list:
    """Whatever the viewer was sent within ``seconds`` (for asserting that nothing was),
    without the communicator's receive timeout, which would cancel the consumer."""
    await comm.receive_nothing(timeout=seconds)
    return [message.get("text") or message.get("bytes") for message in comm.output_queue._queue]


@pytest.fixture
def small_session_file(tmp_path, small_session_bytes):
    path = tmp_path / "small.jsonl"
    path.write_bytes(small_session_bytes)
    return path
