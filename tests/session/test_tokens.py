"""SPEC section 5 and the token scenarios of section 8.5."""

from __future__ import annotations

import math

import pytest

from explorer.session.context import (
    build_session_path,
    build_session_projection,
    projection_diagnostics,
)
from explorer.session.tokens import (
    DEFAULT_COMPACTION_SETTINGS,
    CompactionSettings,
    ContextEstimate,
    calculate_context_tokens,
    context_usage,
    estimate_context_tokens,
    estimate_projected_context,
    estimate_projected_context_tokens,
    estimate_tokens,
    get_assistant_usage,
    get_last_assistant_usage,
    message_problems,
    should_compact,
)

from .ctx_helpers import AC, SYS, UT, A, R, U, Z, chain, compaction, edit, msg

IMAGE = {"type": "image", "data": "AAAA", "mimeType": "image/png"}


def _projected(entries, leaf=None):
    path = build_session_path(entries) if leaf is None else build_session_path(entries, leaf)
    return estimate_projected_context(
        build_session_projection(entries, *(() if leaf is None else (leaf,))), path
    )


# ---------------------------------------------------------------------------------------------
# S56 – S58, S98: per-message estimates


def test_s56_estimate_tokens_table():
    assert estimate_tokens(U("x" * 401)) == 101
    assert estimate_tokens(U([{"type": "text", "text": "abcd"}, IMAGE])) == 1201
    assistant = A("")
    assistant["content"] = [
        {"type": "thinking", "thinking": "x" * 10},
        {"type": "text", "text": "y" * 6},
        {"type": "toolCall", "id": "c", "name": "read", "arguments": {"path": "a.py"}},
    ]
    assert estimate_tokens(assistant) == 9
    result = R("z" * 8)
    result["content"].append(IMAGE)
    assert estimate_tokens(result) == 1202
    custom = {
        "role": "custom",
        "customType": "t",
        "content": "hello",
        "display": True,
        "timestamp": 1,
    }
    assert estimate_tokens(custom) == 2
    bash = {
        "role": "bashExecution",
        "command": "ls -la",
        "output": "x" * 10,
        "excludeFromContext": True,
    }
    assert estimate_tokens(bash) == 4
    assert (
        estimate_tokens({"role": "compactionSummary", "summary": "s" * 9, "tokensBefore": 1}) == 3
    )
    assert estimate_tokens({"role": "branchSummary", "summary": "", "fromId": "x"}) == 0
    assert estimate_tokens(U("")) == 0
    assert estimate_tokens({"role": "weird", "content": "x" * 100}) == 0


def test_s56_estimates_are_ints():
    assert isinstance(estimate_tokens(U("abc")), int)
    assert isinstance(estimate_tokens(U("")), int)


def test_s57_system_estimate():
    message = SYS(
        "abc",
        {"a": "12345", "b": None, "c": ""},
        [{"name": "t", "description": "d", "parameters": {}}],
    )
    assert estimate_tokens(message) == 14
    assert estimate_tokens(SYS("", tools_added=[], ts=1)) == 1


def test_s98_nan_from_numeric_section():
    assert math.isnan(estimate_tokens(SYS("a", {"n": 5}, ts=1)))
    assert math.isnan(estimate_tokens(SYS("a", {"n": True}, ts=1)))
    assert math.isnan(estimate_tokens(SYS("a", {"n": {"k": 1}}, ts=1)))
    assert estimate_tokens(SYS("a", {"n": ["p", "q"]}, ts=1)) == 1
    assert estimate_tokens(SYS("a", {"n": 0}, ts=1)) == 1
    assert estimate_tokens(SYS("a", {"n": False}, ts=1)) == 1
    entries = chain(msg("s1", SYS("a", {"n": 5}, ts=1)), msg("u1", U("x" * 40)))
    projection = build_session_projection(entries)
    assert math.isnan(estimate_context_tokens(projection.messages).tokens)
    tokens = estimate_projected_context_tokens(projection, build_session_path(entries))
    assert math.isnan(tokens)
    assert should_compact(tokens, 128000, DEFAULT_COMPACTION_SETTINGS) is False
    problems = projection_diagnostics(build_session_path(entries))
    assert [(p["code"], p["entry_id"], p["section"]) for p in problems] == [
        ("section_not_text", "s1", "n")
    ]


def test_s58_utf16_and_json_rules():
    assert estimate_tokens(U("😀😀😀")) == 2
    assert estimate_tokens(AC("grep", {"q": "é"})) == 4


def test_nan_cases_from_non_string_lengths():
    assert math.isnan(estimate_tokens(U([{"type": "text", "text": 5}])))
    assert estimate_tokens(U([{"type": "text", "text": ["a", "b", "c", "d", "e"]}])) == 2
    assert math.isnan(estimate_tokens({"role": "compactionSummary", "summary": 12}))
    assert math.isnan(estimate_tokens({"role": "bashExecution", "command": 1, "output": ""}))
    assistant = A("")
    assistant["content"] = [{"type": "text", "text": 3}]
    assert math.isnan(estimate_tokens(assistant))


def test_assistant_string_content_and_images_count_zero():
    assistant = A("")
    assistant["content"] = "a long legacy string"
    assert estimate_tokens(assistant) == 0
    assistant["content"] = [IMAGE, {"type": "text", "text": "abcd"}]
    assert estimate_tokens(assistant) == 1
    assert estimate_tokens(AC("x", None)) == 2  # "x" + "null"


def test_malformed_parts_count_zero_and_are_named():
    malformed = [
        {"role": "user", "timestamp": 1},
        {"role": "user", "content": 5},
        {"role": "toolResult", "content": {"a": 1}},
        {"role": "system", "content": None},
        {"role": "assistant"},
        {"role": "assistant", "content": [None, {"type": "text"}]},
        {"role": "assistant", "content": [{"type": "toolCall", "name": "x"}]},
        {"role": "assistant", "content": [{"type": "thinking"}]},
        {"role": "bashExecution", "command": "ls"},
        {"role": "compactionSummary"},
        {"role": "user", "content": [None, {"type": "text", "text": "abcd"}]},
    ]
    for message in malformed:
        assert message_problems(message), message
    assert estimate_tokens(malformed[0]) == 0
    assert estimate_tokens(malformed[5]) == 0
    assert estimate_tokens(malformed[8]) == 1
    assert estimate_tokens(malformed[-1]) == 1
    assert message_problems(U("fine")) == []
    assert message_problems(A("fine")) == []
    assert message_problems({"role": "weird"}) == []


# ---------------------------------------------------------------------------------------------
# S59: usage helpers and estimate_context_tokens


def test_s59_estimate_context_tokens():
    messages = [U("x" * 400), A("ok", UT(5000)), U("x" * 40)]
    assert estimate_context_tokens(messages) == ContextEstimate(5010, 5000, 10, 1)
    assert estimate_context_tokens(messages).to_json() == {
        "tokens": 5010,
        "usageTokens": 5000,
        "trailingTokens": 10,
        "lastUsageIndex": 1,
    }
    for assistant in (
        A("ok", UT(5000), stop="aborted"),
        A("ok", UT(5000), stop="error"),
        A("ok", Z()),
    ):
        estimate = estimate_context_tokens([U("x" * 400), assistant, U("x" * 40)])
        assert estimate == ContextEstimate(111, 0, 111, None)
    usage = {
        "input": 100,
        "output": 20,
        "cacheRead": 30,
        "cacheWrite": 5,
        "totalTokens": 0,
        "cost": Z()["cost"],
    }
    estimate = estimate_context_tokens([U("x" * 400), A("ok", usage), U("x" * 40)])
    assert (estimate.usage_tokens, estimate.tokens) == (155, 165)
    messages = [U("x" * 400), A("ok", UT(300)), U("x" * 40), A("ok", UT(999), stop="aborted")]
    estimate = estimate_context_tokens(messages)
    assert (estimate.tokens, estimate.last_usage_index) == (311, 1)


def test_usage_helpers():
    assert calculate_context_tokens(UT(7)) == 7
    assert (
        calculate_context_tokens({"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4}) == 10
    )
    assert math.isnan(calculate_context_tokens({"input": 1, "output": 2}))
    assert get_assistant_usage(A("x", UT(3))) == UT(3)
    assert get_assistant_usage(A("x", {"input": 1, "output": 1})) is None  # NaN is invalid
    no_usage = A("x")
    del no_usage["usage"]
    assert get_assistant_usage(no_usage) is None
    assert get_assistant_usage(U("x")) is None
    entries = chain(
        msg("e1", A("a", UT(10))), msg("e2", A("b", UT(20), stop="error")), msg("e3", U("q"))
    )
    assert get_last_assistant_usage(entries) == UT(10)
    assert get_last_assistant_usage(entries[2:]) is None


# ---------------------------------------------------------------------------------------------
# S60 – S63, S99: projected estimates


def _s60():
    return chain(msg("e1", U("x" * 400)), msg("e2", A("ok", UT(5000))), msg("e3", U("x" * 40)))


def test_s60_trusted_usage():
    entries = _s60()
    projection = build_session_projection(entries)
    assert estimate_projected_context_tokens(projection, build_session_path(entries)) == 5010
    assert _projected(entries) == ContextEstimate(5010, 5000, 10, 1)


def test_s61_stale_usage_invalidated_by_context_edit():
    entries = _s60() + chain(edit("e4", "e1", None, parent="e3"))
    assert _projected(entries) == ContextEstimate(11, 0, 11, None)
    entries = _s60() + chain(edit("e4", "e3", {"content": "x" * 40}, parent="e3"))
    assert _projected(entries).tokens == 111


def test_s62_stale_usage_invalidated_by_compaction_fresh_usage_trusted():
    entries = chain(
        msg("e1", U("x" * 400)),
        msg("e2", A("ok", UT(5000))),
        compaction("c", "s" * 40, "e2", tokens_before=5000),
        msg("e3", U("x" * 40)),
    )
    assert _projected(entries).tokens == 21
    entries += chain(msg("e4", A("ok2", UT(900)), parent="e3"))
    assert _projected(entries).tokens == 900


def test_s63_system_state_counts_once_in_fallback():
    entries = chain(
        msg("s1", SYS("x" * 40, ts=1)), msg("s2", SYS("y" * 40, ts=2)), msg("u1", U("x" * 40))
    )
    projection = build_session_projection(entries)
    assert estimate_projected_context_tokens(projection, build_session_path(entries)) == 31
    assert estimate_context_tokens(projection.messages).tokens == 30
    entries = chain(msg("s1", SYS("x" * 40)), msg("s2", SYS("y" * 40)), msg("u1", U("x" * 40)))
    projection = build_session_projection(entries)
    assert estimate_projected_context_tokens(projection, build_session_path(entries)) == 10
    assert estimate_context_tokens(projection.messages).tokens == 30


def test_s99_malformed_hand_written_edit():
    for with_key in (True, False):
        replacement = ({"text": "gone"},) if with_key else ()
        entries = _s60() + chain(edit("e4", "e1", *replacement, parent="e3"))
        projection = build_session_projection(entries)
        assert projection.messages[0] == {"role": "user", "timestamp": 1}
        assert estimate_context_tokens(projection.messages) == ContextEstimate(5010, 5000, 10, 1)
        assert _projected(entries) == ContextEstimate(11, 0, 11, None)
        problems = projection_diagnostics(build_session_path(entries))
        named = {(p["entry_id"], p.get("target_id"), p.get("edit_id")) for p in problems}
        assert ("e4", "e1", None) in named
        assert ("e1", None, "e4") in named


def test_projection_json_form_is_accepted():
    entries = _s60() + chain(edit("e4", "e1", None, parent="e3"))
    projection = build_session_projection(entries)
    as_json = projection.to_json()
    path = build_session_path(entries)
    assert estimate_projected_context(as_json, path) == estimate_projected_context(projection, path)


def test_usage_entry_missing_from_branch_is_stale():
    entries = _s60()
    projection = build_session_projection(entries)
    assert estimate_projected_context(projection, []).tokens == 100 + 1 + 10


# ---------------------------------------------------------------------------------------------
# S64 / S65


def test_s64_threshold():
    assert should_compact(111616, 128000, DEFAULT_COMPACTION_SETTINGS) is False
    assert should_compact(111617, 128000, DEFAULT_COMPACTION_SETTINGS) is True
    assert should_compact(200000, 128000, CompactionSettings(enabled=False)) is False
    assert should_compact(111617, 128000, {"enabled": True, "reserveTokens": 16384}) is True
    assert should_compact(111617, 128000) is True


def test_defaults():
    assert CompactionSettings(True, 16384, 20000) == DEFAULT_COMPACTION_SETTINGS
    assert DEFAULT_COMPACTION_SETTINGS.to_json() == {
        "enabled": True,
        "reserveTokens": 16384,
        "keepRecentTokens": 20000,
    }
    assert CompactionSettings.from_json({"keepRecentTokens": 5}).keep_recent_tokens == 5


def test_s65_context_meter_after_compaction():
    entries = chain(
        msg("e1", U("x" * 400)),
        msg("e2", A("ok", UT(5000))),
        compaction("c", "s" * 40, "e2", tokens_before=5000),
        msg("e3", U("x" * 40)),
    )
    path = build_session_path(entries)
    usage = context_usage(build_session_projection(entries), path, 200000)
    assert usage == {"tokens": None, "contextWindow": 200000, "percent": None}
    entries += chain(msg("e4", A("ok2", UT(900)), parent="e3"))
    path = build_session_path(entries)
    usage = context_usage(build_session_projection(entries), path, 200000)
    # Same arithmetic as the agent: (900 / 200000) * 100 is 0.44999999999999996 there too.
    assert usage == {"tokens": 900, "contextWindow": 200000, "percent": 900 / 200000 * 100}
    assert usage["percent"] == pytest.approx(0.45)
    assert context_usage(build_session_projection(entries), path, 0) is None
    no_compaction = _s60()
    usage = context_usage(
        build_session_projection(no_compaction), build_session_path(no_compaction), 10020
    )
    assert usage == {"tokens": 5010, "contextWindow": 10020, "percent": 50.0}


def test_s98_nan_tokens_before_written_as_null():
    from explorer.session.manager import SessionManager

    manager = SessionManager.in_memory("/w", clock=lambda: 1_735_689_605_000)
    manager.append_message(SYS("a", {"n": 5}, ts=1))
    manager.append_message(U("x" * 40))
    branch = manager.get_branch()
    tokens = estimate_projected_context_tokens(manager.build_session_projection(), branch)
    assert math.isnan(tokens)
    manager.append_compaction("S", None, tokens)
    assert b'"tokensBefore":null' in manager.to_bytes()
