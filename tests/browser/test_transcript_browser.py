"""The Transcript tab in Debian's Chromium: a 20,000-entry route, branch switching,
compaction cards, permalinks and the phone layout."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

import pytest
from django.db import OperationalError, transaction

from explorer import queries, services
from tests.browser.conftest import SHOTS

T = TypeVar("T")

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

from playwright.sync_api import expect  # noqa: E402


@pytest.fixture
def big(transactional_db, tmp_path):
    """20,000 entries written by the benchmark generator, imported as a user would (a route
    a hundred times a window; the window is the same at any length, and a bigger session
    only made the suite slower)."""
    from benchmarks.gen_session import generate_session

    path = tmp_path / "big.jsonl"
    generate_session(str(path), entries=20_000, branch_points=20, seed=7)
    result = services.import_file(str(path), source_path=str(path), user=None)
    assert result.ok
    return result.session


def test_a_20000_entry_route_opens_as_a_window_and_scrolls_both_ways(big, browser_page):
    page, base = browser_page
    route = queries.route_map(big, queries.default_leaf_id(big))
    assert len(route.ids) > 8_000  # a long route, not a short branch
    page.goto(f"{base}/sessions/{big.pk}/transcript/")
    entries = page.locator("#transcript > li.t-entry")
    expect(entries.first).to_be_visible()
    shown = entries.count()
    assert 0 < shown <= 60  # a window, not the route
    assert page.locator(f'li[data-entry="{route.ids[-1]}"]').count() == 1
    # Scrolling up loads the page before the window, and the reading place stays put.
    first = page.locator("#transcript > li.t-entry").first.get_attribute("data-entry")
    page.evaluate("window.scrollTo(0, 0)")
    expect(page.locator(f'li[data-entry="{route.ids[route.index(first) - 1]}"]')).to_have_count(1)
    assert page.locator("#transcript > li.t-entry").count() > shown
    assert page.locator("#transcript > li.t-later").count() == 0  # the window is the tip's
    ids = page.eval_on_selector_all(
        "#transcript > li.t-entry", "els => els.map(e => e.dataset.entry)"
    )
    at = route.index(ids[0])
    assert ids == list(route.ids[at : at + len(ids)])  # one unbroken stretch, in route order
    page.screenshot(path=str(SHOTS / "transcript-20k.png"))
    # A permalink deep inside the route opens around it, and scrolling down loads more.
    mid = route.ids[len(route.ids) // 2]
    page.goto(f"{base}/sessions/{big.pk}/transcript/?entry={mid}")
    expect(page.locator("li.is-target")).to_have_attribute("data-entry", mid)
    expect(page.locator("li.is-target")).to_be_in_viewport()
    last = page.locator("#transcript > li.t-entry").last.get_attribute("data-entry")
    page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
    expect(page.locator(f'li[data-entry="{route.ids[route.index(last) + 1]}"]')).to_have_count(1)
    assert page.errors == []


def test_branch_switch_permalink_and_compaction_card(demo, browser_page, django_user_model):
    page, base = browser_page
    user = django_user_model.objects.get(username="e2e")
    services.append_via_manager(
        demo, user, "1b2c3d4e",
        lambda m: m.append_compaction("## Summary\nread demo.txt", "d4e5f6a7", 4000, None, False, None),
    )  # fmt: skip
    page.goto(f"{base}/sessions/{demo.pk}/transcript/")
    card = page.locator("li.t-role-compaction")
    expect(card).to_contain_text("read demo.txt")
    card.get_by_text("Show the 3 replaced entries").click()
    expect(card.locator(".replaced-list li")).to_have_count(3)
    expect(page.locator('li[data-entry="d4e5f6a7"]')).to_have_class(
        __import__("re").compile(r"\bt-kept\b")
    )
    page.screenshot(path=str(SHOTS / "transcript-compaction.png"), full_page=True)
    # The branch point switches to the sibling route, labelled "viewing".
    page.locator('li[data-entry="b2c3d4e5"] .t-switch a[aria-label="Next branch"]').click()
    expect(page.locator('li[data-entry="e5f6a7b8"]')).to_be_visible()
    expect(page.locator(".route-line .tag-viewing")).to_have_text("viewing")
    expect(page.locator('li[data-entry="e5f6a7b8"] .t-sw-pos')).to_have_text("2/2")
    page.locator('li[data-entry="e5f6a7b8"] .t-switch a[aria-label="Previous branch"]').click()
    expect(page.locator('li[data-entry="b2c3d4e5"]')).to_be_visible()
    # The permalink of an entry opens the transcript on it.
    href = page.locator('li[data-entry="d4e5f6a7"] .t-perma').get_attribute("href")
    page.goto(base + href)
    expect(page.locator("li.is-target")).to_have_attribute("data-entry", "d4e5f6a7")
    assert page.errors == []


def test_the_transcript_fits_a_phone(demo, browser_page):
    page, base = browser_page
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{base}/sessions/{demo.pk}/transcript/")
    expect(page.locator('li[data-entry="d4e5f6a7"]')).to_be_visible()
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 1, f"the page scrolls sideways by {overflow}px"
    box = page.locator('li[data-entry="d4e5f6a7"]').bounding_box()
    assert box is not None and box["width"] <= 390
    page.screenshot(path=str(SHOTS / "transcript-phone.png"), full_page=True)
    assert page.errors == []


def _when_unlocked(write: Callable[[], T]) -> T:
    """``write`` run again while the test database says "table is locked".

    The tests' SQLite database is one in-memory database shared by the test and the live
    server's threads, where a write that meets a read in progress fails at once instead of
    waiting (the app's own file databases wait: WAL and a busy timeout). The page polls
    its tail meanwhile, so the other user's writes here may meet one of its reads."""
    for _ in range(50):
        try:
            with transaction.atomic():
                return write()
        except OperationalError as exc:
            if "locked" not in str(exc):
                raise
            time.sleep(0.1)
    return write()


def test_an_append_by_another_user_arrives_at_the_tip(demo, browser_page, django_user_model):
    page, base = browser_page
    page.goto(f"{base}/sessions/{demo.pk}/transcript/")
    expect(page.locator('li[data-entry="1b2c3d4e"]')).to_be_visible()
    other = _when_unlocked(
        lambda: django_user_model.objects.create_user(username="other", password="pw-other-123456")
    )
    _when_unlocked(lambda: services.move_cursor(demo, other, "1b2c3d4e"))
    result = _when_unlocked(
        lambda: services.append_message(demo, other, {"role": "user", "content": "a new question"})
    )
    arrived = page.locator(f'li[data-entry="{result.entry.entry_id}"]')
    expect(arrived).to_contain_text("a new question", timeout=15_000)
    assert page.locator("#transcript > li.t-tail").count() == 1  # still listening
    assert page.errors == []


@pytest.mark.parametrize("tab", ["live/", ""])
def test_the_live_and_tree_tabs_fit_a_phone(demo, browser_page, tab):
    page, base = browser_page
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{base}/sessions/{demo.pk}/{tab}")
    expect(page.locator(".tabs a[aria-current=page]")).to_be_visible()
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    name = (tab or "tree").strip("/")
    if tab == "live/":  # following: no "new entries below"; no turn: Cancel disabled
        expect(page.locator("#new-below")).to_be_hidden()
    page.screenshot(path=str(SHOTS / f"{name}-phone.png"), full_page=True)
    assert overflow <= 1, f"the {name} tab scrolls sideways by {overflow}px"
    # This test server speaks no websocket (tests/browser/test_live_browser.py runs daphne).
    assert [e for e in page.errors if "WebSocket" not in e and "object Event" not in e] == []
