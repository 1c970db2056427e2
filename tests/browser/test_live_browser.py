"""Chromium watches a live session: streamed deltas appear and the tree grows, no reload."""

from __future__ import annotations

import re
import time

import pytest

from tests.browser.conftest import SHOTS
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.live.server import LiveServer

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
CHUNKS = [f"word{i} " for i in range(16)]
ROWS = "#transcript > li.t-entry"  # the Transcript tab's rows
TREE_ROWS = "#text-tree > li.tr"  # the Tree tab's text tree


@pytest.fixture
def small_session_file(tmp_path, small_session_bytes):
    path = tmp_path / "small.jsonl"
    path.write_bytes(small_session_bytes)
    return path


@pytest.fixture
def site(tmp_path, small_session_file):
    with FakeOpenAIServer(Reply(chunks=CHUNKS, delay=0.15)) as llm:
        env = {"SESSIONS_LLM_BASE_URL": llm.base_url, "SESSIONS_LLM_MODEL": "fake-model"}
        with LiveServer(tmp_path / "site", sessions=[str(small_session_file)], env=env) as server:
            yield server


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def open_live(browser, site: LiveServer, user: str):
    # Playwright's wait_for_function evaluates its predicate inside the page, which the
    # pages' CSP forbids (no eval); the policy itself is checked in tests/browser/test_csp.py.
    context = browser.new_context(bypass_csp=True)
    context.add_cookies([{"name": "sessionid", "value": site.cookies[user], "url": site.base_url}])
    page = context.new_page()
    page.goto(f"{site.base_url}/sessions/{site.session_pks[0]}/live/")
    page.wait_for_function(
        "document.getElementById('live-connection').textContent === 'live'", timeout=15000
    )
    return page


def test_a_viewer_sees_live_deltas_and_the_tree_grow_without_reload(browser, site):
    watcher = open_live(browser, site, "vera")
    editor = open_live(browser, site, "eddie")
    rows_before = watcher.locator(ROWS).count()
    assert rows_before >= 3
    assert watcher.locator(TREE_ROWS).count() >= 8  # the Tree tab's text tree, branches shown
    watcher.evaluate("window.__notReloaded = 42")
    graph_before = watcher.get_attribute("#live-graph", "src")

    editor.fill("#turn-text", "Tell me sixteen words")
    editor.click("#send-turn")

    # Partial answers appear in the watcher's page while the model is still streaming.
    full = "".join(CHUNKS)
    partials: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        text = watcher.evaluate(
            "(document.getElementById('turn-stream-text') || {}).textContent || ''"
        )
        if text and (not partials or partials[-1] != text):
            partials.append(text)
        if text == full or len(partials) >= 4:
            break
        time.sleep(0.05)
    assert len(partials) >= 2, partials
    assert all(full.startswith(p) and p != full for p in partials[:2])

    # The finished answer joins the transcript as Transcript-tab rows; the tree says two
    # entries arrived, and its refresh draws them.
    watcher.wait_for_function(
        f"document.querySelectorAll({ROWS!r}).length === {rows_before + 2}", timeout=20000
    )
    watcher.wait_for_function(
        "Array.from(document.querySelectorAll('#transcript .t-role-assistant'))"
        f".some(e => e.textContent.includes({full.strip()!r}))",
        timeout=20000,
    )
    assert "2 new entries" in watcher.inner_text("#tree-arrivals")
    new_ids = watcher.eval_on_selector_all(ROWS, "rs => rs.slice(-2).map(r => r.dataset.entry)")
    # A row that arrived over the socket can still post (the page gave it its CSRF token).
    assert (
        watcher.locator(f'li[data-entry="{new_ids[-1]}"] input[name="csrfmiddlewaretoken"]').count()
        == 1
    )
    watcher.click("#tree-arrivals [data-tree-refresh]")
    for eid in new_ids:
        watcher.wait_for_selector(
            f'#text-tree .tr[data-id="{eid}"]', timeout=10000, state="attached"
        )
    assert watcher.inner_text("#tree-arrivals") == ""
    assert watcher.evaluate("window.__notReloaded") == 42
    # The graph image is re-fetched for the grown tree, and it loads.
    watcher.wait_for_function(
        f"document.getElementById('live-graph').getAttribute('src') !== {graph_before!r}",
        timeout=20000,
    )
    watcher.wait_for_function(
        "document.getElementById('live-graph').complete && "
        "document.getElementById('live-graph').naturalWidth > 0",
        timeout=20000,
    )
    assert "Last turn ended: stop" in watcher.inner_text("#turn-status")
    # The editor's own page shows the answer as well.
    editor.wait_for_function(
        "Array.from(document.querySelectorAll('#transcript .t-role-assistant'))"
        f".some(e => e.textContent.includes({full.strip()!r}))",
        timeout=20000,
    )
    SHOTS.mkdir(parents=True, exist_ok=True)
    watcher.screenshot(path=str(SHOTS / "live-tab.png"), full_page=True)


def test_after_a_server_restart_the_page_resumes_without_losing_entries(browser, site):
    page = open_live(browser, site, "vera")
    before = page.locator(ROWS).count()
    page.evaluate("window.__notReloaded = 7")
    site.stop()
    page.wait_for_function(
        "document.getElementById('live-connection').textContent !== 'live'", timeout=15000
    )
    # While the server is down, three entries are appended to the session.
    site.run_django(
        "from explorer import services\n"
        "from explorer.models import Session\n"
        f"s = Session.objects.get(pk={site.session_pks[0]})\n"
        "for i in range(3):\n"
        "    services.set_label(s, None, 'a1b2c3d4', f'while-down-{i}')\n"
    )
    site.start()
    # The page reconnects by itself, says where it stands, and receives exactly the three.
    page.wait_for_function(
        f"document.querySelectorAll({ROWS!r}).length === {before + 3}", timeout=30000
    )
    page.wait_for_function(
        "document.getElementById('live-connection').textContent === 'live'", timeout=15000
    )
    transcript = page.inner_text("#transcript")
    assert re.findall(r"while-down-\d", transcript) == [
        "while-down-0",
        "while-down-1",
        "while-down-2",
    ]
    ids = page.eval_on_selector_all(ROWS, "rs => rs.map(r => r.dataset.entry)")
    assert len(ids) == len(set(ids)) == before + 3
    assert page.evaluate("window.__notReloaded") == 7


def test_a_pi_turn_written_to_a_followed_directory_appears_while_it_is_written(browser, tmp_path):
    import json

    sessions_dir = tmp_path / "pi"
    project = sessions_dir / "--home-ana-proj--"
    project.mkdir(parents=True)
    path = project / "2025-03-04T05-06-07-089Z_0195f3a2-7c41-7d2e-9b1a-00000000beef.jsonl"
    header = {
        "type": "session",
        "version": 3,
        "id": "0195f3a2-7c41-7d2e-9b1a-00000000beef",
        "timestamp": "2025-03-04T05:06:07.089Z",
        "cwd": "/home/ana/proj",
    }
    user = {
        "type": "message",
        "id": "u0000001",
        "parentId": None,
        "timestamp": "2025-03-04T05:06:08.000Z",
        "message": {"role": "user", "content": "List the files", "timestamp": 1741064768000},
    }
    path.write_text(json.dumps(header) + "\n" + json.dumps(user) + "\n")
    with LiveServer(tmp_path / "site", follow_dir=str(sessions_dir)) as site:
        deadline = time.monotonic() + 20
        pk = None
        while pk is None and time.monotonic() < deadline:
            with site.db() as conn:
                row = conn.execute(
                    "SELECT id FROM explorer_session WHERE state = 'ready'"
                ).fetchone()
            pk = row[0] if row else None
            time.sleep(0.05)
        assert pk is not None
        site.session_pks = [pk]
        page = open_live(browser, site, "vera")
        assert page.locator(ROWS).count() == 1
        call = {
            "type": "message",
            "id": "a0000002",
            "parentId": "u0000001",
            "timestamp": "2025-03-04T05:06:09.000Z",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "toolCall", "id": "c1", "name": "bash", "arguments": {"command": "ls"}}
                ],
                "api": "x",
                "provider": "p",
                "model": "m",
                "stopReason": "toolUse",
                "timestamp": 1741064769000,
            },
        }
        result = {
            "type": "message",
            "id": "t0000003",
            "parentId": "a0000002",
            "timestamp": "2025-03-04T05:06:10.000Z",
            "message": {
                "role": "toolResult",
                "toolCallId": "c1",
                "toolName": "bash",
                "content": [{"type": "text", "text": "README.md\nsrc"}],
                "isError": False,
                "timestamp": 1741064770000,
            },
        }
        # Pi writes the tool call; half a line first, then the rest.
        line = (json.dumps(call) + "\n").encode()
        with open(path, "ab", buffering=0) as fh:
            fh.write(line[:50])
            time.sleep(0.5)
            assert page.locator(ROWS).count() == 1  # a partial line waits
            fh.write(line[50:])
        page.wait_for_function(f"document.querySelectorAll({ROWS!r}).length === 2", timeout=15000)
        with open(path, "ab", buffering=0) as fh:
            fh.write((json.dumps(result) + "\n").encode())
        page.wait_for_function(f"document.querySelectorAll({ROWS!r}).length === 3", timeout=15000)
        assert "README.md" in page.inner_text("#transcript")
        assert "2 new entries" in page.inner_text("#tree-arrivals")
        page.click("#tree-arrivals [data-tree-refresh]")
        page.wait_for_selector('#text-tree .tr[data-id="t0000003"]', timeout=10000)


def test_a_reader_who_scrolled_up_is_told_of_new_entries_instead_of_pulled_down(browser, site):
    page = open_live(browser, site, "vera")
    page.set_viewport_size({"width": 1280, "height": 420})
    page.evaluate("window.scrollTo(0, 0)")
    page.wait_for_timeout(300)
    site.run_django(
        "from explorer import services\n"
        "from explorer.models import Session\n"
        f"s = Session.objects.get(pk={site.session_pks[0]})\n"
        "for i in range(3):\n"
        "    services.set_label(s, None, 'a1b2c3d4', f'while-reading-{i}')\n"
    )
    page.wait_for_function(
        "!document.getElementById('new-below').hidden && "
        "document.getElementById('new-below').textContent === '3 new entries below'",
        timeout=30000,  # written by another process: they arrive with the page's 20 s sync
    )
    assert page.evaluate("window.scrollY") == 0  # the reading place stayed put
    page.click("#new-below")
    page.wait_for_function("document.getElementById('new-below').hidden", timeout=5000)
    last = page.locator(ROWS).last
    assert "while-reading-2" in last.inner_text()
    assert page.evaluate(
        "document.querySelector('#transcript > li.t-entry:last-child')"
        ".getBoundingClientRect().bottom <= window.innerHeight + 1"
    )


def test_an_editor_sends_turn_after_turn_and_a_raced_tab_is_told(browser, site):
    """The turn form names the cursor the page shows; the page follows its own cursor as
    the answers arrive, so a second send from it is accepted, while a tab that still names
    the old leaf is refused with a message and nothing is written."""
    editor = open_live(browser, site, "eddie")
    other_tab = open_live(browser, site, "eddie")
    shown = editor.input_value("#turn-expected-leaf")
    assert shown and other_tab.input_value("#turn-expected-leaf") == shown
    rows = editor.locator(ROWS).count()
    for n in (1, 2):
        editor.fill("#turn-text", f"Question {n}")
        editor.click("#send-turn")
        editor.wait_for_function(
            f"document.querySelectorAll({ROWS!r}).length === {rows + 2 * n}", timeout=30000
        )
        editor.wait_for_function(
            "document.getElementById('turn-status').textContent.includes('Last turn ended')",
            timeout=30000,
        )
        newest = editor.eval_on_selector_all(ROWS, "rs => rs[rs.length - 1].dataset.entry")
        editor.wait_for_function(
            f"document.getElementById('turn-expected-leaf').value === {newest!r}", timeout=10000
        )
    assert "The session changed" not in editor.inner_text("#turn-status")
    # A tab whose socket had not caught up yet still names the leaf it was opened at.
    other_tab.evaluate(f"document.getElementById('turn-expected-leaf').value = {shown!r}")
    other_tab.fill("#turn-text", "Question from a stale tab")
    other_tab.click("#send-turn")
    other_tab.wait_for_function(
        "document.getElementById('turn-status').textContent.includes('The session changed')",
        timeout=20000,
    )
    assert "Nothing was written" in other_tab.inner_text("#turn-status")
    editor.wait_for_timeout(1000)
    assert editor.locator(ROWS).count() == rows + 4


def test_entries_on_another_branch_are_counted_and_shown_on_request(browser, site):
    """The page stays on its branch while another writer appends elsewhere; the notice
    counts those entries, and its button swaps that branch in."""
    page = open_live(browser, site, "vera")
    pk = site.session_pks[0]
    status, body = site.post("eddie", f"/sessions/{pk}/cursor/", {"target": "e5f6a7b8"})
    assert status in (200, 204, 302), body
    rows_before = page.locator(ROWS).count()
    for i in range(2):
        status, body = site.post(
            "eddie", f"/sessions/{pk}/label/", {"target": "a1b2c3d4", "label": f"side-{i}"}
        )
        assert status in (200, 204, 302), body
    page.wait_for_function(
        "(document.getElementById('branch-arrivals').textContent || '').includes('2 new entries')",
        timeout=30000,
    )
    assert page.locator(ROWS).count() == rows_before  # nothing drawn, nothing rebuilt
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "live-other-branch.png"), full_page=True)
    page.click("[data-switch-branch]")
    page.wait_for_function(
        "!!document.querySelector('#transcript li[data-entry=\"e5f6a7b8\"]')", timeout=30000
    )
    assert "side-1" in page.locator(ROWS).last.inner_text()
    assert page.locator("#branch-arrivals").inner_text().strip() == ""
