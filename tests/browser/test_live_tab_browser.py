"""The Live tab's parts that need no websocket: its text tree opens entries in place."""

from __future__ import annotations

import os

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs a loop

from playwright.sync_api import expect  # noqa: E402


def test_a_text_tree_row_opens_its_entry_on_the_live_tab(demo, browser_page):
    page, base = browser_page
    page.goto(f"{base}/sessions/{demo.pk}/live/")
    page.locator('#text-tree .tr[data-id="d4e5f6a7"] a.tr-entry').click()
    expect(page.locator("#entry-panel-wrap #entry-panel")).to_be_visible()
    assert "/live/" in page.url
    assert "d4e5f6a7" in page.inner_text("#entry-panel-wrap")
    assert not [e for e in page.errors if "targetError" in e]


def test_the_shared_rows_post_with_the_viewers_csrf_token(demo, browser_page):
    """The Live tab's rows are rendered once for every viewer, without a token; the page's
    script gives their forms this viewer's, so "move my cursor here" works."""
    page, base = browser_page
    page.goto(f"{base}/sessions/{demo.pk}/live/")
    form = page.locator('#transcript li[data-entry="a1b2c3d4"] form.inline-form').first
    expect(form.locator('input[name="csrfmiddlewaretoken"]')).to_have_count(1)
    with page.expect_navigation():
        form.locator("button").click()
    assert "/transcript/" in page.url and "a1b2c3d4" in page.url
    assert page.locator("text=Forbidden").count() == 0
