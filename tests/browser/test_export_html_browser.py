"""The HTML export opened from file:// in Debian's Chromium with the network cut off:
no request leaves the file, a branch switch and a compaction card work, no console error."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse
from playwright.sync_api import sync_playwright

from explorer import services
from explorer.permissions import set_role
from tests.browser.conftest import ARGS, SHOTS
from tests.web.test_export_html import HOSTILE

pytestmark = pytest.mark.django_db


@pytest.fixture
def exported(make_session, django_user_model, tmp_path):
    user = django_user_model.objects.create_user(username="ex", password="pw-ex-123456")
    set_role(user, "editor")
    session = make_session()
    services.append_via_manager(
        session, user, "1b2c3d4e",
        lambda m: m.append_compaction("the summary text", "d4e5f6a7", 5000, None, False, None),
    )  # fmt: skip
    services.append_message(
        session, user, {"role": "user", "content": [{"type": "text", "text": HOSTILE}],
                        "timestamp": 1741064767000}
    )  # fmt: skip
    client = Client()
    client.force_login(user)
    r = client.get(reverse("explorer:export_html", args=[session.pk]), {"scope": "tree"})
    path = tmp_path / "export.html"
    path.write_bytes(b"".join(r.streaming_content))
    return path


def test_the_export_works_offline_from_a_file(exported):
    url = exported.as_uri()
    requests: list[str] = []
    errors: list[str] = []
    dialogs: list[str] = []

    def guard(route):
        requests.append(route.request.url)
        if route.request.url == url:
            route.continue_()
        else:
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 900}, offline=True)
        context.route("**/*", guard)
        page = context.new_page()
        page.on(
            "console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None
        )
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(url)
        transcript = page.locator("#transcript")
        assert transcript.locator('li[data-entry="d4e5f6a7"]').count() == 1
        assert "the summary text" in transcript.inner_text()
        assert "Hidden from the model" in transcript.inner_text()
        # the branch switcher shows the sibling route from the data the file carries
        switch = transcript.locator('li[data-entry="b2c3d4e5"] .t-switch')
        assert "1/2" in switch.inner_text()
        switch.get_by_label("Next branch").click()
        assert transcript.locator('li[data-entry="e5f6a7b8"]').count() == 1
        assert transcript.locator('li[data-entry="d4e5f6a7"]').count() == 0
        assert "2/2" in transcript.locator('li[data-entry="e5f6a7b8"] .t-switch').inner_text()
        transcript.locator('li[data-entry="e5f6a7b8"]').get_by_label("Previous branch").click()
        # the compaction card lists what it replaced
        expand = transcript.locator(".t-expand")
        expand.click()
        listed = transcript.locator(".replaced-list li")
        assert listed.count() == 3 and listed.first.is_visible()
        assert expand.get_attribute("aria-expanded") == "true"
        # the tree picks a route too
        page.locator("#x-tree button").last.click()
        assert page.locator("#x-route").inner_text().startswith("Route to")
        page.locator("#x-tree button").first.click()
        expand = transcript.locator(".t-expand")
        expand.click()
        page.screenshot(path=str(SHOTS / "export_html_offline.png"), full_page=True)
        hostile = transcript.locator('li:has-text("alert(1)")')
        assert hostile.count() == 1 and hostile.locator("script, iframe").count() == 0
        browser.close()
    assert requests == [url], requests
    assert errors == [] and dialogs == []
