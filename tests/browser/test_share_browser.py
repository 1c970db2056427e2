"""Share links in Chromium: an editor makes a link from the session page, a reader without an
account opens it at desktop and phone widths and walks its tabs, the editor revokes it and
the reader's next page says so."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SHOTS


@pytest.mark.parametrize("width", [1440, 390])
def test_an_editor_shares_and_a_reader_without_an_account_reads(browser_page, demo, width):
    page, base = browser_page
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{base}/sessions/{demo.pk}/")
    page.get_by_role("link", name="Share…").click()
    page.get_by_role("button", name="Create link").click()
    url = page.get_by_label("The new share link").input_value()
    assert "/share/" in url
    page.screenshot(path=str(SHOTS / f"share-create-{width}.png"), full_page=True)

    browser = page.context.browser
    assert browser is not None
    reader_context = browser.new_context(viewport={"width": width, "height": 900})  # no cookie
    try:
        reader = reader_context.new_page()
        errors: list[str] = []
        reader.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        reader.on("pageerror", lambda e: errors.append(str(e)))
        reader.goto(url)
        expect(reader.locator(".share-banner")).to_contain_text("Shared read-only session")
        expect(reader.locator("main")).to_contain_text("The file says hello world.")
        assert reader.locator("form[method=post]").count() == 0
        assert reader.get_by_role("link", name="Log out").count() == 0
        reader.screenshot(path=str(SHOTS / f"share-transcript-{width}.png"), full_page=True)
        for tab in ("Tree", "Compactions", "Raw vs projected"):
            reader.locator(".tabs").get_by_role("link", name=tab, exact=True).click()
            assert "/share/" in reader.url
            expect(reader.locator(".share-banner")).to_be_visible()
        expect(reader.locator("main")).to_contain_text("projected")
        reader.locator(".tabs").get_by_role("link", name="Tree", exact=True).click()
        reader.locator("#graph-panel svg").first.wait_for()
        reader.screenshot(path=str(SHOTS / f"share-tree-{width}.png"), full_page=True)
        assert not errors, errors

        page.goto(f"{base}/sessions/{demo.pk}/shares/")
        page.get_by_role("button", name="Revoke").click()
        expect(page.locator("main")).to_contain_text("revoked")
        page.screenshot(path=str(SHOTS / f"share-list-{width}.png"), full_page=True)
        answer = reader.goto(url)
        assert answer is not None and answer.status == 410
        expect(reader.locator("h1")).to_have_text("Link no longer valid")
    finally:
        reader_context.close()
