"""The figure pages in Chromium: the leaf picker swaps the panel and puts the leaf in the URL,
the figures shown match the JSON, and the pages render at desktop and phone widths."""

from __future__ import annotations

import json
import re

from playwright.sync_api import expect

from tests.browser.conftest import SHOTS


def test_the_leaf_picker_and_the_figures_agree_in_the_browser(demo, browser_page):  # noqa: F811
    page, base = browser_page
    url = f"{base}/sessions/{demo.pk}/context/"
    page.goto(url)
    expect(page.locator("#projected-estimate")).to_be_visible()
    picker = page.locator('select[name="leaf"]')
    other = picker.locator("option").nth(1).get_attribute("value")
    picker.select_option(other)
    expect(page).to_have_url(re.compile(r"leaf=" + re.escape(other)))
    expect(page.locator("#context-panel h2 .mono")).to_have_text(other)
    shown = int(page.locator("#projected-estimate").inner_text())
    data = json.loads(page.request.get(f"{url}?format=json&leaf={other}").text())
    assert shown == data["projected_tokens"]
    page.screenshot(path=str(SHOTS / "context-leaf-picker-1500.png"), full_page=True)
    assert page.errors == []
    page.goto(f"{url}?window=7")  # refused with status 400 and a message
    expect(page.locator("#ctx-errors")).to_contain_text("between 1,000 and 10,000,000")
    assert [e for e in page.errors if "400" not in e] == []
    page.errors.clear()
    page.set_viewport_size({"width": 390, "height": 844})
    for tab in ("context", "timeline", "compare"):
        page.goto(f"{base}/sessions/{demo.pk}/{tab}/?a=d4e5f6a7&b=e5f6a7b8")
        page.screenshot(path=str(SHOTS / f"{tab}-390.png"), full_page=True)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{base}/sessions/{demo.pk}/timeline/")
    expect(page.locator("svg.timeline .xtick").first).to_have_text("turn 1")
    page.screenshot(path=str(SHOTS / "timeline-1440.png"), full_page=True)
    page.goto(f"{base}/sessions/{demo.pk}/compare/?a=d4e5f6a7&b=e5f6a7b8")
    expect(page.locator("#wasted-cost")).to_be_visible()
    page.screenshot(path=str(SHOTS / "compare-1440.png"), full_page=True)
    page.goto(f"{base}/search/?q=demo")
    expect(page.locator("#search-count")).to_contain_text("hit")
    page.screenshot(path=str(SHOTS / "search-1440.png"), full_page=True)
    assert page.errors == []
