"""Route figures (``explorer.session.route_figures``) equal the engine's answer from scratch.

For every entry of generated sessions (branches, compactions keeping part of a turn, context
edits hiding, replacing and naming entries across compactions or before they exist, branch
summaries, system messages, dangling and late parents) and of Pi's real files, each figure
is compared with what the engine computes for that entry as the leaf.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.session import exactsum
from explorer.session.context import (
    _walk_up,
    build_entry_index,
    get_latest_compaction_entry,
    projection_from_path,
)
from explorer.session.describe import cost_of, file_uses, tool_calls_of, total_tokens_of
from explorer.session.formats.cli import stats_record_pi
from explorer.session.manager import SessionManager
from explorer.session.route_figures import RouteFigures, figures_of_entries, figures_of_route
from explorer.session.tokens import estimate_every_message, estimate_projected_context_tokens
from tests.conftest import pi_fixture_files
from tests.session.test_projection_properties import TEXTS, _message


class _Branch:
    """What ``stats_record_pi`` asks of a manager: the route to a leaf."""

    def __init__(self, path: list[dict[str, Any]]) -> None:
        self.path = path

    def get_branch(self, _leaf: Any) -> list[dict[str, Any]]:
        return self.path


def _same(a: float, b: float) -> bool:
    return (a != a and b != b) or a == b


def _id(entry: dict[str, Any]) -> str | None:
    value = entry.get("id")
    return value if isinstance(value, str) else None


def engine_figures(path: list[dict[str, Any]]) -> dict[str, Any]:
    """Every figure of the route ``path`` (root first), by the engine from scratch."""
    stats = stats_record_pi(_Branch(path), "leaf")
    # Pointers are ids; an id that is not a string (which the store refuses) points nowhere.
    edits = [_id(e) for e in path if e.get("type") == "context_edit"]
    latest = get_latest_compaction_entry(path)
    projection = projection_from_path(path)
    tokens = 0.0
    cost = 0.0
    for e in path:
        tokens += total_tokens_of(e)
        cost += cost_of(e)
    return {
        "depth": len(path) - 1,
        "turns": sum(
            1
            for e in path
            if e.get("type") == "message"
            and isinstance(e.get("message"), dict)
            and e["message"].get("role") == "user"
        ),
        "responses": stats["responses"],
        "usage": stats["usage"],
        "tokens": tokens,
        "cost": cost,
        "tool_calls": sum(len(tool_calls_of(e)) for e in path),
        "compaction_id": _id(latest) if latest is not None else None,
        "edit_id": edits[-1] if edits else None,
        "prev_edit_id": edits[-2] if len(edits) > 1 else None,
        "context_tokens": estimate_projected_context_tokens(projection, path),
        # The Timeline's "estimate" line: every message of the projection estimated.
        "every_estimate": estimate_every_message(projection.messages).tokens,
        # The live meter's message count.
        "messages": len(projection.messages),
        # What a part of the route adds up to, as two rows' difference: the route's cost
        # exactly summed (rounded once), its entries of type "message" and naming a file.
        "exact_cost": exactsum.total(cost_of(e) for e in path),
        "message_entries": sum(1 for e in path if e.get("type") == "message"),
        "file_use_entries": sum(1 for e in path if file_uses(e)),
    }


def assert_figures(figures: RouteFigures, path: list[dict[str, Any]]) -> None:
    want = engine_figures(path)
    got = {
        "depth": figures.depth,
        "turns": figures.turns,
        "responses": figures.responses,
        "usage": figures.usage,
        "tokens": figures.tokens,
        "cost": figures.cost,
        "tool_calls": figures.tool_calls,
        "compaction_id": figures.compaction_id,
        "edit_id": figures.edit_id,
        "prev_edit_id": figures.prev_edit_id,
        "context_tokens": figures.context_tokens,
        "every_estimate": figures.every_estimate,
        "messages": figures.messages,
        "exact_cost": (
            exactsum.rounded(figures.cost_partials)
            if figures.cost_partials is not None
            else "past the floats"
        ),
        "message_entries": figures.message_entries,
        "file_use_entries": figures.file_use_entries,
    }
    assert _same(got.pop("every_estimate"), want.pop("every_estimate")), (
        path[-1].get("id"),
        figures.every_estimate,
    )
    assert _same(got.pop("context_tokens"), want.pop("context_tokens")), (
        path[-1].get("id"),
        figures.context_tokens,
        engine_figures(path)["context_tokens"],
    )
    assert got == want, path[-1].get("id")


def assert_session(entries: list[Any]) -> int:
    """Check every entry of a session; returns how many were checked."""
    dicts = [e for e in entries if isinstance(e, dict)]
    index = build_entry_index(dicts)
    checked = 0
    for entry, figures in zip(entries, figures_of_entries(entries), strict=True):
        if not isinstance(entry, dict):
            assert figures is None
            continue
        assert figures is not None
        path = _walk_up(entry, index)
        path.reverse()
        assert_figures(figures, path)
        checked += 1
    return checked


USAGE = st.sampled_from(
    [
        None,
        {"input": 5, "output": 2, "cacheRead": 1, "cacheWrite": 0, "cost": {"total": 0.25}},
        {"input": 7, "output": 0, "cacheRead": 0, "cacheWrite": 3, "totalTokens": 10},
        {"input": 1.5, "output": "x", "cost": {"total": math.nan}},
        # Costs whose sums depend on the order they are added in (0.1 + 0.2 + 0.3).
        {"input": 2, "output": 1, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.1}},
        {"input": 2, "output": 1, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 0.2}},
        {"input": 2, "output": 1, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": 1e-17}},
    ]
)


@st.composite
def sessions(draw):
    """Entries in file order; ids unique strings unless asked for the odd cases."""
    n = draw(st.integers(1, 40))
    entries: list[Any] = []
    for i in range(n):
        eid = f"e{i}"
        roll = draw(st.integers(0, 19))
        if i == 0 or roll == 0:
            parent = None
        elif roll == 1:
            parent = draw(st.sampled_from(["gone", f"e{min(n - 1, i + 1)}"]))  # dangling, late
        elif roll < 8:
            parent = f"e{i - 1}"  # mostly a chain: long routes
        else:
            parent = f"e{draw(st.integers(0, i - 1))}"
        base: dict[str, Any] = {"type": "", "id": eid, "parentId": parent, "timestamp": "t"}
        kind = draw(
            st.sampled_from(
                ["message"] * 8
                + ["edit"] * 3
                + ["compaction"] * 2
                + ["branch_summary", "custom_message", "usage", "model", "label"]
            )
        )
        if kind == "message" or i == 0:
            base["type"] = "message"
            base["message"] = _message(draw, i)
            if base["message"]["role"] == "assistant" and draw(st.booleans()):
                usage = draw(USAGE)
                if usage is not None:
                    base["message"]["usage"] = usage
                content = base["message"].get("content")
                if isinstance(content, list) and draw(st.booleans()):  # a file tool call
                    name = draw(st.sampled_from(["read", "edit", "write"]))
                    path = draw(st.sampled_from(["a.py", "docs/b.md"]))
                    content.append({"type": "toolCall", "id": f"f{i}", "name": name,
                                    "arguments": {"path": path}})  # fmt: skip
        elif kind == "edit":
            base["type"] = "context_edit"
            target = draw(st.integers(0, n))  # earlier, later or nowhere
            base["targetId"] = f"e{target}"
            base["replacement"] = draw(
                st.sampled_from(
                    [
                        None,
                        {"content": "replaced"},
                        {"content": [{"type": "text", "text": "r"}]},
                        {},
                    ]
                )
            )
            original = entries[target].get("message") if target < i else None
            if isinstance(original, dict) and draw(st.booleans()):
                # Undo, as the app writes it: the original content as the replacement.
                base["replacement"] = {"content": original.get("content")}
        elif kind == "compaction":
            base["type"] = "compaction"
            base["summary"] = draw(TEXTS)
            base["firstKeptEntryId"] = f"e{draw(st.integers(0, n))}"
            base["tokensBefore"] = 100
            if draw(st.booleans()):
                base["usage"] = {"input": 3, "output": 4, "cacheRead": 0, "cacheWrite": 0}
            if draw(st.booleans()):
                base["systemMessage"] = {"role": "system", "content": "cp", "timestamp": 1}
        elif kind == "branch_summary":
            base["type"] = "branch_summary"
            base["summary"] = draw(TEXTS)
            base["fromId"] = f"e{draw(st.integers(0, i))}"
        elif kind == "custom_message":
            base["type"] = "custom_message"
            base["customType"] = "note"
            base["content"] = draw(TEXTS)
            base["display"] = True
        elif kind == "usage":
            base["type"] = "usage"
            base["usage"] = draw(USAGE)
        elif kind == "model":
            base["type"] = "model_change"
            base["provider"] = "q"
            base["modelId"] = f"g{i}"
        else:
            base["type"] = "label"
            base["targetId"] = f"e{draw(st.integers(0, i))}"
            base["label"] = "x"
        entries.append(base)
    if draw(st.integers(0, 14)) == 0 and len(entries) > 3:  # a parentId cycle
        entries[1]["parentId"] = entries[2]["id"]
        entries[2]["parentId"] = entries[1]["id"]
    if draw(st.integers(0, 9)) == 0 and len(entries) > 2:  # the odd cases
        entries[-1]["id"] = draw(st.sampled_from(["e0", 7, None]))
        entries.insert(1, "not an entry")
    return entries


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_every_figure_of_every_entry_equals_the_engine(entries):
    assert assert_session(entries) == sum(isinstance(e, dict) for e in entries)


def test_a_split_turn_kept_across_a_compaction_and_an_edit_made_before_its_target():
    """The cases the incremental estimate must hand to the engine, written out."""

    def msg(eid, parent, role, text, **extra):
        message = {"role": role, "content": [{"type": "text", "text": text}], **extra}
        return {"type": "message", "id": eid, "parentId": parent, "message": message}

    usage = {"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0}
    entries = [
        msg("u1", None, "user", "a" * 40),
        msg("a1", "u1", "assistant", "b" * 8, usage=usage, stopReason="stop"),
        {"type": "context_edit", "id": "x1", "parentId": "a1", "targetId": "t9",
         "replacement": None},
        msg("u2", "x1", "user", "c" * 12),
        {"type": "compaction", "id": "c1", "parentId": "u2", "summary": "s",
         "firstKeptEntryId": "a1", "tokensBefore": 1},
        msg("t9", "c1", "user", "hidden by x1 before it existed" * 4),
        msg("u3", "t9", "user", "d" * 4),
    ]  # fmt: skip
    figures = figures_of_entries(entries)
    assert assert_session(entries) == len(entries)
    t9, u3 = figures[5], figures[6]
    assert t9 is not None and u3 is not None
    assert t9.context_tokens == figures[4].context_tokens  # hidden: adds nothing
    assert u3.context_tokens == t9.context_tokens + 1
    assert u3.compaction_id == "c1" and u3.edit_id == "x1" and u3.turns == 4


def test_a_route_folded_alone_equals_the_one_pass():
    entries = [
        {"type": "message", "id": "a", "parentId": None,
         "message": {"role": "user", "content": "hello there"}},
        {"type": "message", "id": "b", "parentId": "a",
         "message": {"role": "assistant", "content": [{"type": "toolCall", "id": "c",
                     "name": "read", "arguments": {"path": "x"}}],
                     "usage": {"input": 3, "output": 1, "cacheRead": 0, "cacheWrite": 0,
                               "cost": {"total": 0.5}}}},
    ]  # fmt: skip
    one_pass = figures_of_entries(entries)[-1]
    assert one_pass == figures_of_route(entries)
    assert one_pass is not None and one_pass.tool_calls == 1 and one_pass.cost == 0.5


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_every_entry_of_a_real_pi_session(path):
    entries = SessionManager.load_readonly(str(path)).get_entries()  # migrated: ids assigned
    assert assert_session(entries) > 100
