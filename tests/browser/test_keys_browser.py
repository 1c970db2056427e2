"""Keyboard shortcuts in Chromium: j/k and Home/End where they apply, and keys typed into a
field never switch tabs."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs a loop

from playwright.sync_api import expect  # noqa: E402


def _active_entry(page) -> str:
    return page.evaluate("(document.activeElement && document.activeElement.dataset.entry) || ''")


def test_j_k_home_end_move_through_the_transcript(demo, browser_page):
    page, base = browser_page
    page.goto(f"{base}/sessions/{demo.pk}/transcript/")
    rows = page.locator("#transcript > li.t-entry")
    expect(rows.first).to_be_visible()
    ids = rows.evaluate_all("rs => rs.map(r => r.dataset.entry)")
    page.locator("body").click(position={"x": 5, "y": 5})
    page.keyboard.press("Home")
    assert _active_entry(page) == ids[0]
    page.keyboard.press("j")
    assert _active_entry(page) == ids[1]
    page.keyboard.press("k")
    assert _active_entry(page) == ids[0]
    page.keyboard.press("End")
    assert _active_entry(page) == ids[-1]
    # The help lists them.
    page.keyboard.press("?")
    help_text = page.inner_text("#shortcuts")
    assert "j" in help_text and "Home" in help_text and "End" in help_text
    assert page.errors == []


def test_home_end_in_the_text_tree(demo, browser_page):
    page, base = browser_page
    page.goto(f"{base}/sessions/{demo.pk}/")
    rows = page.locator("#text-tree > li.tr:not([hidden])")
    rows.first.focus()
    page.keyboard.press("End")
    last = rows.evaluate_all("rs => rs[rs.length - 1].dataset.id")
    assert page.evaluate("document.activeElement.dataset.id") == last
    page.keyboard.press("Home")
    first = rows.evaluate_all("rs => rs[0].dataset.id")
    assert page.evaluate("document.activeElement.dataset.id") == first


def test_digits_typed_into_a_field_do_not_switch_tabs(demo, browser_page):
    page, base = browser_page
    url = f"{base}/sessions/{demo.pk}/transcript/"
    page.goto(url)
    page.fill("#find-q", "")
    page.locator("#find-q").press_sequentially("2024 1 3")
    page.wait_for_timeout(300)
    assert page.url == url and page.input_value("#find-q") == "2024 1 3"
    page.goto(f"{base}/sessions/{demo.pk}/live/")
    page.locator("#tree-find").press_sequentially("42")
    page.wait_for_timeout(300)
    assert "/live/" in page.url and page.input_value("#tree-find") == "42"
    # Outside a field, a digit still switches: 2 is the Transcript tab.
    page.locator("#tree-find").blur()
    page.keyboard.press("2")
    page.wait_for_url("**/transcript/", timeout=5000)
