"""The audited reveal as an admin does it in Chromium: Reveal…, a reason, the secret once;
the finding then says who revealed it and why, and the Audit page lists it."""

from __future__ import annotations

from playwright.sync_api import expect

from explorer import services
from tests.browser.conftest import SHOTS
from tests.browser.test_csp import admin_page, visit  # noqa: F401 - the fixture
from tests.secrets.seeded import build_session, make_secrets


def test_an_admin_reveals_a_secret_with_a_reason_and_the_audit_lists_it(admin_page):  # noqa: F811
    page, base, _browser = admin_page
    session = services.import_bytes(build_session()[0]).session
    secret = make_secrets()["stripe-key"]
    visit(page, f"{base}/sessions/{session.pk}/secrets/")
    row = page.locator("tr", has=page.locator("code", has_text="stripe-key")).first
    row.get_by_role("button", name="Reveal…").click()
    reason = row.locator('input[name="reason"]')
    expect(reason).to_be_visible()
    assert secret not in page.content()  # asked first, nothing shown
    reason.fill("rotating the live key")
    row.get_by_role("button", name="Reveal the secret").click()
    expect(row.locator("code.mono")).to_have_text(secret)
    page.screenshot(path=str(SHOTS / "reveal-shown.png"))
    visit(page, f"{base}/sessions/{session.pk}/secrets/")
    assert secret not in page.content()  # shown once
    expect(page.locator(".reveal-note").first).to_contain_text("(rotating the live key)")
    visit(page, f"{base}/audit/")
    expect(page.locator("#audit")).to_contain_text("Secret revealed")
    expect(page.locator("#audit")).to_contain_text("rotating the live key")
    page.screenshot(path=str(SHOTS / "audit.png"), full_page=True)
    assert page.problems == []
