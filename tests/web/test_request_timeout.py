"""A page that does not start answering in time gets 503 + Retry-After, not a hung client."""

from __future__ import annotations

import asyncio

from django.test import override_settings
from django.urls import reverse

from explorer.middleware import RequestTimeout


def _run(app, path: str = "/sessions/1/") -> list[dict]:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    async def main() -> None:
        scope = {"type": "http", "path": path, "method": "GET", "headers": []}
        await RequestTimeout(app)(scope, receive, send)
        await asyncio.sleep(0.3)  # give a late answer the chance to (wrongly) arrive

    asyncio.run(main())
    return sent


def _slow(delay: float, *, start_first: bool = False):
    async def app(scope, receive, send) -> None:
        if start_first:
            await send({"type": "http.response.start", "status": 200, "headers": []})
        await asyncio.sleep(delay)
        if not start_first:
            await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"late page"})

    return app


@override_settings(SESSIONS_REQUEST_TIMEOUT=0.1)
def test_a_slow_page_gets_503_and_its_late_answer_is_dropped():
    sent = _run(_slow(0.2))
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 503
    assert (b"retry-after", b"5") in sent[0]["headers"]
    assert b"SESSIONS_REQUEST_TIMEOUT" in sent[1]["body"]


@override_settings(SESSIONS_REQUEST_TIMEOUT=0.1)
def test_a_page_that_started_answering_is_left_to_finish():
    sent = _run(_slow(0.2, start_first=True))
    assert sent[0]["status"] == 200 and sent[-1]["body"] == b"late page"


@override_settings(SESSIONS_REQUEST_TIMEOUT=0.1)
def test_the_import_is_exempt():
    sent = _run(_slow(0.2), path=reverse("explorer:import"))
    assert sent[0]["status"] == 200


@override_settings(SESSIONS_REQUEST_TIMEOUT=0)
def test_zero_turns_the_guard_off():
    assert _run(_slow(0.05))[0]["status"] == 200


def test_the_served_application_has_the_guard():
    from sessions_site import asgi

    http = asgi.application.application_mapping["http"]
    assert isinstance(http, RequestTimeout)
    from django.conf import settings

    assert settings.SESSIONS_REQUEST_TIMEOUT == 30  # the default
