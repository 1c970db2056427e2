"""The Tree tab of a Claude Code or Codex session keeps its three columns (text tree | graph |
entry panel) in Chromium: the notes saying where the projection comes from (and a Codex
session's joined forks) span the page above them instead of taking the tree's cell, which
pushed the graph into the narrow first column and the entry panel onto a row of its own."""

from __future__ import annotations

import os

import pytest

from explorer.agent_import import import_agent_file
from tests.browser.conftest import SHOTS
from tests.conftest import FIXTURES_DIR

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright's sync API runs a loop

pytestmark = pytest.mark.agent_fixtures

CODEX_DIR = FIXTURES_DIR / "codex/own/sessions/2026/10/12"
CLAUDE = FIXTURES_DIR / "claude-code/own/rate-limit/145d1213-c732-5068-9ff5-eef2735100ec.jsonl"


def _box(page, selector: str) -> dict:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    return box


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_the_tree_tab_keeps_its_columns_under_the_agent_notes(agent, browser_page):
    page, base = browser_page
    if agent == "codex":  # the second file is a fork of the first: a "forks joined" note too
        for path in sorted(CODEX_DIR.glob("*.jsonl")):
            import_agent_file(str(path))
    else:
        import_agent_file(str(CLAUDE))
    from explorer.models import Session

    session = Session.objects.get(agent=agent)
    page.goto(f"{base}/sessions/{session.pk}/")
    page.locator("#graph svg").first.wait_for()
    notes = [".projection-source"] + ([".codex-forks"] if agent == "codex" else [])
    tree, graph = _box(page, "#tree-panel"), _box(page, "#graph-panel")
    entry = _box(page, "#entry-panel-wrap")
    for note in notes:
        box = _box(page, note)
        # Each note spans the three columns and sits above them.
        assert box["x"] <= tree["x"] + 1 and box["x"] + box["width"] >= entry["x"], note
        assert box["y"] + box["height"] <= tree["y"], note
    # One row: the tree, then the graph, then the entry panel, left to right.
    assert abs(tree["y"] - graph["y"]) < 2 and abs(graph["y"] - entry["y"]) < 2
    assert tree["x"] + tree["width"] <= graph["x"] and graph["x"] + graph["width"] <= entry["x"]
    assert graph["width"] > tree["width"]
    page.screenshot(path=str(SHOTS / f"agent-tree-columns-{agent}.png"))
    assert page.errors == []
