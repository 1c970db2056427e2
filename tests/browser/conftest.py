"""Shared browser fixtures: a logged-in editor in Debian's Chromium, the small session."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from explorer import services

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs a loop

from playwright.sync_api import expect, sync_playwright  # noqa: E402

# Tests are not timed: on a loaded CI machine a write (append, index, broadcast) can take
# longer than Playwright's 5 s default before the page it leads to has loaded.
expect.set_options(timeout=30_000)

SHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]  # fmt: skip


def wait_for_js(page, expression: str, timeout: float = 30.0) -> None:
    """Wait until ``expression`` is truthy in the page, polling from Python.

    Playwright's ``wait_for_function`` re-evaluates a string predicate with ``eval`` inside
    the page once its first check fails, which the app's CSP (no ``unsafe-eval``) refuses:
    such a wait passes when the page is already settled and fails only on a slow machine.
    ``page.evaluate`` runs through the DevTools protocol, which the CSP does not govern."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"still false after {timeout:g} s: {expression}")
        time.sleep(0.05)


@contextmanager
def logged_in_page(
    live_server, django_user_model, *, role: str, username: str, width: int, height: int
) -> Iterator:
    """A Chromium page signed in as a new user with ``role``, its console and page errors
    collected on ``page.errors`` (tests assert that list stays empty)."""
    from django.conf import settings
    from django.test import Client

    from explorer.permissions import set_role

    user = django_user_model.objects.create_user(username=username, password="pw-e2e-123456")
    set_role(user, role)
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        context = browser.new_context(viewport={"width": width, "height": height})
        context.add_cookies(
            [{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}]
        )
        page = context.new_page()
        page.set_default_timeout(60_000)
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.errors = errors
        try:
            yield page
        finally:
            browser.close()


@pytest.fixture
def browser_page(live_server, transactional_db, django_user_model):
    with logged_in_page(
        live_server, django_user_model, role="editor", username="e2e", width=1500, height=950
    ) as page:
        yield page, live_server.url


@pytest.fixture
def demo(transactional_db):
    from tests.conftest import SMALL_SESSION

    return services.import_bytes(SMALL_SESSION, source_path="", user=None).session
