"""The top bar of an admin (the most links: Users, Shares, Audit) fits a phone's width."""

from __future__ import annotations

from django.conf import settings
from django.test import Client
from playwright.sync_api import sync_playwright

from explorer.permissions import set_role
from tests.browser.conftest import ARGS, SHOTS


def test_an_admins_top_bar_wraps_instead_of_widening_the_page(
    live_server, transactional_db, django_user_model
):
    user = django_user_model.objects.create_user(username="root-nav", password="pw-nav-123456")
    set_role(user, "admin")
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        context = browser.new_context(viewport={"width": 390, "height": 800})
        context.add_cookies(
            [{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}]
        )
        page = context.new_page()
        page.goto(f"{live_server.url}/")
        assert page.get_by_role("link", name="Audit").is_visible()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.screenshot(path=str(SHOTS / "nav-admin-390.png"))
        browser.close()
