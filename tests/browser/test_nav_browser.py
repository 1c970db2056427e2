"""The top bar of an admin (the most links: Users, Shares, Audit) fits a phone's width."""

from __future__ import annotations

from tests.browser.conftest import SHOTS, logged_in_page


def test_an_admins_top_bar_wraps_instead_of_widening_the_page(
    live_server, transactional_db, django_user_model
):
    with logged_in_page(
        live_server, django_user_model, role="admin", username="root-nav", width=390, height=800
    ) as page:
        page.goto(f"{live_server.url}/")
        assert page.get_by_role("link", name="Audit").is_visible()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.screenshot(path=str(SHOTS / "nav-admin-390.png"))
        assert page.errors == []
