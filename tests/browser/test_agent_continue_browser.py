"""In Chromium, as an editor: a Claude Code example's pages offer no edit of what the model saw,
each tab says where its projection comes from, and *Continue as a Pi session* lands on a new
Pi session that offers them and links back."""

from __future__ import annotations

import os

import pytest

from explorer.agent_import import import_agent_file
from tests.conftest import FIXTURES_DIR

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs a loop

from playwright.sync_api import expect  # noqa: E402

pytestmark = pytest.mark.agent_fixtures

EDGE = FIXTURES_DIR / "claude-code" / "claude-code-log" / "edge_cases.jsonl"


def test_continue_as_a_pi_session_in_chromium(browser_page):
    from explorer.models import Session

    page, base = browser_page
    result = import_agent_file(str(EDGE))
    assert result.ok
    session = result.session
    page.goto(f"{base}/sessions/{session.pk}/compactions/")
    expect(page.locator(".projection-source")).to_contain_text("Projection derived")
    expect(page.get_by_role("link", name="Compact now…")).to_have_count(0)
    page.goto(f"{base}/sessions/{session.pk}/integrity/")
    expect(page.locator("#integrity-panel")).to_contain_text("Duplicate uuids")
    page.get_by_role("button", name="Continue as a Pi session").click()
    expect(page.locator("ul.messages")).to_contain_text("as a Pi session")
    new = Session.objects.exclude(pk=session.pk).get()
    assert page.url.endswith(f"/sessions/{new.pk}/") and new.agent == "pi"
    expect(page.locator(".continued")).to_contain_text("Continues a route of the Claude Code")
    expect(page.locator(".projection-source")).to_have_count(0)
    page.goto(f"{base}/sessions/{new.pk}/compactions/")
    expect(page.get_by_role("link", name="Compact now…")).to_have_count(1)
    page.goto(f"{base}/sessions/{session.pk}/")
    expect(page.locator(".continued a")).to_have_attribute("href", f"/sessions/{new.pk}/")
    assert page.errors == []
