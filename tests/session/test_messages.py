"""SPEC section 2 and the message scenarios of section 8.2."""

from __future__ import annotations

import copy
import math

from explorer.session.context import build_session_context, build_session_projection
from explorer.session.jsonfmt import dumps
from explorer.session.messages import (
    combine_usage,
    content_text,
    convert_to_llm,
    entry_time,
    get_current_system_message,
    js_string,
    session_entry_to_context_messages,
)

from .ctx_helpers import SYS, TS_MS, U, chain, custom, custom_message, msg


def _bash(**fields):
    message = {"role": "bashExecution", "command": "ls", "output": "", "exitCode": 0}
    message.update(fields)
    message.setdefault("cancelled", False)
    message.setdefault("truncated", False)
    message["timestamp"] = 7
    return message


def _llm_text(message):
    (converted,) = convert_to_llm([message])
    assert converted["role"] == "user"
    assert list(converted) == ["role", "content", "timestamp"]
    (block,) = converted["content"]
    return block["text"]


# ---------------------------------------------------------------------------------------------
# S23


def test_s23_custom_entry_vs_custom_message():
    entries = chain(
        custom("c1", "ext-state", {"k": 1}),
        custom_message("m1", "ext-msg", "visible text", False),
    )
    context = build_session_context(entries)
    expected = {
        "role": "custom",
        "customType": "ext-msg",
        "content": "visible text",
        "display": False,
        "timestamp": TS_MS,
    }
    assert context.messages == [expected]
    assert list(context.messages[0]) == list(expected)
    assert dumps(context.messages[0]) == (
        '{"role":"custom","customType":"ext-msg","content":"visible text","display":false,'
        f'"timestamp":{TS_MS}}}'
    )
    assert convert_to_llm(context.messages) == [
        {"role": "user", "content": [{"type": "text", "text": "visible text"}], "timestamp": TS_MS}
    ]


def test_s23_custom_message_details_and_missing_content():
    entry = custom_message("m1", "t", None, True)
    entry["details"] = {"x": 1}
    (message,) = session_entry_to_context_messages(entry)
    assert list(message) == ["role", "customType", "content", "display", "details", "timestamp"]
    assert message["content"] == []
    # Block content passes through convert_to_llm unchanged.
    entry2 = custom_message("m2", "t", [{"type": "text", "text": "b"}], True)
    (converted,) = convert_to_llm(session_entry_to_context_messages(entry2))
    assert converted["content"] == [{"type": "text", "text": "b"}]


# ---------------------------------------------------------------------------------------------
# S24


def test_s24_summary_wrappers():
    compaction = {"role": "compactionSummary", "summary": "S", "tokensBefore": 5, "timestamp": 9}
    branch = {"role": "branchSummary", "summary": "S", "fromId": "x", "timestamp": 9}
    assert _llm_text(compaction) == (
        "The conversation history before this point was compacted into the following summary:"
        "\n\n<summary>\nS\n</summary>"
    )
    assert _llm_text(branch) == (
        "The following is a summary of a branch that this conversation came back from:"
        "\n\n<summary>\nS</summary>"
    )
    assert convert_to_llm([compaction])[0]["timestamp"] == 9


# ---------------------------------------------------------------------------------------------
# S25


def test_s25_bash_execution_text():
    assert _llm_text(_bash(output="a\nb", exitCode=0)) == "Ran `ls`\n```\na\nb\n```"
    assert _llm_text(_bash(exitCode=2)) == "Ran `ls`\n(no output)\n\nCommand exited with code 2"
    assert (
        _llm_text(_bash(exitCode=1, cancelled=True))
        == "Ran `ls`\n(no output)\n\n(command cancelled)"
    )
    assert (
        _llm_text(_bash(output="x", truncated=True, fullOutputPath="/var/log/o.txt"))
        == "Ran `ls`\n```\nx\n```\n\n[Output truncated. Full output: /var/log/o.txt]"
    )
    assert _llm_text(_bash(exitCode="2")) == "Ran `ls`\n(no output)\n\nCommand exited with code 2"
    assert _llm_text(_bash(exitCode=None)) == "Ran `ls`\n(no output)"
    missing = _bash()
    del missing["exitCode"]
    assert _llm_text(missing) == "Ran `ls`\n(no output)"
    assert (
        _llm_text(_bash(exitCode=math.nan))
        == "Ran `ls`\n(no output)\n\nCommand exited with code NaN"
    )
    # truncated without a path adds nothing
    assert _llm_text(_bash(output="x", truncated=True)) == "Ran `ls`\n```\nx\n```"


def test_s25_excluded_bash_dropped_by_conversion_but_projected():
    excluded = _bash(output="x", excludeFromContext=True)
    entries = chain(msg("u1", U("q")), msg("b1", excluded))
    context = build_session_context(entries)
    assert context.messages == [U("q"), excluded]
    assert convert_to_llm(context.messages) == [U("q")]


def test_convert_to_llm_passes_core_roles_and_drops_unknown():
    system = SYS("x", ts=1)
    user = U("u")
    assistant = {"role": "assistant", "content": [], "timestamp": 2}
    result = {"role": "toolResult", "content": [], "timestamp": 3}
    out = convert_to_llm([system, {"role": "weird"}, user, assistant, result])
    assert out == [system, user, assistant, result]
    assert out[0] is system  # passed through, not copied


# ---------------------------------------------------------------------------------------------
# S26


def test_s26_null_content_repair():
    user_entry = msg("e1", {"role": "user", "timestamp": 1}, parent=None)
    system_entry = msg("e2", {"role": "system", "content": None, "timestamp": 1}, parent="e1")
    saved = copy.deepcopy([user_entry, system_entry])
    projection = build_session_projection([user_entry, system_entry])
    assert projection.messages == [
        {"role": "user", "timestamp": 1, "content": []},
        {"role": "system", "content": "", "timestamp": 1},
    ]
    assert [user_entry, system_entry] == saved
    assert "content" not in user_entry["message"]
    assert system_entry["message"]["content"] is None
    # assistant and toolResult get [] too; other roles pass through unrepaired
    (assistant,) = session_entry_to_context_messages(msg("a", {"role": "assistant"}, None))
    assert assistant["content"] == []
    odd = {"role": "custom", "content": None}
    assert session_entry_to_context_messages(msg("c", odd, None))[0] is odd


def test_message_entries_return_stored_object():
    stored = U("hi")
    assert session_entry_to_context_messages(msg("e1", stored, None))[0] is stored


def test_entry_messages_for_other_types():
    branch = {
        "type": "branch_summary",
        "id": "b",
        "parentId": None,
        "timestamp": "2025-01-01T00:00:02.000Z",
        "fromId": "root",
        "summary": "went elsewhere",
    }
    assert session_entry_to_context_messages(branch) == [
        {
            "role": "branchSummary",
            "summary": "went elsewhere",
            "fromId": "root",
            "timestamp": 1735689602000,
        }
    ]
    branch["summary"] = ""
    assert session_entry_to_context_messages(branch) == []
    system = SYS("cp", ts=5)
    comp = {
        "type": "compaction",
        "id": "c",
        "parentId": None,
        "timestamp": "bogus",
        "summary": "S",
        "firstKeptEntryId": "c",
        "tokensBefore": 10,
        "systemMessage": system,
    }
    first, second = session_entry_to_context_messages(comp)
    assert first is system
    assert list(second) == ["role", "summary", "tokensBefore", "timestamp"]
    assert math.isnan(second["timestamp"])
    assert dumps(second).endswith('"timestamp":null}')
    for kind in ("label", "custom", "model_change", "usage", "session_info", "something_new"):
        assert session_entry_to_context_messages({"type": kind, "id": "x"}) == []


def test_entry_time_follows_date_constructor():
    assert entry_time("2025-01-01T00:00:01.000Z") == TS_MS
    assert isinstance(entry_time("2025-01-01T00:00:01.000Z"), int)
    assert entry_time(None) == 0
    assert entry_time(12.7) == 12
    assert math.isnan(entry_time())
    assert math.isnan(entry_time("yesterday"))


# ---------------------------------------------------------------------------------------------
# S27 / S97


def test_s27_system_replay():
    messages = [
        SYS("base", {"a": "1", "b": "2"}, [{"name": "t1"}, {"name": "t2"}], ts=10),
        U("u"),
        SYS(
            [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}],
            {"a": None, "c": "3", "b": "2b"},
            [{"name": "t2", "description": "v2"}, {"name": "t3"}],
            [{"name": "t1"}],
            ts=20,
        ),
        SYS("", {"a": "1b"}, ts=30),
    ]
    result = get_current_system_message(messages)
    assert dumps(result) == (
        '{"role":"system","content":"base\\n\\nx\\ny","sections":{"b":"2b","c":"3","a":"1b"},'
        '"toolsAdded":[{"name":"t2","description":"v2"},{"name":"t3"}],"timestamp":10}'
    )
    assert get_current_system_message([U("a"), U("b")]) is None
    assert get_current_system_message([]) is None


def test_s97_system_replay_without_timestamps():
    assert get_current_system_message([SYS("base", {"a": "x"}), U("q")]) is None
    assert get_current_system_message([SYS("base", tools_added=[{"name": "t"}])]) == {
        "role": "system",
        "content": "base",
        "toolsAdded": [{"name": "t"}],
        "timestamp": 0,
    }
    assert (
        get_current_system_message(
            [SYS("abc", tools_added=[{"name": "t"}]), SYS("", tools_removed=[{"name": "t"}])]
        )
        is None
    )
    assert get_current_system_message([SYS("a"), SYS("b", ts=None)]) == {
        "role": "system",
        "content": "a\n\nb",
        "timestamp": 0,
    }
    assert get_current_system_message([SYS("a", ts=None), SYS("b")]) is None
    result = get_current_system_message([SYS("a", {"n": 5, "b": True, "z": 0, "e": ""}, ts=1)])
    assert dumps(result) == (
        '{"role":"system","content":"a","sections":{"n":5,"b":true,"z":0,"e":""},"timestamp":1}'
    )


def test_system_replay_key_order_and_malformed_content():
    # Integer-like section names move to the front of the replayed sections.
    result = get_current_system_message([SYS("a", {"x": "1", "2": "b", "1": "c"}, ts=1)])
    assert list(result["sections"]) == ["1", "2", "x"]
    # A deleted and re-added section goes to the end; the first non-null timestamp wins.
    result = get_current_system_message(
        [
            SYS("a", {"p": "1", "q": "2"}, ts=None),
            SYS("", {"p": None}, ts=4),
            SYS("", {"p": "3"}, ts=9),
        ]
    )
    assert list(result["sections"].items()) == [("q", "2"), ("p", "3")]
    assert result["timestamp"] == 4
    # Content that is neither text nor blocks counts as empty text instead of failing.
    result = get_current_system_message([SYS(5, ts=1), SYS({"x": 1}, ts=2), SYS("ok", ts=3)])
    assert result["content"] == "ok"


# ---------------------------------------------------------------------------------------------
# content_text and JavaScript strings


def test_content_text():
    assert content_text("plain") == "plain"
    blocks = [
        {"type": "text", "text": "a"},
        {"type": "image", "data": "x", "mimeType": "image/png"},
        {"type": "text"},
        {"type": "text", "text": None},
        {"type": "text", "text": "b"},
    ]
    assert content_text(blocks) == "a\n\n\nb"
    assert content_text(blocks, " | ") == "a |  |  | b"
    assert content_text(None) == ""
    assert content_text(5) == ""


def test_js_string():
    assert js_string() == "undefined"
    assert js_string(None) == "null"
    assert js_string(2.0) == "2"
    assert js_string(True) == "true"
    assert js_string([1, None, "a"]) == "1,,a"
    assert js_string({"a": 1}) == "[object Object]"
    assert js_string(float("inf")) == "Infinity"


# ---------------------------------------------------------------------------------------------
# combine_usage


def test_combine_usage_sums_and_key_order():
    a = {
        "input": 1,
        "output": 2,
        "cacheRead": 3,
        "cacheWrite": 4,
        "totalTokens": 10,
        "cost": {
            "input": 0.1,
            "output": 0.2,
            "cacheRead": 0,
            "cacheWrite": 0,
            "total": 0.3,
            "x": 9,
        },
    }
    b = {
        "input": 10,
        "output": 20,
        "cacheRead": 30,
        "cacheWrite": 40,
        "reasoning": 5,
        "totalTokens": 100,
        "cost": {"input": 1, "output": 2, "cacheRead": 3, "cacheWrite": 4, "total": 10},
    }
    result = combine_usage(a, b, pi_version="1.0.3")
    assert list(result) == [
        "input",
        "output",
        "cacheRead",
        "cacheWrite",
        "reasoning",
        "totalTokens",
        "cost",
    ]
    assert result["reasoning"] == 5
    assert result["totalTokens"] == 110
    assert result["cost"] == {
        "input": 1.1,
        "output": 2.2,
        "cacheRead": 3,
        "cacheWrite": 4,
        "total": 10.3,
    }
    assert "cacheWrite1h" not in result


def test_combine_usage_missing_fields_give_nan():
    a = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "cacheWrite1h": 2, "cost": {}}
    b = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2, "cost": {}}
    result = combine_usage(a, b)
    assert result["cacheWrite1h"] == 2
    assert math.isnan(result["totalTokens"])
    assert math.isnan(result["cost"]["total"])
    assert dumps(result).startswith(
        '{"input":2,"output":2,"cacheRead":0,"cacheWrite":0,"cacheWrite1h":2,"totalTokens":null'
    )


def test_s23_via_manager():
    from explorer.session.jsonfmt import date_parse
    from explorer.session.manager import SessionManager

    manager = SessionManager.in_memory("/w", clock=lambda: 1_735_689_605_000)
    manager.append_custom_entry("ext-state", {"k": 1})
    manager.append_custom_message_entry("ext-msg", "visible text", False)
    kinds = [entry["type"] for entry in manager.get_entries()]
    assert kinds == ["custom", "custom_message"]
    ms = int(date_parse(manager.get_entries()[1]["timestamp"]))
    messages = manager.build_session_context().messages
    assert messages == [
        {
            "role": "custom",
            "customType": "ext-msg",
            "content": "visible text",
            "display": False,
            "timestamp": ms,
        }
    ]
    assert ms == 1_735_689_605_000
    assert convert_to_llm(messages) == [
        {"role": "user", "content": [{"type": "text", "text": "visible text"}], "timestamp": ms}
    ]
