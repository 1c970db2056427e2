"""Branch summarization: collecting, preparing, generating, navigating (SPEC 6.15, scenarios 8.7)."""

from __future__ import annotations

import re

import pytest

from explorer.session.branch_summary import (
    collect_entries_for_branch_summary,
    generate_branch_summary,
    navigate_tree,
    prepare_branch_entries,
)
from explorer.session.errors import SessionError
from explorer.session.ids import deterministic_rng
from explorer.session.jsonfmt import date_parse
from explorer.session.manager import SessionManager
from explorer.session.prompts import BRANCH_INSTRUCTIONS
from tests.fakes.stub_summarizer import StubSummarizer, response
from tests.session.ctx_helpers import AC, TS, TS_MS, A, R, U, chain, model_change, msg

UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
PREAMBLE = "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n"


def manager() -> SessionManager:
    clock = iter(range(1_735_689_601_000, 1_735_689_601_000 + 10_000_000, 1000))
    return SessionManager.in_memory(
        "/w/proj", clock=lambda: next(clock), rng=deterministic_rng("branch")
    )


def branch_summary(entry_id, summary, details=None, from_hook=None):
    entry = {
        "type": "branch_summary",
        "id": entry_id,
        "parentId": None,
        "timestamp": TS,
        "fromId": "old",
        "summary": summary,
    }
    if details is not None:
        entry["details"] = details
    if from_hook is not None:
        entry["fromHook"] = from_hook
    return entry


def s88_entries():
    return chain(
        msg("u", U("x" * 400)),
        msg("a", AC("read", {"path": "f"})),
        msg("t", R("x" * 4000)),
        {
            **branch_summary("bs", "s" * 40, {"readFiles": ["g"], "modifiedFiles": ["h"]}),
            "parentId": None,
        },
        msg("u2", U("x" * 400), parent="bs"),
    )


# --------------------------------------------------------------------------------------------
# S87


def test_s87_collecting():
    m = manager()
    r = m.append_message(U("root"))
    a1 = m.append_message(A("one"))
    a2 = m.append_message(U("two"))
    m.branch(r)
    b1 = m.append_message(A("other"))
    collected = collect_entries_for_branch_summary(m, a2, b1)
    assert [e["id"] for e in collected.entries] == [a1, a2]
    assert collected.common_ancestor_id == r
    below = collect_entries_for_branch_summary(m, a1, a2)
    assert (below.entries, below.common_ancestor_id) == ([], a1)
    nothing = collect_entries_for_branch_summary(m, None, b1)
    assert nothing.to_json() == {"entries": [], "commonAncestorId": None}
    above = collect_entries_for_branch_summary(m, a2, r)
    assert ([e["id"] for e in above.entries], above.common_ancestor_id) == ([a1, a2], r)


def test_s87_compactions_are_not_a_stop():
    m = manager()
    r = m.append_message(U("root"))
    a1 = m.append_message(A("one"))
    c = m.append_compaction("S", a1, 5)
    u = m.append_message(U("after"))
    m.branch(r)
    b = m.append_message(A("b"))
    assert [e["id"] for e in collect_entries_for_branch_summary(m, u, b).entries] == [a1, c, u]


# --------------------------------------------------------------------------------------------
# S88


def test_s88_preparing_without_budget():
    entries = s88_entries()
    prepared = prepare_branch_entries(entries, 0)
    by_id = {e["id"]: e for e in entries}
    assert prepared.messages[0] is by_id["u"]["message"]
    assert [m["role"] for m in prepared.messages] == ["user", "assistant", "branchSummary", "user"]
    assert prepared.messages[2] == {
        "role": "branchSummary",
        "summary": "s" * 40,
        "fromId": "old",
        "timestamp": TS_MS,
    }
    assert prepared.total_tokens == 214
    from explorer.session.file_ops import compute_file_lists

    assert compute_file_lists(prepared.file_ops) == (["f", "g"], ["h"])


def test_s88_preparing_with_budget():
    prepared = prepare_branch_entries(s88_entries(), 150)
    assert [m["role"] for m in prepared.messages] == ["assistant", "branchSummary", "user"]
    assert prepared.total_tokens == 114
    # The entry that broke the budget still contributed its file operations.
    from explorer.session.file_ops import compute_file_lists

    assert compute_file_lists(prepared.file_ops) == (["f", "g"], ["h"])


def test_s88_summary_exception():
    entries = chain(branch_summary("bs2", "s" * 400), msg("u3", U("x" * 200)))
    prepared = prepare_branch_entries(entries, 120)
    assert [m["role"] for m in prepared.messages] == ["branchSummary", "user"]
    assert prepared.total_tokens == 150


def test_s88_other_entries_and_from_hook_details():
    custom = {
        "type": "custom_message",
        "customType": "note",
        "content": "c",
        "display": True,
        "id": "cm",
        "parentId": None,
        "timestamp": TS,
    }
    compaction = {
        "type": "compaction",
        "id": "c1",
        "parentId": "cm",
        "timestamp": TS,
        "summary": "S",
        "firstKeptEntryId": "cm",
        "tokensBefore": 7,
    }
    hooked = {**branch_summary("bh", "", {"readFiles": ["z"]}, from_hook=True), "parentId": "c1"}
    entries = [custom, compaction, hooked, model_change("m", "p", "x", parent="bh")]
    prepared = prepare_branch_entries(entries)
    assert prepared.messages == [
        {
            "role": "custom",
            "customType": "note",
            "content": "c",
            "display": True,
            "timestamp": TS_MS,
        },
        {"role": "compactionSummary", "summary": "S", "tokensBefore": 7, "timestamp": TS_MS},
        {"role": "branchSummary", "summary": "", "fromId": "old", "timestamp": TS_MS},
    ]
    assert list(prepared.file_ops.read) == []


# --------------------------------------------------------------------------------------------
# S89


def test_s89_nothing_to_summarize():
    entries = chain(
        model_change("m1", "p", "x"),
        {
            "type": "label",
            "id": "l",
            "parentId": None,
            "timestamp": TS,
            "targetId": "m1",
            "label": "x",
        },
    )
    stub = StubSummarizer("SUM")
    result = generate_branch_summary(entries, stub, model={"contextWindow": 128000, "maxTokens": 0})
    assert result.to_json() == {"summary": "No content to summarize"}
    assert stub.requests == []


def test_s89_generating():
    stub = StubSummarizer("SUM")
    result = generate_branch_summary(
        s88_entries(), stub, model={"contextWindow": 128000, "maxTokens": 0}, pi_version="1.0.3"
    )
    assert result.summary == (
        PREAMBLE
        + "SUM\n\n<read-files>\nf\ng\n</read-files>\n\n<modified-files>\nh\n</modified-files>"
    )
    assert list(result.to_json()) == ["summary", "usage", "readFiles", "modifiedFiles"]
    (request,) = stub.requests
    assert request.max_tokens == 4096
    assert request.options["cacheRetention"] == "none"
    assert "reasoning" not in request.options
    assert UUID7.match(request.options["sessionId"])
    assert request.prompt_text.startswith("<conversation>\n[User]: ")
    assert request.prompt_text.endswith("</conversation>\n\n" + BRANCH_INSTRUCTIONS)
    # Tool results are not sent; the call is.
    assert "[Tool result]" not in request.prompt_text
    assert '[Assistant tool calls]: read(path="f")' in request.prompt_text


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ({"maxTokens": 1000}, 1000),
        ({"maxTokens": 100000}, 4096),
        ({}, 4096),
        (None, 4096),
    ],
)
def test_s89_output_cap(model, expected):
    stub = StubSummarizer("SUM")
    generate_branch_summary(s88_entries(), stub, model=model, pi_version="1.0.3")
    assert stub.requests[0].max_tokens == expected


def test_s89_budget_uses_context_window_minus_reserve():
    stub = StubSummarizer("SUM")
    # window 300 - reserve 100 = 200: only the newest entries fit (u2 100 + bs 10 + a 4 = 114, u does not).
    generate_branch_summary(s88_entries(), stub, model={"contextWindow": 300}, reserve_tokens=100)
    assert not stub.requests[0].prompt_text.startswith(
        "<conversation>\n[User]: " + "x" * 400 + "\n\n[Assistant"
    )
    assert stub.requests[0].prompt_text.startswith("<conversation>\n[Assistant tool calls]")


@pytest.mark.parametrize(
    ("resp", "expected"),
    [
        (response("x", stop="aborted"), {"aborted": True}),
        (
            response("x", stop="length"),
            {
                "error": "Branch summarization failed: generation hit the token cap and the summary is incomplete"
            },
        ),
        (response("x", tool_call=True), {"error": "Branch summarization attempted to call a tool"}),
        (
            response(None, stop="error", error="boom"),
            {"error": "Branch summarization failed: boom"},
        ),
    ],
)
def test_s89_failures(resp, expected):
    result = generate_branch_summary(s88_entries(), StubSummarizer(resp))
    assert result.to_json() == expected


def test_s89_custom_instructions():
    stub = StubSummarizer("SUM")
    generate_branch_summary(
        s88_entries(), stub, custom_instructions="CI", replace_instructions=True
    )
    generate_branch_summary(s88_entries(), stub, custom_instructions="CI")
    generate_branch_summary(s88_entries(), stub, replace_instructions=True)
    replaced, appended, plain = stub.prompts
    assert replaced.endswith("</conversation>\n\nCI")
    assert appended.endswith(BRANCH_INSTRUCTIONS + "\n\nAdditional focus: CI")
    assert plain.endswith("</conversation>\n\n" + BRANCH_INSTRUCTIONS)


# --------------------------------------------------------------------------------------------
# S90 navigation


def s90_manager():
    m = manager()
    ids = [m.append_message(message) for message in (U("q1"), A("r1"), U("q2"), A("r2"))]
    return m, ids


def test_s90_navigate_to_user_message_without_summary():
    m, (u1, a1, u2, a2) = s90_manager()
    count = len(m.get_entries())
    result = navigate_tree(m, u2, summarize=False)
    assert m.get_leaf_id() == a1
    assert result.editor_text == "q2"
    assert result.new_leaf_id == a1
    assert len(m.get_entries()) == count


def test_s90_navigate_with_summary():
    m, (u1, a1, u2, a2) = s90_manager()
    stub = StubSummarizer("SUM")
    result = navigate_tree(m, u2, summarize=True, summarizer=stub)
    leaf = m.get_leaf_entry()
    assert leaf["type"] == "branch_summary"
    assert leaf["id"] == result.summary_entry_id
    assert leaf["parentId"] == a1
    assert leaf["fromId"] == a2
    assert leaf["fromHook"] is False
    assert leaf["details"] == {"readFiles": [], "modifiedFiles": []}
    assert leaf["summary"] == PREAMBLE + "SUM"
    messages = m.build_session_context().messages
    assert messages[-1]["role"] == "branchSummary"
    assert messages[-1]["timestamp"] == date_parse(leaf["timestamp"])
    # The target is above the old leaf: only what came after it is summarized.
    assert stub.prompts[0].startswith("<conversation>\n[Assistant]: r2\n</conversation>")


def test_navigation_edge_cases():
    m, (u1, a1, u2, a2) = s90_manager()
    assert navigate_tree(m, a2).new_leaf_id == a2  # target is the leaf: no-op
    with pytest.raises(SessionError, match="^No model available for summarization$"):
        navigate_tree(m, a1, summarize=True)
    with pytest.raises(SessionError, match="^Entry nope not found$"):
        navigate_tree(m, "nope")
    count = len(m.get_entries())
    cancelled = navigate_tree(
        m, a1, summarize=True, summarizer=StubSummarizer(response("x", stop="aborted"))
    )
    assert cancelled.cancelled and m.get_leaf_id() == a2 and len(m.get_entries()) == count
    with pytest.raises(SessionError, match="^Branch summarization failed: boom$"):
        navigate_tree(
            m,
            a1,
            summarize=True,
            summarizer=StubSummarizer(response(None, stop="error", error="boom")),
        )
    # Navigating to the root user message resets the leaf.
    result = navigate_tree(m, u1, label="start")
    assert result.editor_text == "q1"
    label = m.get_leaf_entry()
    assert label["type"] == "label" and label["targetId"] == u1 and label["parentId"] is None
    assert m.get_label(u1) == "start"


def test_navigation_label_goes_to_summary_entry():
    m, (u1, a1, u2, a2) = s90_manager()
    result = navigate_tree(
        m, a1, summarize=True, summarizer=StubSummarizer("SUM"), label="explored"
    )
    assert m.get_label(result.summary_entry_id) == "explored"
    assert m.get_entry(result.summary_entry_id)["parentId"] == a1
