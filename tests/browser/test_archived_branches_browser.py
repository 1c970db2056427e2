"""Archived branches in Chromium at 1440 and 390 px: an editor archives the small
session's side branch from the entry panel, the tree hides it behind "1 archived · show",
the transcript's switcher says so, and Unarchive brings it back."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from explorer.models import ArchivedBranch
from tests.browser.conftest import SHOTS

SIDE = "e5f6a7b8"


@pytest.mark.parametrize("width", [1440, 390])
def test_archive_hide_show_and_unarchive_a_branch(demo, browser_page, width):
    page, base = browser_page
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{base}/sessions/{demo.pk}/?entry={SIDE}")
    panel = page.locator("#entry-panel")
    panel.get_by_text("Archive branch…").click()
    panel.get_by_label(re.compile("Why set aside")).fill("abandoned attempt")
    panel.get_by_role("button", name="Archive this branch").click()
    # Back on the entry, archived branches shown: the row marked, the panel's note.
    expect(page.locator(f'#text-tree li[data-id="{SIDE}"] .tag-archived')).to_be_visible()
    expect(page.locator(".archived-note")).to_contain_text("abandoned attempt")
    assert ArchivedBranch.objects.filter(session=demo, entry_id=SIDE).exists()
    page.screenshot(path=str(SHOTS / f"archived-shown-{width}.png"), full_page=False)
    # Hidden: gone from the text tree and the graph, the toggle says how many.
    page.locator("#tree-panel .archived-toggle").click()
    expect(page.locator(f'#text-tree li[data-id="{SIDE}"]')).to_have_count(0)
    expect(page.locator("#tree-panel .archived-toggle")).to_have_text("1 archived · show")
    expect(page.locator("#graph-panel .archived-toggle")).to_have_text("1 archived · show")
    expect(page.locator("#graph .ge-archived")).to_have_count(0)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=str(SHOTS / f"archived-hidden-{width}.png"), full_page=False)
    # The transcript's switcher leaves it out and offers it.
    page.goto(f"{base}/sessions/{demo.pk}/transcript/")
    switch = page.locator(".t-switch").first
    expect(switch.locator(".archived-toggle")).to_have_text("1 archived · show")
    switch.scroll_into_view_if_needed()
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=str(SHOTS / f"archived-transcript-{width}.png"), full_page=False)
    switch.locator(".archived-toggle").click()
    expect(page.locator(".t-switch .tag-archived").first).to_be_visible()
    # Unarchive from the panel: the toggle goes, the branch is back.
    page.goto(f"{base}/sessions/{demo.pk}/?entry={SIDE}&archived=show")
    page.locator("#entry-panel").get_by_role("button", name="Unarchive").click()
    expect(page.locator(".archived-toggle")).to_have_count(0)
    expect(page.locator(f'#text-tree li[data-id="{SIDE}"]')).to_have_count(1)
    assert not ArchivedBranch.objects.exists()
    assert not page.errors, page.errors
