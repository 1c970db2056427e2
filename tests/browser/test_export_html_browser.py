"""The HTML export opened from file:// in Debian's Chromium with the network cut off:
no request leaves the file, a branch switch and a compaction card work, no console error."""

from __future__ import annotations

import json
import re
import time

import pytest
from django.test import Client
from django.urls import reverse
from playwright.sync_api import expect, sync_playwright

from explorer import services
from explorer.permissions import set_role
from tests.browser.conftest import ARGS, SHOTS
from tests.web.test_export_html import HOSTILE, LONG_WORD, wide_session_bytes

pytestmark = pytest.mark.django_db


def _until(page, expression: str, seconds: float = 15.0) -> None:
    """Wait until ``expression`` is true in the page, asking from here: Playwright's own
    ``wait_for_function`` polls by evaluating a string inside the page once the first try
    fails, which the export's policy refuses (no eval) and which failed the test now and
    then on a busy machine."""
    deadline = time.monotonic() + seconds
    while not page.evaluate(expression):
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {seconds} s: {expression}")
        page.wait_for_timeout(50)


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
        # the hidden result is read in its call's card, and its edit mark shows there
        mark = transcript.locator('li[data-entry="b2c3d4e5"] .tool-result .t-edit')
        assert mark.inner_text() == "Hidden from the model by edit 0a1b2c3d"
        assert mark.is_visible()
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
        page.locator("#x-tree .x-node").last.click()
        assert page.locator("#x-route").inner_text().startswith("Route to")
        page.locator("#x-tree .x-node:has(.x-dot-compaction)").click()
        expand = transcript.locator(".t-expand")
        expand.click()
        page.screenshot(path=str(SHOTS / "export_html_offline.png"), full_page=True)
        hostile = transcript.locator('li:has-text("alert(1)")')
        assert hostile.count() == 1 and hostile.locator("script, iframe").count() == 0
        browser.close()
    assert requests == [url], requests
    assert errors == [] and dialogs == []


# --- readability: fits the window, toggles, search, links --------------------------------


def export_file(session, user, tmp_path, name: str, **query) -> str:
    client = Client()
    client.force_login(user)
    r = client.get(reverse("explorer:export_html", args=[session.pk]), query)
    assert r.status_code == 200
    path = tmp_path / name
    path.write_bytes(b"".join(r.streaming_content))
    return path.as_uri()


@pytest.fixture
def editor(django_user_model):
    user = django_user_model.objects.create_user(username="ex2", password="pw-ex-123456")
    set_role(user, "editor")
    return user


def open_file(p, url: str, width: int, errors: list[str]):
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
    context = browser.new_context(viewport={"width": width, "height": 900}, offline=True)
    # every CSP violation, as the page itself sees it (Playwright's scripts are not bound by it)
    context.add_init_script(
        "window.cspViolations = [];"
        "document.addEventListener('securitypolicyviolation',"
        " e => window.cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));"
    )
    page = context.new_page()
    # CSP violations are reported on the console as errors too
    page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    return browser, page


def violations(page) -> list[str]:
    return page.evaluate("window.cspViolations")


def overflow(page) -> list[int]:
    return page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")


@pytest.mark.parametrize("width", [1440, 390])
def test_a_wide_session_fits_the_window(make_session, editor, tmp_path, width):
    session = make_session(wide_session_bytes())
    url = export_file(session, editor, tmp_path, "wide.html")
    errors: list[str] = []
    with sync_playwright() as p:
        browser, page = open_file(p, url, width, errors)
        scroll, inner = overflow(page)
        assert scroll <= inner, (scroll, inner)
        # the wide code scrolls inside its block; the long word and output lines wrap
        code = page.locator(".md pre").first
        assert code.evaluate("e => e.scrollWidth > e.clientWidth")
        assert LONG_WORD in page.locator('li[data-entry="u1000001"]').inner_text()
        page.get_by_role("button", name="Tool output").click()  # unfold: still no overflow
        page.get_by_role("button", name="Thinking").click()
        scroll, inner = overflow(page)
        assert scroll <= inner, (scroll, inner)
        page.screenshot(path=str(SHOTS / f"export_html_wide_{width}.png"), full_page=False)
        assert violations(page) == []
        browser.close()
    assert errors == []


def test_toggles_search_filters_and_links_work(make_session, editor, tmp_path):
    session = make_session(wide_session_bytes())
    url = export_file(session, editor, tmp_path, "wide.html")
    errors: list[str] = []
    with sync_playwright() as p:
        browser, page = open_file(p, url, 1440, errors)
        t = page.locator("#transcript")
        # totals of the route
        stats = page.locator("#x-stats").inner_text().upper()  # the labels are upper case
        assert "ENTRIES\n7\n" in stats and "TOOL CALLS\n2\n" in stats and "$0.0129" in stats
        assert "MESSAGES\n7 (2 USER, 3 ASSISTANT, 2 TOOL RESULTS)" in stats
        assert "↑3000 ↓150 CACHE R 600 W 90" in stats
        # times read as dates, the exact stamp kept
        when = t.locator('li[data-entry="u1000001"] time')
        assert when.inner_text() == "2025-03-04 05:06:01 UTC"
        assert when.get_attribute("datetime") == "2025-03-04T05:06:01.000Z"
        # thinking folded until toggled (button and key T)
        thinking = t.locator("details.thinking")
        assert thinking.evaluate("d => d.open") is False
        page.get_by_role("button", name="Thinking").click()
        assert thinking.evaluate("d => d.open") is True
        page.keyboard.press("t")
        assert thinking.evaluate("d => d.open") is False
        # a long output shows its first lines; its button and the Tool output toggle unfold it
        fold = t.locator(".x-fold").first
        assert not fold.get_by_text("line 199").is_visible()
        fold.get_by_role("button", name="Show all 200 lines (").click()
        assert fold.get_by_text("line 199").is_visible()
        fold.get_by_role("button", name="Fold").click()
        assert not fold.get_by_text("line 199").is_visible()
        page.keyboard.press("o")
        assert fold.get_by_text("line 199").is_visible()
        assert page.locator("#x-tools").get_attribute("aria-pressed") == "true"
        # the image is shown from the file's one copy
        imgs = t.locator("img.msg-img")
        assert imgs.count() == 2
        # An image decodes after the page's load on a busy machine: wait for both, then check.
        _until(
            page, "[...document.querySelectorAll('#transcript img.msg-img')].every(i => i.complete)"
        )
        assert all(
            imgs.nth(k).evaluate("i => i.complete && i.naturalWidth === 1") for k in range(2)
        )
        # filters
        page.get_by_role("button", name="User", exact=True).click()
        assert t.locator('li[data-entry="a1000003"]').is_hidden()
        assert t.locator('li[data-entry="u1000001"]').is_visible()
        page.get_by_role("button", name="All", exact=True).click()
        page.get_by_role("button", name="No tools").click()
        assert t.locator('li[data-entry="a1000002"]').is_hidden()  # only a tool call
        assert t.locator('li[data-entry="a1000003"]').is_visible()
        page.get_by_role("button", name="All", exact=True).click()
        # search: only the matching entries stay, the status says how many
        page.keyboard.press("/")
        page.keyboard.type("needle")
        expect(page.locator("#x-route")).to_contain_text("1 match")
        assert t.locator(".t-entry:visible").count() == 1
        assert t.locator('li[data-entry="a1000003"]').is_visible()
        # Enter goes from match to match
        page.locator("#x-search").fill("look at")
        page.keyboard.press("Enter")
        target = page.locator(".t-entry.is-target")
        expect(target).to_have_attribute("data-entry", "u1000001")
        page.keyboard.press("Enter")
        expect(target).to_have_attribute("data-entry", "u1000002")
        page.keyboard.press("Shift+Enter")
        expect(target).to_have_attribute("data-entry", "u1000001")
        page.keyboard.press("Escape")
        expect(t.locator(".t-entry:visible")).to_have_count(
            5
        )  # the results show in their calls' cards
        # copy link and the link itself
        target = t.locator('li[data-entry="a1000003"]')
        target.get_by_role("button", name="Copy a link to entry a1000003").click()
        expect(target.locator(".t-copy")).to_have_text(re.compile("Copied|Copy failed"))
        assert target.locator("a.t-anchor").get_attribute("href") == "#e-a1000003"
        page.goto(url + "#e-t1000001")  # a tool result: read in its call's card
        _until(page, "document.querySelector('.t-entry.is-target') !== null")
        assert page.locator(".t-entry.is-target").get_attribute("data-entry") == "a1000001"
        # a click on an image shows it at full size; a click or Escape closes it
        page.locator('li[data-entry="u1000002"] img.msg-img').click()
        expect(page.locator("#x-zoom")).to_be_visible()
        assert page.locator("#x-zoom img").get_attribute("src").startswith("data:image/png")
        page.keyboard.press("Escape")
        expect(page.locator("#x-zoom")).to_be_hidden()
        assert violations(page) == []
        # the guard above sees a violation when there is one: an inline script is refused
        page.evaluate(
            "() => { const s = document.createElement('script');"
            " s.textContent = 'window.ran = 1'; document.body.appendChild(s); }"
        )
        _until(page, "window.cspViolations.length > 0")
        assert page.evaluate("window.ran") is None
        assert violations(page)[0].startswith("script-src")
        browser.close()
    errors[:] = [e for e in errors if "Content Security Policy" not in e]  # the control's
    assert errors == []


def test_a_link_opens_its_route_in_a_whole_tree_export(make_session, editor, tmp_path):
    session = make_session()  # the small session: two routes
    url = export_file(session, editor, tmp_path, "tree.html", scope="tree")
    errors: list[str] = []
    with sync_playwright() as p:
        browser, page = open_file(p, url + "#e-e5f6a7b8", 1000, errors)
        t = page.locator("#transcript")
        expect(t.locator('li[data-entry="e5f6a7b8"]')).to_have_class(re.compile("is-target"))
        assert t.locator('li[data-entry="d4e5f6a7"]').count() == 0  # the other route
        stats = page.locator("#x-stats").inner_text()
        assert "This route" in stats and "The whole file (2 routes)" in stats
        # search finds what is on the other route and opens it
        page.locator("#x-search").fill("hello world")
        expect(page.locator("#x-hits")).to_contain_text("more on other routes")
        page.locator("#x-hits button").first.click()
        expect(t.locator('li[data-entry="d4e5f6a7"]')).to_have_count(1)
        # a link naming the route (what Copy link gives in a tree) opens that route
        page.goto(url + "#e-a1b2c3d4~e5f6a7b8")
        expect(t.locator('li[data-entry="d4e5f6a7"]')).to_have_count(0)
        expect(t.locator('li[data-entry="a1b2c3d4"]')).to_have_class(re.compile("is-target"))
        page.goto(url + "#e-a1b2c3d4~1b2c3d4e")
        expect(t.locator('li[data-entry="d4e5f6a7"]')).to_have_count(1)
        browser.close()
    assert errors == []


def test_a_long_linear_tree_shows_its_turns_with_runs_to_unfold(make_session, editor, tmp_path):
    session = make_session(wide_session_bytes())
    url = export_file(session, editor, tmp_path, "wide.html")
    errors: list[str] = []
    with sync_playwright() as p:
        browser, page = open_file(p, url, 1440, errors)
        tree = page.locator("#x-tree")
        # both user messages and the last entry are rows; between them, runs to unfold
        rows = tree.locator(".x-node")
        assert rows.count() == 3
        runs = tree.locator(".x-run")
        assert runs.count() == 2 and "2 entries" in runs.first.inner_text()
        runs.first.click()
        assert rows.count() == 5 and tree.locator(".x-run").count() == 1
        page.get_by_role("button", name="Expand all runs").click()
        assert rows.count() == 7 and tree.locator(".x-run").count() == 0
        rows.nth(2).click()  # a row opens its entry (a tool result: its call's card)
        expect(page.locator(".t-entry.is-target")).to_have_attribute("data-entry", "a1000001")
        rows.nth(3).click()
        expect(page.locator(".t-entry.is-target")).to_have_attribute("data-entry", "u1000002")
        browser.close()
    assert errors == []


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("width", [1440, 390])
def test_a_real_pi_session_fits_and_its_tree_is_readable(make_session, editor, tmp_path, width):
    from tests.conftest import PI_FIXTURES

    session = make_session((PI_FIXTURES / "before-compaction.jsonl").read_bytes())
    url = export_file(session, editor, tmp_path, "pi.html")
    errors: list[str] = []
    with sync_playwright() as p:
        browser, page = open_file(p, url, width, errors)
        scroll, inner = overflow(page)
        assert scroll <= inner, (scroll, inner)
        if width == 390:
            assert page.locator("#x-side").evaluate("d => d.open") is False
            page.locator("#x-side > summary").click()
        users = page.locator("#x-tree .x-node .x-dot-user").count()
        assert users > 20 and page.locator("#x-tree .x-run").count() > 20
        scroll, inner = overflow(page)
        assert scroll <= inner, (scroll, inner)
        page.screenshot(path=str(SHOTS / f"export_html_pi_{width}.png"))
        browser.close()
    assert errors == []


def test_the_export_menu_shows_the_expected_sizes(browser_page, demo):
    page, base = browser_page
    page.goto(f"{base}/sessions/{demo.pk}/transcript/")
    menu = page.locator("details.export-menu")
    menu.locator("summary").click()
    sizes = menu.locator(".export-sizes")
    expect(sizes).to_contain_text("this route:")
    expect(sizes).to_contain_text("the whole tree:")
    assert re.search(r"about \d+ kB", sizes.inner_text())
    assert menu.get_by_role("link", name="HTML of this route").is_visible()
    page.screenshot(path=str(SHOTS / "export_html_menu.png"))
    assert page.errors == []


def test_a_chain_with_hundreds_of_turns_unfolds_in_steps(make_session, editor, tmp_path):
    header = {"type": "session", "version": 3, "id": "0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a77",
              "timestamp": "2025-03-04T05:06:07.089Z", "cwd": "/home/ana/long"}  # fmt: skip
    lines, parent = [header], None
    for k in range(1400):
        role = "user" if k % 2 == 0 else "assistant"
        message = {"role": role, "content": [{"type": "text", "text": f"{role} turn {k // 2}"}],
                   "timestamp": 1741064767000 + k}  # fmt: skip
        if role == "assistant":
            message.update(
                api="anthropic-messages", provider="anthropic", model="m", stopReason="stop"
            )
        eid = f"{k:08x}"
        lines.append({"type": "message", "id": eid, "parentId": parent,
                      "timestamp": "2025-03-04T05:06:08.000Z", "message": message})  # fmt: skip
        parent = eid
    session = make_session(b"".join(json.dumps(x).encode() + b"\n" for x in lines))
    url = export_file(session, editor, tmp_path, "long.html")
    errors: list[str] = []
    with sync_playwright() as p:
        browser, page = open_file(p, url, 1440, errors)
        tree = page.locator("#x-tree")
        # 700 user messages: the first 300 rows, one row for the rest, the last entry
        first = tree.locator("li").count()
        assert 301 <= first <= 303
        assert tree.locator(".x-node").last.inner_text().endswith("assistant turn 699")
        more = tree.locator(".x-run", has_text="more entries")
        assert more.count() == 1 and "more entries" in more.inner_text()
        more.click()
        assert tree.locator("li").count() > first + 250
        page.get_by_role("button", name="Expand all runs").click()
        expect(tree.locator(".x-node")).to_have_count(1400)
        assert tree.locator(".x-run").count() == 0
        scroll, inner = overflow(page)
        assert scroll <= inner
        browser.close()
    assert errors == []
