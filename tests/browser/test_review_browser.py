"""Review comments in Debian's Chromium: the entry panel's review section, a new comment
and a reply in its thread, the thread on the Review tab with the open count."""

from __future__ import annotations

from tests.browser.conftest import SHOTS


def test_comment_and_reply_from_the_entry_panel(browser_page, demo):
    page, base = browser_page
    page.goto(f"{base}/sessions/{demo.pk}/?entry=d4e5f6a7")
    section = page.locator("#entry-review")
    section.wait_for()
    section.locator("#new-comment").fill("Does this **match** the file?")
    section.get_by_role("button", name="Comment").click()
    thread = page.locator("#entry-review .review-thread")
    thread.wait_for()
    assert "match" in thread.locator("strong").first.inner_text() or "match" in thread.inner_text()
    assert page.url.endswith("?entry=d4e5f6a7")  # back on the page the form was on
    thread.locator("textarea[name=body]").last.fill("It does: *hello world*.")
    thread.get_by_role("button", name="Reply").click()
    page.locator("#entry-review .review-replies .review-comment").wait_for()
    reply = page.locator("#entry-review .review-replies .review-comment")
    assert reply.count() == 1 and "hello world" in reply.locator("em").inner_text()
    page.screenshot(path=str(SHOTS / "review_entry_panel.png"), full_page=True)
    page.goto(f"{base}/sessions/{demo.pk}/review/")
    assert "Review (1)" in page.locator("nav.tabs").inner_text()
    assert page.locator(".review-thread").count() == 1
    page.get_by_role("button", name="Resolve").click()
    assert page.locator(".review-thread").count() == 0
    assert "Review (1)" not in page.locator("nav.tabs").inner_text()
    assert page.errors == []
