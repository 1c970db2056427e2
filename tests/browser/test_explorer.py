"""End-to-end: the explorer in Debian's Chromium, driven by Playwright against a live server."""

from __future__ import annotations

import os

import pytest

from explorer import queries, services
from tests.browser.conftest import SHOTS
from tests.conftest import PI_FIXTURES

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs a loop

from playwright.sync_api import expect  # noqa: E402


def test_it_opens_an_entry_from_the_graph(demo, browser_page):
    page, base = browser_page
    page.goto(f"{base}/sessions/{demo.pk}/")
    expect(page.locator("#graph .graph-canvas svg")).to_be_visible()
    node = page.locator("#graph g.ge-entry", has_text="assistant").first
    node.locator("a").click()
    expect(page.locator("#entry-panel .pill-assistant")).to_be_visible()
    page.screenshot(path=str(SHOTS / "tree-graph-entry.png"))
    # The text tree is keyboard navigable.
    page.locator("#text-tree .tr").first.focus()
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.classList.contains('tr')")
    assert page.errors == []


def test_it_hides_a_message_and_undoes_it(demo, browser_page):
    page, base = browser_page
    page.goto(f"{base}/sessions/{demo.pk}/context/")
    row = page.locator('tr[data-entry="d4e5f6a7"]')
    expect(row).to_have_attribute("data-status", "same")
    row.get_by_role("link", name="Hide / replace").click()
    page.get_by_label("Reason").fill("duplicate answer")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator(".preview")).to_contain_text("Preview")
    page.screenshot(path=str(SHOTS / "edit-preview.png"))
    page.get_by_role("button", name="Save edit").click()
    row = page.locator('tr[data-entry="d4e5f6a7"]')
    expect(row).to_have_attribute("data-status", "hidden")
    expect(row.locator(".col-raw")).to_contain_text("The file says hello world.")
    expect(row.locator(".col-proj")).not_to_contain_text("hello world")
    page.screenshot(path=str(SHOTS / "context-hidden.png"), full_page=True)
    row.get_by_role("button", name="Undo (restore)").click()
    expect(page.locator('tr[data-entry="d4e5f6a7"]')).not_to_have_attribute("data-status", "hidden")
    expect(page.locator('tr[data-entry="d4e5f6a7"] .col-proj')).to_contain_text("hello world")
    assert page.errors == []


def test_it_compares_two_branches(demo, browser_page):
    page, base = browser_page
    page.goto(f"{base}/sessions/{demo.pk}/compare/")
    page.get_by_label("Route A").fill("d4e5f6a7")
    page.get_by_label("Route B").fill("e5f6a7b8")
    page.get_by_role("button", name="Compare").click()
    expect(page.locator("#compare-result")).to_contain_text("Common ancestor")
    expect(page.locator("#compare-result")).to_contain_text("a1b2c3d4")
    page.screenshot(path=str(SHOTS / "compare.png"), full_page=True)
    assert page.errors == []


def test_it_searches_and_jumps_to_a_hit(demo, browser_page):
    page, base = browser_page
    page.goto(f"{base}/sessions/{demo.pk}/search/")
    page.locator("#search-q").fill("hello world")
    page.get_by_role("button", name="Search").click()
    hit = page.locator(".result-link").first
    expect(hit).to_be_visible()
    expect(page.locator(".snippet mark").first).to_have_text("hello world", ignore_case=True)
    page.screenshot(path=str(SHOTS / "search.png"))
    hit.click()
    expect(page.locator("#entry-panel")).to_contain_text("hello world")
    page.screenshot(path=str(SHOTS / "search-hit.png"))
    assert page.errors == []


def test_a_big_sessions_search_shows_its_first_hits_then_the_count(browser_page, monkeypatch):
    """In a big session the first page comes before the count; the count then replaces the
    page's "more than 50" by itself, and the next page reads the counted hits."""
    from tests.web.test_search_first_hits import HITS, _session_bytes

    monkeypatch.setattr(queries.search, "SEARCH_SCAN_ENTRIES", -1)  # every session searched as big
    session = services.import_bytes(_session_bytes(), source_path="", user=None).session
    page, base = browser_page
    page.goto(f"{base}/sessions/{session.pk}/search/")
    page.locator("#search-q").fill("fix")
    page.keyboard.press("Enter")
    expect(page.locator(".result-link")).to_have_count(50)
    expect(page.locator("#search-count")).to_contain_text(f"{HITS} hits in 1 session")
    page.screenshot(path=str(SHOTS / "search-counted.png"))
    page.locator("#search-next").click()
    expect(page.locator("#search-count")).to_contain_text("showing 51–100")
    expect(page.locator("#search-count")).to_contain_text(f"{HITS} hits")
    assert page.errors == []


@pytest.fixture
def generated(transactional_db, tmp_path):
    from benchmarks.gen_session import generate_session

    path = tmp_path / "gen.jsonl"
    generate_session(str(path), entries=400, branch_points=4, seed=5)
    return services.import_bytes(path.read_bytes(), source_path=str(path), user=None).session


def test_it_unfolds_chains_and_filters_the_text_tree(generated, browser_page):
    page, base = browser_page
    page.goto(f"{base}/sessions/{generated.pk}/")
    expect(page.locator("#graph .graph-canvas svg")).to_be_visible()
    # Keyboard: → opens a folded side branch, and on a chain row unfolds it in place
    # (loaded on demand).
    page.locator("#text-tree > li.branch.collapsed").first.focus()
    page.keyboard.press("ArrowRight")
    chain_row = page.locator("#text-tree > li.tr-chain:not([hidden])").first
    chain_row.focus()
    rows_before = page.locator("#text-tree > li").count()
    page.keyboard.press("ArrowRight")
    expect(page.locator("#text-tree > li")).not_to_have_count(rows_before)
    page.goto(f"{base}/sessions/{generated.pk}/")
    expect(page.locator("#graph .graph-canvas svg")).to_be_visible()
    before = page.locator("#graph .graph-canvas g.node").count()
    # The graph opens on the cursor's end of the route: unfold a chain drawn in view.
    page.evaluate(
        """() => { const vp = document.querySelector('#graph').getBoundingClientRect();
        const a = [...document.querySelectorAll('#graph .graph-canvas g.ge-chain a')].find(x => {
          const r = x.getBoundingClientRect();
          return r.top >= vp.top && r.bottom <= vp.bottom && r.left >= vp.left && r.right <= vp.right; });
        a.setAttribute('data-pick', '1'); }"""
    )
    page.locator("#graph .graph-canvas g.ge-chain a[data-pick]").click()
    expect(page.locator("#graph .graph-canvas g.node")).not_to_have_count(before)
    assert "expand=" in page.url
    page.screenshot(path=str(SHOTS / "graph-unfolded.png"))
    # Filters hide everything but user messages.
    page.get_by_role("link", name="User only").click()
    visible_roles = page.eval_on_selector_all(
        "#text-tree > li.tr-entry",
        "els => els.filter(e => e.offsetParent !== null).map(e => e.dataset.role)",
    )
    assert visible_roles and set(visible_roles) == {"user"}
    page.screenshot(path=str(SHOTS / "tree-user-only.png"))
    assert page.errors == []


def test_a_graph_node_opens_in_the_panel_after_a_chain_is_unfolded(generated, browser_page):
    page, base = browser_page
    page.goto(f"{base}/sessions/{generated.pk}/")
    expect(page.locator("#graph .graph-canvas svg")).to_be_visible()
    chain = page.locator("#graph .graph-canvas g.ge-chain a").first
    href = chain.get_attribute("xlink:href") or chain.get_attribute("href")
    page.goto(base + href)  # an unfolded view, as after clicking the chain
    expect(page.locator("#graph .graph-canvas svg")).to_be_visible()
    assert "expand=" in page.url
    picked = page.evaluate(
        """() => { const a = [...document.querySelectorAll('#graph g.ge-entry a')].find(x => {
          const u = new URL(x.getAttribute('xlink:href') || x.getAttribute('href'), location.href);
          return u.searchParams.get('entry') !== document.querySelector('#entry-panel').dataset.entryId; });
        a.setAttribute('data-pick', '1');
        return new URL(a.getAttribute('xlink:href') || a.getAttribute('href'), location.href).searchParams.get('entry'); }"""
    )
    page.locator("#graph g.ge-entry a[data-pick]").dispatch_event("click")
    expect(page.locator("#entry-panel")).to_have_attribute("data-entry-id", picked)
    # The minimap's copy of the graph repeats none of its ids.
    repeated = page.evaluate(
        """() => { const ids = [...document.querySelectorAll('[id]')].map(e => e.id);
        return ids.filter((x, i) => ids.indexOf(x) !== i); }"""
    )
    assert repeated == []
    assert page.errors == []


@pytest.fixture
def linear_large(transactional_db):

    path = PI_FIXTURES / "large-session.jsonl"
    return services.import_bytes(path.read_bytes(), source_path=str(path), user=None).session


@pytest.mark.pi_fixtures
def test_a_long_linear_session_reads_as_turns_and_pages(linear_large, browser_page):
    page, base = browser_page
    page.goto(f"{base}/sessions/{linear_large.pk}/")
    tree = page.locator("#text-tree")
    expect(tree.locator("li.tr-entry.role-user").first).to_be_visible()
    # The user turns near the cursor, and turns spread before them, are rows.
    assert tree.locator("li.tr-entry.role-user").count() > 2 * queries.TREE_BUDGET // 5 - 5
    # The route near the cursor, unfolded, and the turns drawn before it.
    assert tree.locator("li.tr-entry").count() >= 200 + queries.TREE_BUDGET // 8
    assert page.locator("#graph .graph-canvas g.ge-entry").count() > queries.TREE_BUDGET // 4
    page.screenshot(path=str(SHOTS / "tree-linear-session.png"))
    # "User only" keeps the user messages of the loaded page and the paging row.
    page.get_by_role("link", name="User only").click()
    visible = page.eval_on_selector_all(
        "#text-tree > li",
        "els => els.filter(e => e.offsetParent !== null).map(e => e.dataset.kind + ':' + e.dataset.role)",
    )
    assert set(visible) == {"entry:user", "page:page"}
    assert visible.count("entry:user") > 2 * queries.TREE_BUDGET // 5 - 5
    page.get_by_role("link", name="All", exact=True).click()
    # Keyboard: → on "show N earlier" loads that page in place and keeps the focus there.
    more = tree.locator("li.tr-page-earlier")
    expect(more).to_have_count(1)
    shown = int(more.inner_text().split("show ")[1].split()[0])
    before = tree.locator("li.tr-entry").count()
    next_id = more.evaluate("e => e.nextElementSibling.dataset.id")
    more.focus()
    page.keyboard.press("ArrowRight")
    expect(tree.locator("li.tr-entry")).to_have_count(before + shown)
    expect(tree.locator("li.tr-page-earlier")).to_have_count(0)
    focused = tree.locator("li.tr-entry:focus")
    expect(focused).to_have_count(1)  # the loaded entry next to where the focus was
    assert focused.evaluate("e => e.nextElementSibling.dataset.id") == next_id
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.classList.contains('tr')")
    page.screenshot(path=str(SHOTS / "tree-linear-paged.png"))
    assert page.errors == []


def test_the_session_list_fits_a_phone_screen(demo, browser_page):
    # The wide table scrolls inside its directory group; the page itself never scrolls sideways.
    page, base = browser_page
    page.set_viewport_size({"width": 420, "height": 860})
    page.goto(f"{base}/")
    expect(page.locator("table.data").first).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 420
    assert page.errors == []


def test_every_tab_has_a_key(demo, browser_page):
    """The first nine tabs have their digit, Review (the tenth) has r; the help lists both."""
    page, base = browser_page
    page.goto(f"{base}/sessions/{demo.pk}/")
    tabs = page.locator(".tabs a")
    count = tabs.count()
    assert count == 10
    help_text = page.locator("#shortcuts").inner_text()
    assert "9" in help_text and "Review" in help_text
    for key, index in (("9", 8), ("r", 9)):
        page.goto(f"{base}/sessions/{demo.pk}/")
        href = tabs.nth(index).get_attribute("href")
        with page.expect_navigation():
            page.keyboard.press(key)
        assert page.url.endswith(href)


def test_the_text_tree_is_one_tab_stop(demo, browser_page):
    # Arrow keys move inside the tree; Tab enters it once and then moves on, instead of
    # stepping through every row's link.
    page, base = browser_page
    page.goto(f"{base}/sessions/{demo.pk}/")
    expect(page.locator("#text-tree .tr").first).to_be_visible()
    page.get_by_role("link", name="Labelled").focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "tree-find"  # type to filter
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.matches('#text-tree > .tr')")
    page.keyboard.press("Tab")
    assert page.evaluate("!document.getElementById('text-tree').contains(document.activeElement)")
    assert page.errors == []


def test_the_text_tree_has_branch_marks_friendly_names_and_filters_as_you_type(demo, browser_page):
    page, base = browser_page
    page.goto(f"{base}/sessions/{demo.pk}/")
    tree = page.locator("#text-tree")
    expect(tree.locator('li[data-id="e5f6a7b8"] .tr-glyph')).to_have_text("├─")
    expect(tree.locator('li[data-id="b2c3d4e5"] .tr-glyph')).to_have_text("└─")
    expect(tree.locator('li[data-id="c3d4e5f6"] .tr-role')).to_have_text("tool result")
    expect(tree.locator('li[data-id="1b2c3d4e"] .tr-role')).to_have_text("session name")
    page.locator("#tree-find").fill("another route")
    visible = page.eval_on_selector_all(
        "#text-tree > li.tr-entry",
        "els => els.filter(e => e.offsetParent !== null).map(e => e.dataset.id)",
    )
    assert visible == ["e5f6a7b8"]
    page.screenshot(path=str(SHOTS / "tree-filter-typed.png"))
    page.locator("#tree-find").fill("")
    expect(tree.locator('li[data-id="a1b2c3d4"]')).to_be_visible()
    assert page.errors == []


def test_the_tree_tab_puts_tree_graph_and_entry_side_by_side_on_a_wide_screen(demo, browser_page):
    """At 1440 px the tree, the graph and the entry panel sit in three columns from the left
    edge; nothing else (the arrivals notice) takes a column of that grid."""
    page, base = browser_page
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{base}/sessions/{demo.pk}/")
    boxes = {
        name: page.locator(sel).bounding_box()
        for name, sel in (
            ("tree", "#tree-panel"),
            ("graph", "#graph-panel"),
            ("entry", "#entry-panel-wrap"),
        )
    }
    assert boxes["tree"]["x"] < 60, boxes
    assert boxes["tree"]["x"] < boxes["graph"]["x"] < boxes["entry"]["x"], boxes
    assert abs(boxes["tree"]["y"] - boxes["entry"]["y"]) < 40, boxes
    page.screenshot(path=str(SHOTS / "tree-tab-wide.png"))


def test_the_export_menu_sits_in_the_actions_row_and_drops_down(demo, browser_page):
    page, base = browser_page
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{base}/sessions/{demo.pk}/")
    summary = page.locator(".export-menu > summary")
    branch = page.get_by_role("link", name="Download branch")
    assert abs(summary.bounding_box()["y"] - branch.bounding_box()["y"]) < 5
    tabs_y = page.locator(".tabs").bounding_box()["y"]
    summary.click()
    route = page.get_by_role("link", name="HTML of this route")
    expect(route).to_be_visible()
    # The choices drop over the page; the tabs below do not move.
    assert page.locator(".tabs").bounding_box()["y"] == tabs_y
    page.screenshot(path=str(SHOTS / "export-menu-open.png"))
