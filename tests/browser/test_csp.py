"""Every page under the Content-Security-Policy in Chromium: the policy is sent, nothing on
the page violates it, and the surrogate/NUL corpus shows its replacement characters."""

from __future__ import annotations

import os

import pytest

from explorer import services
from tests.conftest import SMALL_SESSION
from tests.web.test_hardening_text import corpus_bytes

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs a loop

from playwright.sync_api import sync_playwright  # noqa: E402

from tests.browser.conftest import ARGS, SHOTS  # noqa: E402

RECORD = """
window.__csp = [];
document.addEventListener("securitypolicyviolation", function (e) {
  window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " " + e.sourceFile + ":" + e.lineNumber);
});
"""

SESSION_PAGES = [
    "",
    "?entry={first}",
    "entry/?id={first}",
    "context/",
    "compactions/",
    "compare/?a={last}&b={first}",
    "timeline/",
    "search/?q=hi",
    "integrity/",
    "live/",
    "problems/",
    "label/?target={first}",
    "rename/",
    "navigate/?target={first}",
    "compact/",
    "transcript/",
    "transcript/?entry={first}&q=hi",
    "secrets/",
    "edit/?target={first}",
]


@pytest.fixture
def admin_page(live_server, transactional_db, django_user_model):
    from django.conf import settings
    from django.test import Client

    from explorer.permissions import set_role

    user = django_user_model.objects.create_user(username="csp", password="pw-csp-123456")
    set_role(user, "admin")
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        context.add_init_script(RECORD)
        context.add_cookies(
            [{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}]
        )
        page = context.new_page()
        problems: list[str] = []
        page.on(
            "console",
            lambda m: problems.append(m.text) if m.type in ("error", "warning") else None,
        )
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.problems = problems
        yield page, live_server.url, browser
        browser.close()


def visit(page, url: str) -> None:
    response = page.goto(url)
    assert response is not None and response.status < 400, (url, response and response.status)
    page.wait_for_load_state("networkidle")
    policy = response.headers.get("content-security-policy", "")
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy, url
    assert "object-src 'none'" in policy and "'unsafe-inline'" not in policy, url
    violations = page.evaluate("window.__csp")
    assert violations == [], (url, violations)
    csp_console = [m for m in page.problems if "Content Security Policy" in m]
    assert csp_console == [], (url, csp_console)


def test_every_page_runs_under_the_policy_with_the_corpus(admin_page):
    page, base, _browser = admin_page
    small = services.import_bytes(SMALL_SESSION).session
    corpus = services.import_bytes(corpus_bytes()).session
    for url in ["/", "/search/?q=hi", "/import/", "/secrets/", "/admin/", "/admin/auth/user/"]:
        visit(page, base + url)
    for session, first, last in ((small, "a1b2c3d4", "1b2c3d4e"), (corpus, "u1", "s1")):
        for suffix in SESSION_PAGES:
            path = suffix.format(first=first, last=last)
            visit(page, f"{base}/sessions/{session.pk}/{path}")
    # htmx swaps run under the policy too: open an entry from the graph, page the tree.
    page.goto(f"{base}/sessions/{corpus.pk}/")
    page.locator("#graph g.ge-entry a").first.click()
    page.wait_for_load_state("networkidle")
    assert page.evaluate("window.__csp") == []
    assert "\ufffd" in page.locator("body").inner_text()
    page.screenshot(path=str(SHOTS / "csp-corpus-tree.png"), full_page=True)
    page.goto(f"{base}/sessions/{corpus.pk}/entry/?id=u1")
    assert "hi \ufffd there \ufffd end" in page.locator("body").inner_text()
    assert [m for m in page.problems if "Content Security Policy" in m] == []


def test_the_login_and_lockout_pages_run_under_the_policy(admin_page, django_user_model):
    page, base, browser = admin_page
    anonymous = browser.new_context()
    anonymous.add_init_script(RECORD)
    other = anonymous.new_page()
    other.problems = []
    other.on("console", lambda m: other.problems.append(m.text) if m.type == "error" else None)
    visit(other, base + "/accounts/login/")
    django_user_model.objects.create_user("lock", password="pw-lock-123")
    for _ in range(5):
        other.fill("#id_username", "lock")
        other.fill("#id_password", "wrong")
        other.click("button[type=submit]")
    assert "Too many failed logins" in other.locator("body").inner_text()
    assert other.evaluate("window.__csp") == []
    other.screenshot(path=str(SHOTS / "csp-lockout.png"))


def test_unfolding_and_clicking_on_the_tree_page_stays_under_the_policy(admin_page, tmp_path):
    """Unfold chains in the graph and the text tree, click graph nodes and text-tree rows:
    the swapped-in parts carry no inline style the policy refuses."""
    from benchmarks.gen_session import generate_session

    page, base, _browser = admin_page
    path = tmp_path / "gen.jsonl"
    generate_session(str(path), entries=400, branch_points=4, seed=5)
    session = services.import_bytes(path.read_bytes(), source_path=str(path)).session
    visit(page, f"{base}/sessions/{session.pk}/")
    # The text tree: open a folded branch and unfold a chain row in place (htmx).
    page.locator("#text-tree > li.branch.collapsed").first.focus()
    page.keyboard.press("ArrowRight")
    page.locator("#text-tree > li.tr-chain:not([hidden])").first.focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_load_state("networkidle")
    # The graph: click a folded chain (a new view), then entries (the panel swaps).
    page.locator("#graph .graph-canvas g.ge-chain a").first.dispatch_event("click")
    page.wait_for_load_state("networkidle")
    for k in range(3):
        page.locator("#graph g.ge-entry a").nth(k).dispatch_event("click")
        page.wait_for_load_state("networkidle")
    page.locator("#text-tree > li.tr-entry a").nth(2).click()
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(SHOTS / "csp-tree-unfolded.png"))
    assert page.evaluate("window.__csp") == []
    assert [m for m in page.problems if "Content Security Policy" in m] == []


def test_a_swap_does_not_copy_a_style_set_by_script(admin_page):
    """The graph's pan and zoom set its elements' style from script (allowed); htmx's settle
    once copied such a style onto the swapped-in element of the same id with an attribute
    write, which the policy refuses (seen now and then after clicks on the Tree page)."""
    page, base, _browser = admin_page
    small = services.import_bytes(SMALL_SESSION).session
    visit(page, f"{base}/sessions/{small.pk}/")
    page.evaluate(
        """() => {
          const probe = document.createElement("div");
          probe.id = "settle-probe";
          probe.innerHTML = '<span id="settle-inner">before</span>';
          document.body.appendChild(probe);
          document.getElementById("settle-inner").style.color = "red";
          htmx.swap(probe, '<span id="settle-inner">after</span>', {swapStyle: "innerHTML"});
        }"""
    )
    page.wait_for_timeout(300)  # the settle step runs after a short delay
    assert page.locator("#settle-inner").inner_text() == "after"
    assert page.evaluate("window.__csp") == []
