"""Every page of every Claude Code and Codex example file, in Chromium: each tab loads with no
script error and the header says whose file it is and that costs are estimates."""

from __future__ import annotations

import json
import os

import pytest

from explorer.agent_import import import_agent_file
from tests.browser.conftest import SHOTS
from tests.conftest import AGENT_FACTS, FIXTURES_DIR

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs a loop

from playwright.sync_api import expect  # noqa: E402

pytestmark = pytest.mark.agent_fixtures

FILES = (
    sorted(json.loads(AGENT_FACTS.read_text())["files"])
    if AGENT_FACTS.is_file()
    else ["missing.jsonl"]  # deselected by the agent_fixtures marker
)
TABS = [
    "",
    "transcript/",
    "context/",
    "compactions/",
    "compare/",
    "timeline/",
    "search/?q=the",
    "integrity/",
    "problems/",
    "secrets/",
    "review/",
]


@pytest.mark.parametrize("rel", FILES)
def test_every_page_of_an_example_file(rel, browser_page):
    page, base = browser_page
    result = import_agent_file(str(FIXTURES_DIR / rel))
    assert result.ok, [str(p) for p in result.errors]
    session = result.session
    for tab in TABS:
        response = page.goto(f"{base}/sessions/{session.pk}/{tab}")
        assert response is not None and response.status == 200, (tab, response)
        if tab == "problems/":
            continue  # a plain page of its own, without the session header
        expect(page.locator(".session-head .badge.agent")).to_have_text(session.agent_name)
        expect(page.locator(".agent-notes")).to_contain_text("Costs are estimates")
    page.goto(f"{base}/sessions/{session.pk}/")
    page.screenshot(path=str(SHOTS / f"agent-{rel.replace('/', '_')}.png"))
    assert page.errors == []
