"""Compaction: cut points, preparation, summary requests and results (SPEC 6, scenarios 8.6)."""

from __future__ import annotations

import math
import re

import pytest

from explorer.session.compaction import (
    CompactionPreparation,
    compact,
    find_cut_point,
    find_projected_cut_point,
    get_summarization_failure,
    history_max_tokens,
    prepare_compaction,
    turn_prefix_max_tokens,
)
from explorer.session.context import build_session_projection
from explorer.session.errors import SummarizationError
from explorer.session.file_ops import (
    FileOps,
    compute_file_lists,
    extract_file_ops_from_message,
    format_file_operations,
)
from explorer.session.messages import convert_to_llm
from explorer.session.prompts import INITIAL_INSTRUCTIONS, PREFIX_INSTRUCTIONS, UPDATE_INSTRUCTIONS
from explorer.session.serialize import serialize_conversation
from explorer.session.tokens import CompactionSettings
from tests.fakes.stub_summarizer import StubSummarizer, response
from tests.session.ctx_helpers import AC, UT, A, R, U, chain, compaction, edit, model_change, msg

SYS_TS = "2025-01-01T00:00:01.000Z"


def S(k: int) -> CompactionSettings:
    return CompactionSettings(enabled=True, reserve_tokens=16384, keep_recent_tokens=k)


def x(n: int) -> str:
    return "x" * n


UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def s68_path():
    return chain(
        msg("e1", U(x(4000))), msg("e2", A(x(4000))), msg("e3", U(x(4000))), msg("e4", A(x(4000)))
    )


def s69_path():
    return chain(
        msg("e1", U(x(400))), msg("e2", AC("read", {"path": "a.txt"})), msg("e3", R(x(8000)))
    )


def s70_path():
    return chain(
        msg("e1", U(x(400))),
        msg("e2", A(x(400))),
        msg("e3", U("do the big task")),
        msg("e4", AC("bash", {"command": "ls"})),
        msg("e5", R(x(4000))),
        msg("e6", AC("bash", {"command": "ls"})),
        msg("e7", R(x(4000))),
        msg("e8", A(x(400))),
    )


# --------------------------------------------------------------------------------------------
# S66 - S77: preparation


def test_s66_too_small_returns_none():
    path = chain(msg("e1", U(x(400))), msg("e2", A(x(400))))
    assert prepare_compaction(path, S(20000)) is None


def test_s66_system_message_before_cut_is_never_summarized():
    from tests.session.ctx_helpers import SYS

    path = chain(msg("s0", SYS("p", ts=1)), msg("e1", U(x(400))), msg("e2", A(x(400))))
    assert prepare_compaction(path, S(20000)) is None


def test_s67_fresh_checkpoint_returns_none():
    path = s68_path() + [compaction("c1", "S", "e3", parent="e4")]
    assert prepare_compaction(path, S(1500)) is None


def test_s68_basic_cut():
    path = s68_path()
    prep = prepare_compaction(path, S(1500))
    assert prep is not None
    assert prep.first_kept_entry_id == "e3"
    assert prep.is_split_turn is False
    assert prep.messages_to_summarize == [path[0]["message"], path[1]["message"]]
    assert prep.turn_prefix_messages == []
    assert prep.tokens_before == 4000
    assert prep.previous_summary is None
    assert "previousSummary" not in prep.to_json()
    assert list(prep.to_json()) == [
        "firstKeptEntryId",
        "messagesToSummarize",
        "turnPrefixMessages",
        "isSplitTurn",
        "tokensBefore",
        "fileOps",
        "settings",
    ]
    assert prep.summarize_entry_ids == ["e1", "e2"]


def test_s69_never_cut_at_tool_result():
    path = s69_path()
    prep = prepare_compaction(path, S(1000))
    assert prep.first_kept_entry_id == "e2"
    assert prep.is_split_turn is True
    assert prep.messages_to_summarize == []
    assert prep.turn_prefix_messages == [path[0]["message"]]
    assert prep.tokens_before == 2105
    assert prep.turn_start_entry_id == "e1"
    # e2 is kept, so its read is not a summarized file operation.
    assert prep.details == {"readFiles": [], "modifiedFiles": []}


def test_s70_split_turn():
    path = s70_path()
    prep = prepare_compaction(path, S(1500))
    by_id = {e["id"]: e["message"] for e in path}
    assert prep.first_kept_entry_id == "e6"
    assert prep.is_split_turn is True
    assert prep.messages_to_summarize == [by_id["e1"], by_id["e2"]]
    assert prep.turn_prefix_messages == [by_id["e3"], by_id["e4"], by_id["e5"]]
    assert prep.tokens_before == 2314


def s71_path(from_hook=None):
    c1 = compaction("c1", "S1", "e2", parent="e2")
    c1["details"] = {"readFiles": ["a"], "modifiedFiles": ["b"]}
    if from_hook is not None:
        c1["fromHook"] = from_hook
    return chain(
        msg("e1", U(x(400))), msg("e2", A(x(400))), c1, msg("e3", U(x(400))), msg("e4", A(x(400)))
    )


def test_s71_repeated_compaction():
    path = s71_path()
    prep = prepare_compaction(path, S(150))
    assert prep.previous_summary == "S1"
    assert prep.messages_to_summarize == [path[1]["message"]]
    assert prep.first_kept_entry_id == "e3"
    assert prep.tokens_before == 301
    assert prep.details == {"readFiles": ["a"], "modifiedFiles": ["b"]}
    assert prep.to_json()["previousSummary"] == "S1"


def test_s71_from_hook_details_are_ignored():
    prep = prepare_compaction(s71_path(from_hook=True), S(150))
    assert prep.details == {"readFiles": [], "modifiedFiles": []}


def test_s72_metadata_absorption_makes_split_turn():
    path = chain(
        msg("e1", U(x(400))),
        msg("e2", A(x(400))),
        model_change("m1", "p", "m"),
        msg("e3", U(x(400))),
        msg("e4", A(x(400))),
    )
    prep = prepare_compaction(path, S(150))
    assert prep.first_kept_entry_id == "m1"
    assert prep.is_split_turn is True
    assert prep.messages_to_summarize == []
    assert prep.turn_prefix_messages == [path[0]["message"], path[1]["message"]]
    assert prep.tokens_before == 400


def s73_path(with_edit=True):
    entries = [
        msg("e1", U(x(400))),
        msg("e2", A(x(400))),
        msg("e3", U(x(1200))),
        msg("e4", A("fail", stop="error")),
    ]
    if with_edit:
        entries.append(edit("e5", "e4", None))
    return chain(*entries)


def test_s73_closed_recovery_suffix():
    path = s73_path()
    prep = prepare_compaction(path, S(150))
    assert prep.first_kept_entry_id == "e4"
    assert prep.is_split_turn is True
    assert prep.messages_to_summarize == [path[0]["message"], path[1]["message"]]
    assert prep.turn_prefix_messages == [path[2]["message"]]
    assert prep.tokens_before == 500
    # The compaction written from it keeps the omitted attempt hidden.
    after = path + [compaction("c1", "S", "e4", tokens_before=500, parent="e5")]
    projection = build_session_projection(after)
    assert [m["role"] for m in projection.messages] == ["compactionSummary"]
    assert projection.messages[0]["summary"] == "S"


def test_s73_without_edit_cuts_at_unanswered_input():
    path = s73_path(with_edit=False)
    prep = prepare_compaction(path, S(150))
    assert prep.first_kept_entry_id == "e3"
    assert prep.is_split_turn is False
    assert prep.messages_to_summarize == [path[0]["message"], path[1]["message"]]


def test_s74_metadata_never_skips_unsent_input():
    path = chain(
        msg("e1", U(x(400))),
        msg("e2", A(x(400))),
        msg("e3", U(x(1200))),
        model_change("m1", "p", "m"),
    )
    prep = prepare_compaction(path, S(150))
    assert prep.first_kept_entry_id == "e3"
    assert prep.is_split_turn is False
    assert prep.messages_to_summarize == [path[0]["message"], path[1]["message"]]


def test_s75_cutting_uses_edited_sizes():
    path = chain(
        msg("e1", U(x(400))), msg("e2", A(x(4000))), msg("e3", U(x(40))), msg("e4", A(x(40)))
    )
    prep = prepare_compaction(path, S(500))
    assert prep.first_kept_entry_id == "e2"
    assert prep.is_split_turn is True
    assert prep.turn_prefix_messages == [path[0]["message"]]
    assert prep.tokens_before == 1120
    edited = path + [edit("e5", "e2", {"content": "tiny"}, parent="e4")]
    assert prepare_compaction(edited, S(500)) is None


def test_s76_file_operations():
    ops = FileOps()
    for name, path in [
        ("read", "a.py"),
        ("edit", "b.py"),
        ("write", "c.py"),
        ("read", "b.py"),
        ("read", ""),
        ("grep", "d"),
    ]:
        extract_file_ops_from_message(AC(name, {"path": path}), ops)
    read_files, modified_files = compute_file_lists(ops)
    assert read_files == ["a.py"]
    assert modified_files == ["b.py", "c.py"]
    assert (
        format_file_operations(read_files, modified_files)
        == "\n\n<read-files>\na.py\n</read-files>\n\n<modified-files>\nb.py\nc.py\n</modified-files>"
    )
    assert format_file_operations([], []) == ""
    ops2 = FileOps()
    extract_file_ops_from_message(AC("read", {"path": "｡.txt"}), ops2)
    extract_file_ops_from_message(AC("read", {"path": "😀.txt"}), ops2)
    assert compute_file_lists(ops2)[0] == ["😀.txt", "｡.txt"]


def test_s76_nested_calls_of_a_tool_result_count():
    result = R("ok")
    result["nestedCalls"] = {
        "calls": [
            {"id": "n1", "name": "write", "arguments": {"path": "w.txt"}, "status": "ok"},
            {"id": "n2", "name": "read", "status": "ok"},
        ],
        "complete": True,
    }
    ops = FileOps()
    extract_file_ops_from_message(result, ops)
    assert compute_file_lists(ops) == ([], ["w.txt"])


def test_s77_serialization():
    assistant = A("")
    assistant["content"] = [
        {"type": "thinking", "thinking": "hmm"},
        {"type": "text", "text": "a"},
        {"type": "text", "text": "b"},
        {"type": "toolCall", "id": "c", "name": "read", "arguments": {"path": "x", "n": 1}},
    ]
    text = serialize_conversation(
        convert_to_llm([U("hi"), assistant, R("y" * 2005)]), pi_version="1.0.3"
    )
    assert text == (
        "[User]: hi\n\n[Assistant thinking]: hmm\n\n[Assistant]: a\nb\n\n[Assistant tool calls]: "
        'read(path="x", n=1)\n\n[Tool result]: '
        + "y" * 2000
        + "\n\n[... 5 more characters truncated]"
    )
    user = U(
        [
            {"type": "text", "text": "a"},
            {"type": "image", "data": "AA==", "mimeType": "image/png"},
            {"type": "text", "text": "b"},
        ]
    )
    assert serialize_conversation(convert_to_llm([user])) == "[User]: ab"


def test_s77_integer_like_argument_keys_come_first_and_truncation_is_utf16():
    call = AC("t", {"b": 1, "10": 2, "2": 3})
    assert serialize_conversation([call]) == "[Assistant tool calls]: t(2=3, 10=2, b=1)"
    emoji = "😀" * 1001  # 2002 UTF-16 units
    out = serialize_conversation([R(emoji)])
    assert out.endswith("\n\n[... 2 more characters truncated]")


def test_serialization_tolerates_malformed_content():
    bad_user = {"role": "user", "timestamp": 1}
    bad_assistant = {"role": "assistant", "content": "legacy string"}
    null_args = AC("read", None)
    assert (
        serialize_conversation([bad_user, bad_assistant, null_args])
        == "[Assistant tool calls]: read()"
    )


# --------------------------------------------------------------------------------------------
# S78 - S84: compact()


def test_s78_compact_without_split():
    prep = prepare_compaction(s68_path(), S(1500))
    stub = StubSummarizer(response("SUMMARY", usage=UT(70)))
    result = compact(prep, stub, model={"maxTokens": 0}, pi_version="1.0.3")
    assert len(stub.requests) == 1
    request = stub.requests[0]
    assert request.max_tokens == 13107
    assert request.prompt_text.startswith("<conversation>\n[User]: ")
    assert request.prompt_text.endswith(INITIAL_INSTRUCTIONS)
    assert request.messages[0] == {
        "role": "system",
        "content": request.system_prompt,
        "timestamp": 0,
    }
    assert [m["role"] for m in request.messages] == ["system", "user"]
    assert result.summary == "SUMMARY"
    assert result.details == {"readFiles": [], "modifiedFiles": []}
    assert result.usage == UT(70)
    assert result.first_kept_entry_id == "e3"
    assert result.tokens_before == 4000
    assert list(result.to_json()) == [
        "summary",
        "firstKeptEntryId",
        "tokensBefore",
        "usage",
        "details",
    ]


def test_s79_compact_split_without_history():
    prep = prepare_compaction(s69_path(), S(1000))
    stub = StubSummarizer("PREFIX")
    result = compact(prep, stub, pi_version="1.0.3")
    assert len(stub.requests) == 1
    assert stub.requests[0].max_tokens == 8192
    assert stub.requests[0].prompt_text.startswith("# Conversation\n")
    assert stub.requests[0].prompt_text.endswith("\n\n# Instructions\n" + PREFIX_INSTRUCTIONS)
    assert result.summary == "No prior history.\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"


def test_s80_split_with_previous_summary_and_no_new_history():
    path = chain(
        msg("e1", U(x(400))),
        compaction("c1", "S1", "c1"),
        msg("e3", U(x(40))),
        msg("e4", AC("read", {"path": "a"})),
        msg("e5", R(x(4000))),
    )
    prep = prepare_compaction(path, S(1000))
    assert prep.first_kept_entry_id == "e4"
    assert prep.is_split_turn is True
    assert prep.messages_to_summarize == []
    assert prep.turn_prefix_messages == [path[2]["message"]]
    assert prep.previous_summary == "S1"
    assert prep.tokens_before == 1015
    stub = StubSummarizer("PREFIX")
    result = compact(prep, stub)
    assert len(stub.requests) == 1
    assert result.summary == "S1\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"
    assert result.details == {"readFiles": [], "modifiedFiles": []}


def test_s80_empty_previous_summary_stays_empty():
    path = chain(
        msg("e1", U(x(400))),
        compaction("c1", "", "c1"),
        msg("e3", U(x(40))),
        msg("e4", AC("read", {"path": "a"})),
        msg("e5", R(x(4000))),
    )
    prep = prepare_compaction(path, S(1000))
    assert prep.previous_summary == ""
    result = compact(prep, StubSummarizer("PREFIX"))
    assert result.summary == "\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"


def test_s81_split_with_history_combines_usage():
    prep = prepare_compaction(s70_path(), S(1500))
    u1 = {
        "input": 10,
        "output": 5,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 15,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 1},
    }
    u2 = {
        "input": 20,
        "output": 7,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 27,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 2},
    }
    stub = StubSummarizer(response("HIST", usage=u1), response("PREFIX", usage=u2))
    result = compact(prep, stub)
    assert len(stub.requests) == 2
    assert stub.requests[0].prompt_text.startswith("<conversation>\n")
    assert stub.requests[1].prompt_text.startswith("# Conversation\n")
    assert result.summary == "HIST\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"
    assert result.usage == {
        "input": 30,
        "output": 12,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 42,
        "cost": {
            "input": 0,
            "output": 0,
            "cacheRead": 0,
            "cacheWrite": 0,
            "total": 3,
            "totalFromProvider": False,  # Pi 1.6.0 (docs/spec-pi-1.6.md P15)
        },
    }


@pytest.mark.parametrize(
    ("reserve", "model", "history", "prefix"),
    [
        (16384, {"maxTokens": 0}, 13107, 8192),
        (16384, {"maxTokens": 8000}, 8000, 8000),
        (16384, {"maxTokens": 100000}, 13107, 8192),
        (1000, None, 800, 500),
        (16384, {}, 13107, 8192),
    ],
)
def test_s82_output_caps(reserve, model, history, prefix):
    assert history_max_tokens(reserve, model) == history
    assert turn_prefix_max_tokens(reserve, model) == prefix


def _split_prep(reserve=16384):
    prep = prepare_compaction(s70_path(), CompactionSettings(True, reserve, 1500))
    assert prep.is_split_turn and prep.messages_to_summarize
    return prep


@pytest.mark.parametrize(
    ("model", "level", "expected"),
    [
        ({"reasoning": True, "maxTokens": 0}, "high", "high"),
        ({"reasoning": True}, "off", None),
        ({"reasoning": False}, "high", None),
        ({"reasoning": True}, None, None),
    ],
)
def test_s82_request_options(model, level, expected):
    stub = StubSummarizer("T")
    compact(_split_prep(), stub, model=model, thinking_level=level)
    assert len(stub.requests) == 2
    for request in stub.requests:
        assert request.options.get("reasoning") == expected
        assert ("reasoning" in request.options) == (expected is not None)
        assert request.options["cacheRetention"] == "none"
        assert UUID7.match(request.options["sessionId"])
    assert stub.requests[0].options["sessionId"] != stub.requests[1].options["sessionId"]


def test_s82_passed_session_id_is_used_and_reserve_scales_caps():
    stub = StubSummarizer("T")
    compact(_split_prep(1000), stub, session_id="route-1", pi_version="1.0.3")
    assert [r.options["sessionId"] for r in stub.requests] == ["route-1", "route-1"]
    assert [r.max_tokens for r in stub.requests] == [800, 500]


@pytest.mark.parametrize(
    ("resp", "message"),
    [
        (response(None, stop="error", error="boom"), "Summarization failed: boom"),
        (response(None, stop="error"), "Summarization failed: Unknown error"),
        (response(None, stop="error", error=""), "Summarization failed: Unknown error"),
        (
            response("partial", stop="length"),
            "Summarization failed: generation hit the token cap and the summary is incomplete",
        ),
        (response("x", tool_call=True), "Summarization attempted to call a tool"),
    ],
)
def test_s83_history_failures_raise(resp, message):
    prep = prepare_compaction(s68_path(), S(1500))
    with pytest.raises(SummarizationError) as info:
        compact(prep, StubSummarizer(resp))
    assert str(info.value) == message


def test_s83_failure_helper_ignores_tool_calls_and_aborts():
    assert get_summarization_failure(response("x", tool_call=True), "Summarization") is None
    assert get_summarization_failure(response("x", stop="aborted"), "Summarization") is None
    assert get_summarization_failure(response("x"), "Summarization") is None


@pytest.mark.parametrize(
    ("resp", "message"),
    [
        (response(None, stop="error", error="bad"), "Turn prefix summarization failed: bad"),
        (
            response("x", stop="length"),
            "Turn prefix summarization failed: generation hit the token cap and the summary is incomplete",
        ),
        (response("x", tool_call=True), "Turn prefix summarization attempted to call a tool"),
    ],
)
def test_s83_prefix_failures_raise(resp, message):
    stub = StubSummarizer(response("HIST"), resp)
    with pytest.raises(SummarizationError) as info:
        compact(_split_prep(), stub)
    assert str(info.value) == message
    assert len(stub.requests) == 2


def test_s83_aborted_response_is_used_as_summary():
    prep = prepare_compaction(s68_path(), S(1500))
    result = compact(prep, StubSummarizer(response("partial text", stop="aborted")))
    assert result.summary == "partial text"


def test_s84_update_prompt_and_focus():
    path = s71_path()
    # Make the newest turn a split one so both requests are made.
    path = path + [
        msg("e5", AC("bash", {"command": "ls"}), parent="e4"),
        msg("e6", R(x(800)), parent="e5"),
    ]
    prep = prepare_compaction(path, S(150))
    assert prep.previous_summary == "S1"
    assert prep.is_split_turn and prep.messages_to_summarize
    stub = StubSummarizer("T")
    compact(prep, stub, custom_instructions="focus on tests", pi_version="1.0.3")
    history, prefix = stub.prompts
    assert (
        "</conversation>\n\n<previous-summary>\nS1\n</previous-summary>\n\n" + UPDATE_INSTRUCTIONS
        in history
    )
    assert history.endswith("\n\nAdditional focus: focus on tests")
    assert "previous-summary" not in prefix
    assert "Additional focus" not in prefix


def test_s84_empty_previous_summary_uses_initial_form():
    prep = prepare_compaction(s68_path(), S(1500))
    prep.previous_summary = ""
    stub = StubSummarizer("T")
    compact(prep, stub)
    assert "<previous-summary>" not in stub.prompts[0]
    assert stub.prompts[0].endswith(INITIAL_INSTRUCTIONS)


def test_compact_appends_file_lists_from_preparation():
    path = chain(
        msg("e1", U(x(400))),
        msg("e2", AC("edit", {"path": "src/app.py"})),
        msg("e3", R("ok")),
        msg("e4", AC("read", {"path": "README.md"})),
        msg("e5", R("ok")),
        msg("e6", A(x(400))),
        msg("e7", U(x(4000))),
        msg("e8", A(x(4000))),
    )
    prep = prepare_compaction(path, S(1500))
    assert prep.first_kept_entry_id == "e7"
    result = compact(prep, StubSummarizer("SUM"))
    assert (
        result.summary
        == "SUM\n\n<read-files>\nREADME.md\n</read-files>\n\n<modified-files>\nsrc/app.py\n</modified-files>"
    )
    assert result.details == {"readFiles": ["README.md"], "modifiedFiles": ["src/app.py"]}


def test_nan_tokens_before_does_not_raise():
    from tests.session.ctx_helpers import SYS

    path = chain(
        msg("s", SYS("a", {"n": 5}, ts=1)),
        msg("e1", U(x(4000))),
        msg("e2", A(x(4000))),
        msg("e3", U(x(400))),
    )
    prep = prepare_compaction(path, S(500))
    assert isinstance(prep, CompactionPreparation)
    assert math.isnan(prep.tokens_before)


# --------------------------------------------------------------------------------------------
# Raw cut point


def test_find_cut_point_raw_matches_projected_on_plain_paths():
    path = s70_path()
    raw = find_cut_point(path, 0, len(path), 1500)
    projected = find_projected_cut_point(build_session_projection(path).entries, 0, len(path), 1500)
    assert raw == projected
    assert raw.first_kept_entry_index == 5
    assert raw.turn_start_index == 2
    assert raw.is_split_turn is True


def test_find_cut_point_raw_ignores_context_edits():
    path = s73_path()
    raw = find_cut_point(path, 0, len(path), 150)
    # No recovery-suffix rule on raw entries: the cut stays on the unanswered input.
    assert path[raw.first_kept_entry_index]["id"] == "e3"
    assert raw.is_split_turn is False
    projected = find_projected_cut_point(build_session_projection(path).entries, 0, len(path), 150)
    assert path[projected.first_kept_entry_index]["id"] == "e4"


def test_no_candidates_returns_start():
    path = chain(model_change("m1", "p", "m"), msg("r", R("x")))
    cut = find_projected_cut_point(build_session_projection(path).entries, 0, 2, 10)
    assert cut.to_json() == {"firstKeptEntryIndex": 0, "turnStartIndex": -1, "isSplitTurn": False}


# --------------------------------------------------------------------------------------------
# S78 (append), S85, S86: writing the result through the manager


def _manager():
    from explorer.session.ids import deterministic_rng
    from explorer.session.manager import SessionManager

    clock_values = iter(range(1_735_689_601_000, 1_735_689_601_000 + 10_000_000, 1000))
    return SessionManager.in_memory(
        "/w/proj", clock=lambda: next(clock_values), rng=deterministic_rng("e3")
    )


def test_s78_append_compaction_key_order():
    from explorer.session.jsonfmt import dumps, loads

    m = _manager()
    ids = [
        m.append_message(message) for message in (U(x(4000)), A(x(4000)), U(x(4000)), A(x(4000)))
    ]
    prep = prepare_compaction(m.get_branch(), S(1500))
    assert prep.first_kept_entry_id == ids[2]
    result = compact(
        prep, StubSummarizer(response("SUMMARY", usage=UT(70))), model={"maxTokens": 0}
    )
    cid = m.append_compaction(
        result.summary,
        result.first_kept_entry_id,
        result.tokens_before,
        result.details,
        False,
        result.usage,
    )
    entry = loads(dumps(m.get_entry(cid)))
    assert list(entry) == [
        "type",
        "id",
        "parentId",
        "timestamp",
        "summary",
        "firstKeptEntryId",
        "tokensBefore",
        "details",
        "usage",
        "fromHook",
    ]
    assert entry["fromHook"] is False
    assert entry["tokensBefore"] == 4000
    assert entry["details"] == {"readFiles": [], "modifiedFiles": []}
    assert "systemMessage" not in entry
    # Compacting again right away: nothing to do.
    assert prepare_compaction(m.get_branch(), S(1500)) is None


def test_compact_session_pipeline_and_errors():
    import threading

    from explorer.session.compaction import compact_session
    from explorer.session.errors import SessionError

    m = _manager()
    m.append_message(U(x(400)))
    m.append_message(A(x(400)))
    with pytest.raises(SessionError, match=r"^Nothing to compact \(session too small\)$"):
        compact_session(m, StubSummarizer("S"), S(20000))
    for message in (U(x(4000)), A(x(4000))):
        m.append_message(message)
    cancel = threading.Event()

    class CancellingStub(StubSummarizer):
        def complete(self, request):
            cancel.set()
            return super().complete(request)

    count = len(m.get_entries())
    with pytest.raises(SessionError, match="^Compaction cancelled$"):
        compact_session(m, CancellingStub("S"), S(1500), signal=cancel)
    assert len(m.get_entries()) == count
    cid, result = compact_session(m, StubSummarizer("S"), S(1500))
    assert m.get_leaf_id() == cid
    assert m.get_entry(cid)["summary"] == "S" == result.summary
    with pytest.raises(SessionError, match="^Already compacted$"):
        compact_session(m, StubSummarizer("S"), S(1500))
    messages = m.build_session_context().messages
    assert messages[0]["role"] == "compactionSummary"


def test_s85_system_checkpoint():
    from explorer.session.jsonfmt import date_parse
    from explorer.session.messages import get_current_system_message
    from tests.session.ctx_helpers import SYS

    m = _manager()
    read = {"name": "read", "description": "r", "parameters": {}}
    write = {"name": "write", "description": "w", "parameters": {}}
    m.append_message(SYS("", {"preamble": "P", "policy": "v1"}, tools_added=[read], ts=1000))
    m.append_message(U("hello"))
    a1 = m.append_message(A("hi"))
    m.append_message(SYS("", {"policy": "v2"}, tools_added=[write], ts=2000))
    m.append_message(U("next"))
    m.append_message(A("ok"))
    cid = m.append_compaction("SUM", a1, 1234)
    c = m.get_entry(cid)
    ts = date_parse(c["timestamp"])
    assert c["systemMessage"] == {
        "role": "system",
        "content": "",
        "sections": {"preamble": "P", "policy": "v2"},
        "toolsAdded": [read, write],
        "timestamp": ts,
    }
    entries = m.build_context_entries()
    assert [e.get("id") for e in entries][:2] == [cid, a1]
    assert [e["message"]["content"] for e in entries[2:]] == [
        "next",
        [{"type": "text", "text": "ok"}],
    ]
    messages = m.build_session_context().messages
    assert [msg_["role"] for msg_ in messages] == [
        "system",
        "compactionSummary",
        "assistant",
        "user",
        "assistant",
    ]
    assert messages[1]["summary"] == "SUM" and messages[1]["tokensBefore"] == 1234
    m.append_message(SYS("", {"policy": None}, tools_removed=[{"name": "read"}], ts=3000))
    current = get_current_system_message(m.build_session_context().messages)
    assert current == {
        "role": "system",
        "content": "",
        "sections": {"preamble": "P"},
        "toolsAdded": [write],
        "timestamp": ts,
    }


def test_s86_retain_none():
    from explorer.session.jsonfmt import date_parse
    from tests.session.ctx_helpers import SYS

    m = _manager()
    m.append_message(U("q"))
    m.append_message(A("a"))
    cid = m.append_compaction("SUM", None, 10)
    c = m.get_entry(cid)
    assert c["firstKeptEntryId"] == cid
    assert "systemMessage" not in c
    assert [e["id"] for e in m.build_context_entries()] == [cid]
    assert [x_["role"] for x_ in m.build_session_context().messages] == ["compactionSummary"]
    m.append_message(U("x"))
    messages = m.build_session_context().messages
    assert [x_["role"] for x_ in messages] == ["compactionSummary", "user"]
    assert messages[1]["content"] == "x"

    m2 = _manager()
    m2.append_message(SYS("base", {"a": "x"}))
    assert "systemMessage" not in m2.get_entry(m2.append_compaction("S", None, 1))
    m3 = _manager()
    m3.append_message(SYS("base", tools_added=[{"name": "t"}]))
    c3 = m3.get_entry(m3.append_compaction("S", None, 1))
    assert c3["systemMessage"] == {
        "role": "system",
        "content": "base",
        "toolsAdded": [{"name": "t"}],
        "timestamp": date_parse(c3["timestamp"]),
    }


def test_settings_may_be_given_in_pi_form():
    settings = {"enabled": True, "reserveTokens": 1000, "keepRecentTokens": 1500}
    prep = prepare_compaction(s68_path(), settings)
    assert prep.first_kept_entry_id == "e3"
    assert prep.to_json()["settings"] is settings
    stub = StubSummarizer("S")
    compact(prep, stub, pi_version="1.0.3")
    assert stub.requests[0].max_tokens == 800
