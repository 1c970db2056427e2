"""The Compactions tab's summary diff and branch summary detail in Chromium, at desktop and
phone widths: a reader picks the third compaction, sees both summaries word by word and what
was dropped, then opens the branch summary beside the route it summarised."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import SHOTS, wait_for_js
from tests.web.test_summary_diffs import _session


def _settled(page) -> None:
    page.wait_for_load_state("networkidle")
    wait_for_js(page, "!document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling')")


@pytest.mark.parametrize("width", [1440, 390])
def test_summary_diff_and_branch_summary(browser_page, width):
    page, base = browser_page
    session = _session()
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{base}/sessions/{session.pk}/compactions/?leaf=u4")
    page.locator(".comp-items a", has_text="c3").click()
    _settled(page)  # the detail is swapped in by htmx: act on the new one, not the old
    diff = page.locator(".summary-diff")
    expect(diff).to_contain_text("Against the previous summary")
    expect(diff.locator("del.wd-del").first).to_be_visible()
    expect(diff.locator("ins.wd-ins").first).to_be_visible()
    expect(diff.locator(".dropped-refs")).to_contain_text("parse_config")
    diff.scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / f"summary-diff-{width}.png"), full_page=True)
    box = diff.bounding_box()
    assert box is not None and box["width"] <= width  # no sideways overflow on a phone
    page.goto(f"{base}/sessions/{session.pk}/compactions/?leaf=u5")  # b1's route
    page.locator(".branch-items a", has_text="b1").click()
    _settled(page)
    detail = page.locator("#compaction-detail")
    expect(detail).to_contain_text("Summarised route")
    expect(detail.locator(".replaced-list")).to_contain_text("x2")
    expect(detail).to_contain_text("references found in the summarised route")
    page.screenshot(path=str(SHOTS / f"branch-summary-{width}.png"), full_page=True)
    assert "b=b1" in page.url
    assert not page.errors, page.errors
