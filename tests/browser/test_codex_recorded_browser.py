"""In Chromium: a Codex session's recorded context after a compaction (Raw vs projected,
Compactions, Integrity), its joined fork (a branch, its file downloadable), the list's agent
filter; and a Claude Code session's tabs beside it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.core.management import call_command

from explorer.models import Session
from tests.browser.conftest import SHOTS
from tests.conftest import FIXTURES_DIR

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs a loop

from playwright.sync_api import expect  # noqa: E402

pytestmark = pytest.mark.agent_fixtures

CODEX_OWN = FIXTURES_DIR / "codex" / "own" / "sessions" / "2026" / "10" / "12"
CC_REWIND = FIXTURES_DIR / "claude-code" / "claude-code-log" / "dag_compact_after_rewind.jsonl"
FORK_ID = "019a2000-0000-7000-8000-0000000000e2"


def test_codex_recorded_context_and_joined_fork(browser_page):
    page, base = browser_page
    call_command("import_sessions", str(CODEX_OWN))
    session = Session.objects.get()
    page.goto(f"{base}/sessions/{session.pk}/context/?leaf=L38")
    expect(page.locator("body")).to_contain_text("context Codex recorded at this compaction")
    expect(page.locator(".codex-forks")).to_contain_text(FORK_ID)
    page.screenshot(path=str(SHOTS / "codex-recorded-context.png"), full_page=True)
    page.goto(f"{base}/sessions/{session.pk}/compactions/?leaf=L38")
    expect(page.locator("#recorded-context")).to_contain_text("Context Codex recorded")
    expect(page.locator(".recorded-list li")).to_have_count(2)
    page.screenshot(path=str(SHOTS / "codex-recorded-compactions.png"), full_page=True)
    page.goto(f"{base}/sessions/{session.pk}/integrity/")
    table = page.locator("table.recorded-checks")
    expect(table).to_be_visible()
    expect(table.locator("tbody tr")).to_have_count(1)
    expect(table.locator("tbody tr td").last).to_have_text("yes")
    page.screenshot(path=str(SHOTS / "codex-recorded-integrity.png"), full_page=True)
    # The fork's own turn is a branch of the parent's tree.
    page.goto(f"{base}/sessions/{session.pk}/context/?leaf={FORK_ID}:L11")
    expect(page.locator("body")).to_contain_text("Eintrag auf Deutsch.")
    page.screenshot(path=str(SHOTS / "codex-fork-branch.png"), full_page=True)
    with page.expect_download() as download:
        page.locator(".codex-forks a").first.click()
    path = download.value.path()
    assert path is not None
    assert (
        Path(path).read_bytes()
        == (CODEX_OWN / f"rollout-2026-10-12T10-30-00-{FORK_ID}.jsonl").read_bytes()
    )
    assert page.errors == []


def test_claude_code_tabs_and_the_agent_filter(browser_page):
    page, base = browser_page
    call_command("import_sessions", str(CC_REWIND), str(CODEX_OWN))
    cc = Session.objects.get(agent="claude-code")
    page.goto(f"{base}/sessions/{cc.pk}/context/")
    expect(page.locator(".projection-source")).to_contain_text("Projection derived")
    expect(page.locator(".codex-forks")).to_have_count(0)
    page.screenshot(path=str(SHOTS / "claude-code-context.png"), full_page=True)
    page.goto(f"{base}/sessions/{cc.pk}/integrity/")
    expect(page.locator("table.recorded-checks")).to_have_count(0)
    page.screenshot(path=str(SHOTS / "claude-code-integrity.png"), full_page=True)
    page.goto(f"{base}/?agent=codex")
    expect(page.locator(".badge.agent")).to_have_count(1)
    expect(page.locator(".badge.agent").first).to_have_text("Codex")
    page.goto(f"{base}/?agent=claude-code")
    expect(page.locator(".badge.agent").first).to_have_text("Claude Code")
    page.screenshot(path=str(SHOTS / "list-claude-code.png"), full_page=True)
    assert page.errors == []
