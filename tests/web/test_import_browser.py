"""The import page in Debian's Chromium: several files chosen at once, each uploaded by XHR
with a progress bar, results (imported / rejected with line numbers) shown in place."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs a loop

from playwright.sync_api import expect, sync_playwright  # noqa: E402

from tests.browser.conftest import wait_for_js  # noqa: E402
from tests.conftest import SMALL_SESSION  # noqa: E402

ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


@pytest.fixture
def admin_page(live_server, transactional_db, django_user_model):
    from django.conf import settings
    from django.test import Client

    from explorer.permissions import set_role

    user = django_user_model.objects.create_user(username="importer", password="pw-imp-12345")
    set_role(user, "admin")
    client = Client()
    client.force_login(user)
    cookie = client.cookies[settings.SESSION_COOKIE_NAME].value
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_cookies(
            [{"name": settings.SESSION_COOKIE_NAME, "value": cookie, "url": live_server.url}]
        )
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.errors = errors
        yield page, live_server.url
        browser.close()


def test_it_uploads_several_files_with_progress_and_shows_each_result(admin_page, tmp_path):
    from explorer.models import Session

    page, base = admin_page
    good = tmp_path / "good.jsonl"
    good.write_bytes(SMALL_SESSION)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(
        SMALL_SESSION.replace(b"0195f3a2", b"bad-0195")
        + (b'{"type":"label","id":"a1b2c3d4","parentId":null,"timestamp":"t","targetId":"x"}\n')
    )
    page.goto(f"{base}/import/")
    progress_seen = page.evaluate_handle("""() => {
        const seen = {value: false};
        new MutationObserver(() => {
            if (document.querySelector('#upload-list progress')) seen.value = true;
        }).observe(document.getElementById('upload-list'), {childList: true, subtree: true});
        return seen;
    }""")
    page.set_input_files("#import-form input[type=file]", [str(good), str(bad)])
    expect(page.locator("#file-summary")).to_have_text("2 files selected")
    page.get_by_role("button", name="Import").click()
    items = page.locator("#upload-list > li")
    expect(items.nth(0)).to_contain_text("Imported 8 entries")
    expect(items.nth(1)).to_contain_text("Rejected — nothing imported")
    expect(items.nth(1)).to_contain_text("line 10")
    assert progress_seen.evaluate("s => s.value") is True
    assert page.url.endswith("/import/")  # no page reload: results arrived by XHR
    assert Session.objects.count() == 1
    items.nth(0).get_by_role("link").click()
    expect(page.locator("h1")).to_contain_text("Demo of a small session")
    assert page.errors == []


def test_an_empty_file_among_several_and_the_import_progress(admin_page, tmp_path):
    """An empty file gets its own card (never a second copy of the page inside the list),
    and a big file shows entries and bytes while the server imports it."""
    from benchmarks.gen_session import generate_session
    from explorer.models import Session

    page, base = admin_page
    good = tmp_path / "good.jsonl"
    good.write_bytes(SMALL_SESSION)
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    big = generate_session(tmp_path / "big.jsonl", entries=8000, branch_points=20, seed=3)
    page.goto(f"{base}/import/")
    figures = page.evaluate_handle("""() => {
        const seen = {texts: []};
        new MutationObserver(() => {
            for (const s of document.querySelectorAll('#upload-list .upload-status')) {
                if (/Importing: [1-9][\\d,]* entries, .+ of .+ read/.test(s.textContent)) {
                    seen.texts.push(s.textContent);
                }
            }
        }).observe(document.getElementById('upload-list'),
                   {childList: true, subtree: true, characterData: true});
        return seen;
    }""")
    page.set_input_files("#import-form input[type=file]", [str(good), str(empty), str(big)])
    page.get_by_role("button", name="Import").click()
    items = page.locator("#upload-list > li")
    expect(items.nth(0)).to_contain_text("Imported 8 entries")
    expect(items.nth(1)).to_contain_text("empty.jsonl is empty (0 bytes)")
    expect(items.nth(1)).to_contain_text("Rejected — nothing imported")
    wait_for_js(
        page,
        "/Importing: [1-9]/.test(document.querySelector('#upload-list').textContent)",
        timeout=120,
    )
    page.screenshot(path=str(tmp_path / "progress.png"))
    if os.environ.get("SCREENSHOT_DIR"):
        page.screenshot(path=os.path.join(os.environ["SCREENSHOT_DIR"], "import-progress.png"))
    expect(items.nth(2)).to_contain_text("Imported 8000 entries", timeout=300_000)
    if os.environ.get("SCREENSHOT_DIR"):
        page.screenshot(path=os.path.join(os.environ["SCREENSHOT_DIR"], "import-done.png"))
    assert page.locator("#upload-list #import-form").count() == 0
    assert page.locator("#upload-list h1").count() == 0
    texts = figures.evaluate("s => s.texts")
    assert texts and all("entries" in t and " read" in t for t in texts)
    assert Session.objects.count() == 2
    assert page.errors == []
