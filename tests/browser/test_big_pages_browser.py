"""The Tree and Compactions tabs of big generated sessions in Chromium: as light as a small
session's, still clear, and every fold or older page reachable from the keyboard."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from benchmarks.gen_session import generate_session
from explorer import queries, services
from tests.browser.conftest import SHOTS
from tests.web.test_route_reuse import _compaction_session


@pytest.fixture
def big(transactional_db, tmp_path):
    path = generate_session(tmp_path / "big.jsonl", entries=6000, branch_points=120, seed=7)
    return services.import_bytes(path.read_bytes(), source_path=str(path), user=None).session


def test_the_tree_of_a_big_session_stays_light_and_opens_its_folds(big, browser_page):
    page, base = browser_page
    page.goto(f"{base}/sessions/{big.pk}/")
    nodes = page.locator("#graph .graph-canvas g.node")
    expect(nodes.first).to_be_visible()
    assert queries.TREE_BUDGET < nodes.count() <= queries.TREE_BUDGET * 1.3
    page.screenshot(path=str(SHOTS / "tree-big-session.png"))
    # A closed subtree inside a folded side branch: → on the branch row opens it (keyboard),
    # then the subtree's row opens it as its own tree.
    branch_key = page.evaluate(
        """() => { const rows = [...document.querySelectorAll('#text-tree > li.tr')];
        for (let i = 0; i < rows.length; i++) {
          if (!rows[i].classList.contains('collapsed')) continue;
          const lvl = +rows[i].dataset.indent;
          for (let j = i + 1; j < rows.length && +rows[j].dataset.indent > lvl; j++)
            if (rows[j].dataset.kind === 'subtree') { rows[i].setAttribute('data-pick', '1');
              rows[j].setAttribute('data-pick', '2'); return rows[i].dataset.id; } }
        return null; }"""
    )
    assert branch_key
    subtree = page.locator('#text-tree li[data-pick="2"] a.tr-subtree')
    expect(subtree).to_be_hidden()
    page.locator('#text-tree li[data-pick="1"]').focus()
    page.keyboard.press("ArrowRight")
    expect(subtree).to_be_visible()
    subtree.focus()
    page.keyboard.press("Enter")
    page.wait_for_url("**root=**")
    expect(page.locator("#graph .graph-canvas g.node").first).to_be_visible()
    page.screenshot(path=str(SHOTS / "tree-big-subtree.png"))
    assert page.errors == []


def test_the_compactions_list_loads_older_ones_from_the_keyboard(transactional_db, browser_page):
    page, base = browser_page
    session = services.import_bytes(_compaction_session(400), source_path="", user=None).session
    page.goto(f"{base}/sessions/{session.pk}/compactions/")
    items = page.locator(".comp-items li:not(.comp-older)")
    expect(items).to_have_count(10)
    page.screenshot(path=str(SHOTS / "compactions-newest.png"))
    older = page.locator(".comp-items li.comp-older a")
    older.focus()
    page.keyboard.press("Enter")
    expect(items).to_have_count(20)
    # The focus stays in the list: on the newest of the loaded ones, next to where it was.
    focused = page.locator(".comp-items li a:focus")
    expect(focused).to_have_count(1)
    assert "e0000299" in focused.inner_text()
    page.screenshot(path=str(SHOTS / "compactions-older.png"))
    assert page.errors == []
