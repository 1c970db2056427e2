"""New since you last looked, in Chromium at 1440 and 390 px: the visit is recorded after
the page is shown, arrivals are marked on the next visit, "Mark as read" clears them."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from explorer import services
from explorer.models import ReadMark
from tests.browser.conftest import SHOTS

LAST_ID = "1b2c3d4e"


@pytest.mark.parametrize("width", [1440, 390])
def test_new_entries_are_marked_until_marked_as_read(demo, browser_page, django_user_model, width):
    page, base = browser_page
    page.set_viewport_size({"width": width, "height": 900})
    user = django_user_model.objects.get(username="e2e")
    url = f"{base}/sessions/{demo.pk}/transcript/"
    with page.expect_response(lambda r: r.url.endswith(f"/sessions/{demo.pk}/seen/")):
        page.goto(url)
    expect(page.locator("#new-since .new-since-note")).to_have_count(0)
    assert ReadMark.objects.filter(user=user, session=demo).exists()
    message = {"role": "user", "content": "arrived later", "timestamp": 1741064900000}
    entry = services.append_message(demo, user, message, leaf_id=LAST_ID, source="edit").entry
    page.goto(f"{base}/")
    expect(page.get_by_role("link", name="1 new")).to_be_visible()
    page.goto(url)
    expect(page.locator(".new-since-note")).to_contain_text("1 new entry")
    row = page.locator(f'li[data-entry="{entry.entry_id}"]')
    expect(row).to_have_class(__import__("re").compile(r"\bis-new\b"))
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    page.screenshot(path=str(SHOTS / f"new-since-{width}.png"), full_page=False)
    page.get_by_role("button", name="Mark as read").click()
    expect(page.locator(".new-since-note")).to_have_count(0)
    page.goto(f"{base}/")
    expect(page.get_by_role("link", name="1 new")).to_have_count(0)
    assert not page.errors, page.errors
