"""SPEC section 4 and the context scenarios of section 8.4."""

from __future__ import annotations

import copy

from explorer.session.context import (
    ProjectedEntry,
    SessionContext,
    SessionProjection,
    build_context_entries,
    build_session_context,
    build_session_path,
    build_session_projection,
    context_entries_from_path,
    context_from_path,
    find_path_cycle,
    get_latest_compaction_entry,
    projection_diagnostics,
    projection_from_path,
    restore_settings,
)
from explorer.session.jsonfmt import dumps
from explorer.session.sentinel import UNSET

from .ctx_helpers import (
    AC,
    SYS,
    A,
    R,
    U,
    chain,
    compaction,
    edit,
    ids,
    model_change,
    msg,
    thinking,
)


def _sources(projection):
    return [item.source_entry["id"] for item in projection.entries]


# ---------------------------------------------------------------------------------------------
# Path


def test_path_follows_parents_and_leaf_rules():
    entries = chain(msg("e1", U("a")), msg("e2", A("b")), msg("e3", U("c")))
    entries.append(msg("x1", U("side"), parent="e1"))
    assert ids(build_session_path(entries)) == ["e1", "x1"]
    assert ids(build_session_path(entries, "e3")) == ["e1", "e2", "e3"]
    assert ids(build_session_path(entries, "")) == ["e1", "x1"]
    assert ids(build_session_path(entries, "nope")) == ["e1", "x1"]
    assert build_session_path(entries, None) == []
    assert build_session_path([], UNSET) == []
    assert build_session_path([], "e1") == []


def test_path_uses_given_index_and_last_duplicate():
    first = msg("e1", U("first"), parent=None)
    second = msg("e1", U("second"), parent=None)
    child = msg("e2", A("x"), parent="e1")
    assert build_session_path([first, second, child])[0] is second
    index = {"e1": first, "e2": child}
    assert build_session_path([first, second, child], "e2", index)[0] is first


def test_path_stops_at_dangling_or_falsy_parent():
    entries = [msg("e2", U("a"), parent="missing"), msg("e3", U("b"), parent="e2")]
    assert ids(build_session_path(entries)) == ["e2", "e3"]
    entries = [msg("e1", U("a"), parent=""), msg("e2", U("b"), parent="e1")]
    assert ids(build_session_path(entries)) == ["e1", "e2"]


def test_path_cycle_stops_the_walk():
    entries = [
        msg("a", U("1"), parent="c"),
        msg("b", U("2"), parent="a"),
        msg("c", U("3"), parent="b"),
        msg("d", U("4"), parent="c"),
    ]
    path = build_session_path(entries)
    assert ids(path) == ["a", "b", "c", "d"]
    assert set(find_path_cycle(entries)) == {"a", "b", "c"}
    assert find_path_cycle(entries[:0]) == []
    problems = projection_diagnostics(path)
    assert any(p["code"] == "parent_cycle" and p["severity"] == "error" for p in problems)
    self_loop = [msg("s", U("x"), parent="s")]
    assert ids(build_session_path(self_loop)) == ["s"]


def test_long_path_is_iterative():
    entries = [msg("n0", U("0"), parent=None)]
    for i in range(1, 20000):
        entries.append(msg(f"n{i}", U(str(i)), parent=f"n{i - 1}"))
    path = build_session_path(entries)
    assert len(path) == 20000
    projection = projection_from_path(path)
    assert len(projection.messages) == 20000


# ---------------------------------------------------------------------------------------------
# S45 – S49 folding


def test_s45_no_compaction():
    entries = chain(msg("u1", U("q")), model_change("m1", "openai", "gpt-5"), msg("a1", A("r")))
    assert ids(build_context_entries(entries)) == ["u1", "m1", "a1"]
    projection = build_session_projection(entries)
    assert [len(item.messages) for item in projection.entries] == [1, 0, 1]
    assert projection.messages == [entries[0]["message"], entries[2]["message"]]


def _s46(first_kept="e3"):
    return chain(
        msg("e1", U("first")),
        msg("e2", A("r1")),
        msg("e3", U("second")),
        msg("e4", A("r2")),
        compaction("c5", "Summary of first two turns", first_kept, tokens_before=1234),
        msg("e6", U("third")),
        msg("e7", A("r3")),
    )


def test_s46_compaction_folding():
    entries = _s46()
    assert ids(build_context_entries(entries)) == ["c5", "e3", "e4", "e6", "e7"]
    projection = build_session_projection(entries)
    assert projection.entries[0].source_entry is entries[4]
    messages = projection.messages
    assert len(messages) == 5
    assert messages[0] == {
        "role": "compactionSummary",
        "summary": "Summary of first two turns",
        "tokensBefore": 1234,
        "timestamp": 1735689601000,
    }
    assert [
        m["content"] if m["role"] == "user" else m["content"][0]["text"] for m in messages[1:]
    ] == [
        "second",
        "r2",
        "third",
        "r3",
    ]


def test_s47_first_kept_not_on_path():
    for first_kept in ("c5", "zzz"):
        entries = _s46(first_kept)
        assert ids(build_context_entries(entries)) == ["c5", "e6", "e7"]
    problems = projection_diagnostics(build_session_path(_s46("zzz")))
    assert [p["entry_id"] for p in problems if p["code"] == "first_kept_not_found"] == ["c5"]
    # A retain-none compaction is not a problem.
    problems = projection_diagnostics(build_session_path(_s46("c5")))
    assert not [p for p in problems if p["code"] == "first_kept_not_found"]


def test_s48_old_system_messages_skipped_later_kept():
    checkpoint = {"role": "system", "content": "v1\n\nv2", "timestamp": 5}
    entries = chain(
        msg("s1", SYS("v1", ts=1)),
        msg("u1", U("q")),
        msg("s2", SYS("v2", ts=2)),
        msg("a1", A("r")),
        compaction("c", "S", "s1", system_message=checkpoint),
        msg("s3", SYS("v3", ts=3)),
        msg("u2", U("q2")),
    )
    assert ids(build_context_entries(entries)) == ["c", "u1", "a1", "s3", "u2"]
    messages = build_session_context(entries).messages
    assert messages[0] is checkpoint
    assert messages[1]["role"] == "compactionSummary"
    assert messages[2:] == [U("q"), A("r"), SYS("v3", ts=3), U("q2")]


def test_s49_only_latest_compaction_contributes():
    entries = chain(
        msg("e1", U("a")),
        msg("e2", A("b")),
        compaction("c1", "S1", "e1"),
        msg("e3", U("c")),
        msg("e4", A("d")),
        compaction("c2", "S2", "e2"),
        msg("e5", U("e")),
    )
    projection = build_session_projection(entries)
    assert _sources(projection) == ["c2", "e2", "c1", "e3", "e4", "e5"]
    assert projection.entries[2].messages == []
    assert projection.messages[0]["summary"] == "S2"
    assert [m.get("summary") for m in projection.messages].count("S1") == 0
    assert len(projection.messages) == 5
    assert "S1" not in dumps(projection.messages)
    assert get_latest_compaction_entry(entries) is entries[5]
    assert get_latest_compaction_entry(entries[:2]) is None


# ---------------------------------------------------------------------------------------------
# S50 – S52 context edits


def test_s50_hide():
    entries = chain(msg("u1", U("secret")), msg("a1", A("ok")), edit("x1", "u1", None))
    projection = build_session_projection(entries)
    assert projection.messages == [entries[1]["message"]]
    assert projection.entries[0].source_entry["id"] == "u1"
    assert projection.entries[0].messages == []
    assert entries[0]["message"]["content"] == "secret"


def test_s51_replace_keeps_other_fields():
    entries = chain(
        msg("u1", U("long question")),
        msg("a1", A("long answer")),
        edit("x1", "a1", {"content": [{"type": "text", "text": "short"}]}),
        edit("x2", "u1", {"content": "q?"}),
    )
    saved = copy.deepcopy(entries)
    messages = build_session_context(entries).messages
    expected_user = dict(U("long question"), content="q?")
    expected_assistant = dict(A("long answer"), content=[{"type": "text", "text": "short"}])
    assert messages == [expected_user, expected_assistant]
    assert list(messages[1]) == list(A("x"))  # key order kept
    assert entries == saved


def test_s51_string_replacement_wrapped_for_assistant_and_tool_result():
    entries = chain(
        msg("a1", AC("read", {"path": "a"})),
        msg("t1", R("long output")),
        msg("u1", U("next")),
        edit("x1", "t1", {"content": "(elided)"}),
        edit("x2", "a1", {"content": "call"}),
    )
    messages = build_session_context(entries).messages
    assert messages[0]["content"] == [{"type": "text", "text": "call"}]
    assert messages[1]["content"] == [{"type": "text", "text": "(elided)"}]
    assert messages[1]["toolCallId"] == "call_1"


def test_s52_latest_edit_wins_and_edits_are_branch_relative():
    entries = chain(
        msg("u1", U("q")),
        msg("a1", A("orig")),
        edit("x1", "a1", {"content": [{"type": "text", "text": "one"}]}),
        edit("x2", "a1", {"content": [{"type": "text", "text": "two"}]}),
    )

    def text(leaf):
        return build_session_context(entries, leaf).messages[1]["content"][0]["text"]

    assert text(UNSET) == "two"
    assert text("x1") == "one"
    assert text("a1") == "orig"


def test_edit_folded_by_compaction_no_longer_applies():
    entries = chain(
        msg("u1", U("q")),
        edit("x1", "u1", None),
        msg("a1", A("r")),
        compaction("c", "S", "u1"),
    )
    # x1 is kept (it is after u1), so u1 stays hidden.
    assert [m["role"] for m in build_session_context(entries).messages] == [
        "compactionSummary",
        "assistant",
    ]
    entries[3]["firstKeptEntryId"] = "a1"
    # Now the edit is folded away; its target too.
    assert ids(build_context_entries(entries)) == ["c", "a1"]
    codes = {p["code"] for p in projection_diagnostics(build_session_path(entries))}
    assert "edit_folded" in codes


def test_edit_on_other_branch_never_applies():
    entries = chain(msg("u1", U("q")), msg("a1", A("r")))
    entries.append(edit("x1", "u1", None, parent="a1"))
    entries.append(msg("u2", U("other"), parent="a1"))
    assert build_session_context(entries).messages[0] == U("q")
    assert build_session_context(entries, "x1").messages == [A("r")]


def test_edit_of_newest_compaction_and_non_editable_targets():
    checkpoint = SYS("cp", ts=1)
    base = chain(
        msg("u1", U("q")),
        msg("s1", SYS("sys", ts=1)),
        compaction("c", "S", "u1", system_message=checkpoint),
        msg("b1", {"role": "bashExecution", "command": "ls", "output": "x", "exitCode": 0}),
    )
    hidden = base + chain(edit("x1", "c", None, parent="b1"))
    assert [m["role"] for m in build_session_context(hidden).messages] == ["user", "bashExecution"]
    kept = base + chain(edit("x1", "c", {"content": "new"}, parent="b1"))
    messages = build_session_context(kept).messages
    assert messages[0] is checkpoint
    assert messages[1]["summary"] == "S"
    replaced_bash = base + chain(edit("x1", "b1", {"content": "new"}, parent="b1"))
    assert build_session_context(replaced_bash).messages[-1] is base[3]["message"]
    problems = projection_diagnostics(build_session_path(replaced_bash))
    assert [p["code"] for p in problems if p["entry_id"] == "x1"] == ["edit_target_not_editable"]
    omitted_bash = base + chain(edit("x1", "b1", None, parent="b1"))
    assert [m["role"] for m in build_session_context(omitted_bash).messages] == [
        "system",
        "compactionSummary",
        "user",
    ]


def test_edit_target_unknown_has_no_effect():
    entries = chain(msg("u1", U("q")), edit("x1", "ghost", None))
    assert build_session_context(entries).messages == [U("q")]
    problems = projection_diagnostics(build_session_path(entries))
    assert [(p["code"], p["target_id"]) for p in problems] == [("edit_target_off_path", "ghost")]


def test_malformed_edits_follow_the_agent_and_are_reported():
    cases = [
        ({"text": "gone"}, "edit_replacement_without_content"),
        ({}, "edit_replacement_without_content"),
        ("text", "edit_replacement_not_object"),
        (5, "edit_replacement_not_object"),
        ([1], "edit_replacement_not_object"),
        (UNSET, "edit_without_replacement"),
    ]
    for replacement, code in cases:
        entries = chain(msg("e1", U("x" * 40)), msg("e2", A("ok")))
        if replacement is UNSET:
            entries += chain(edit("e4", "e1", parent="e2"))
        else:
            entries += chain(edit("e4", "e1", replacement, parent="e2"))
        saved = copy.deepcopy(entries)
        projection = build_session_projection(entries)
        assert projection.messages[0] == {"role": "user", "timestamp": 1}
        assert dumps(projection.messages[0]) == '{"role":"user","timestamp":1}'
        assert entries == saved
        problems = projection_diagnostics(build_session_path(entries))
        edit_problems = [p for p in problems if p["entry_id"] == "e4"]
        assert [(p["code"], p["target_id"]) for p in edit_problems] == [(code, "e1")]
        malformed = [p for p in problems if p["code"] == "malformed_message"]
        assert [(p["entry_id"], p["edit_id"]) for p in malformed] == [("e1", "e4")]


def test_edit_content_of_odd_type_is_used_as_is():
    entries = chain(msg("a1", A("r")), edit("x1", "a1", {"content": 7}))
    assert build_session_context(entries).messages[0]["content"] == 7
    codes = [p["code"] for p in projection_diagnostics(build_session_path(entries))]
    assert "edit_content_not_text" in codes
    assert "malformed_message" in codes


def test_superseded_edit_reported():
    entries = chain(msg("u1", U("q")), edit("x1", "u1", None), edit("x2", "u1", {"content": "z"}))
    assert build_session_context(entries).messages == [dict(U("q"), content="z")]
    problems = projection_diagnostics(build_session_path(entries))
    assert [(p["code"], p["entry_id"]) for p in problems] == [("edit_superseded", "x1")]


# ---------------------------------------------------------------------------------------------
# S53 – S55


def test_s53_settings_restoration():
    entries = chain(
        msg("u1", U("q")),
        model_change("m", "openai", "gpt-5"),
        msg("a1", A("r")),
        thinking("t", "high"),
    )
    context = build_session_context(entries)
    assert context.model == {"provider": "test", "modelId": "m1"}
    assert context.thinking_level == "high"
    entries = chain(msg("u1", U("q")), msg("a1", A("r")), model_change("m", "openai", "gpt-5"))
    assert build_session_context(entries).model == {"provider": "openai", "modelId": "gpt-5"}
    failed = A("", stop="error")
    failed["provider"] = "p2"
    entries = chain(model_change("m", "openai", "gpt-5"), msg("a1", failed))
    assert build_session_context(entries).model == {"provider": "p2", "modelId": "m1"}
    empty = build_session_context([])
    assert (empty.thinking_level, empty.model, empty.messages) == ("off", None, [])


def test_settings_count_entries_before_compaction():
    entries = chain(
        thinking("t", "low"),
        msg("u1", U("q")),
        msg("a1", A("r")),
        compaction("c", "S", "c"),
        msg("u2", U("q2")),
    )
    assert restore_settings(build_session_path(entries)) == (
        "low",
        {"provider": "test", "modelId": "m1"},
    )
    projection = build_session_projection(entries)
    assert projection.thinking_level == "low"
    assert projection.model == {"provider": "test", "modelId": "m1"}


def test_s54_pure_function_leaf_fallback():
    entries = chain(msg("e1", U("a")), msg("e2", A("b")))
    entries.append(msg("e3", U("side"), parent="e1"))
    entries = entries[:2]
    assert build_session_context(entries).messages == [U("a"), A("b")]
    assert build_session_context(entries, "nonexistent").messages == [U("a"), A("b")]
    assert build_session_context(entries, None).messages == []


def test_s55_projection_does_not_filter_by_stop_reason():
    entries = chain(
        msg("u1", U("q")),
        msg("a1", A("partial", stop="aborted")),
        msg("a2", A("", stop="error")),
    )
    assert len(build_session_context(entries).messages) == 3


# ---------------------------------------------------------------------------------------------
# S96-style worked example (SPEC 4.6) and the path-based API


def test_worked_example_4_6():
    checkpoint = {"role": "system", "content": "S*", "timestamp": 9}
    entries = chain(
        msg("s1", SYS("sys", ts=1)),
        msg("u1", U("read demo")),
        msg("a1", AC("read", {"path": "demo.txt"})),
        msg("t1", R("hello")),
        model_change("m1", "openai", "gpt-5"),
        compaction("c1", "sum", "a1", system_message=checkpoint),
        msg("u2", U("now edit")),
        edit("e1", "t1", {"content": "(elided)"}),
        msg("a2", A("done")),
    )
    projection = build_session_projection(entries)
    assert _sources(projection) == ["c1", "a1", "t1", "m1", "u2", "e1", "a2"]
    counts = [len(item.messages) for item in projection.entries]
    assert counts == [2, 1, 1, 0, 1, 0, 1]
    t1 = projection.entries[2].messages[0]
    assert t1["content"] == [{"type": "text", "text": "(elided)"}]
    assert entries[3]["message"]["content"] == [{"type": "text", "text": "hello"}]
    roles = [m["role"] for m in projection.messages]
    assert roles == ["system", "compactionSummary", "assistant", "toolResult", "user", "assistant"]
    assert projection.model == {"provider": "test", "modelId": "m1"}
    assert projection_diagnostics(build_session_path(entries)) == []


def test_path_variants_match_entry_variants_and_to_json():
    entries = _s46()
    path = build_session_path(entries)
    assert context_entries_from_path(path) == build_context_entries(entries)
    projection = projection_from_path(path)
    assert isinstance(projection, SessionProjection)
    assert isinstance(projection.entries[0], ProjectedEntry)
    assert projection == build_session_projection(entries)
    context = context_from_path(path)
    assert isinstance(context, SessionContext)
    assert context.messages == projection.messages
    data = projection.to_json()
    assert list(data) == ["entries", "messages", "thinkingLevel", "model"]
    assert list(data["entries"][0]) == ["sourceEntry", "messages"]
    assert data["entries"][0]["sourceEntry"] is entries[4]
    assert context.to_json() == {
        "messages": projection.messages,
        "thinkingLevel": "off",
        "model": {"provider": "test", "modelId": "m1"},
    }


def test_orphan_tool_result_and_system_without_timestamp_reported():
    entries = chain(msg("s1", SYS("base")), msg("u1", U("q")), msg("t1", R("x")))
    problems = projection_diagnostics(build_session_path(entries))
    codes = {(p["code"], p["entry_id"]) for p in problems}
    assert ("orphan_tool_result", "t1") in codes
    assert ("system_without_timestamp", "s1") in codes


def test_section_and_checkpoint_diagnostics():
    bad_checkpoint = {"role": "system", "timestamp": 3}
    entries = chain(
        msg("s1", SYS("a", {"n": 5, "ok": "x"}, ts=1)),
        msg("u1", U("q")),
        compaction("c", "S", "u1", system_message=bad_checkpoint),
    )
    problems = projection_diagnostics(build_session_path(entries))
    codes = {(p["code"], p["entry_id"]) for p in problems}
    assert ("checkpoint_without_content", "c") in codes
    entries = chain(msg("s1", SYS("a", {"n": 5, "ok": "x"}, ts=1)), msg("u1", U("q")))
    problems = projection_diagnostics(build_session_path(entries))
    assert [(p["code"], p["section"]) for p in problems] == [("section_not_text", "n")]


def test_non_object_checkpoint_passes_through_and_is_reported():
    entries = chain(msg("u1", U("q")), compaction("c", "S", "u1", system_message="odd"))
    messages = build_session_context(entries).messages
    assert messages[0] == "odd"
    problems = projection_diagnostics(build_session_path(entries))
    assert ("malformed_message", "c") in {(p["code"], p["entry_id"]) for p in problems}


# ---------------------------------------------------------------------------------------------
# The same scenarios through the SessionManager


def _manager():
    from explorer.session.manager import SessionManager

    ticks = iter(range(1_735_689_600_000, 1_735_689_700_000, 1000))
    return SessionManager.in_memory("/w", clock=lambda: next(ticks))


def test_s50_hide_via_manager():
    manager = _manager()
    u1 = manager.append_message(U("secret"))
    a1 = manager.append_message(A("ok"))
    manager.append_context_edit(u1, None)
    projection = manager.build_session_projection()
    assert projection.messages == [A("ok")]
    assert projection.entries[0].source_entry["id"] == u1
    assert projection.entries[0].messages == []
    assert manager.get_entry(u1)["message"]["content"] == "secret"
    assert manager.get_entry(a1)["message"] == A("ok")


def test_s51_replace_and_normalization_via_manager():
    manager = _manager()
    u1 = manager.append_message(U("long question"))
    a1 = manager.append_message(A("long answer"))
    x1 = manager.append_context_edit(a1, {"content": "short"})
    x2 = manager.append_context_edit(u1, {"content": "q?"})
    assert manager.get_entry(x1)["replacement"] == {"content": [{"type": "text", "text": "short"}]}
    assert manager.get_entry(x2)["replacement"] == {"content": "q?"}
    messages = manager.build_session_context().messages
    assert messages == [
        dict(U("long question"), content="q?"),
        dict(A("long answer"), content=[{"type": "text", "text": "short"}]),
    ]


def test_s52_branch_relative_edits_via_manager():
    manager = _manager()
    manager.append_message(U("q"))
    a1 = manager.append_message(A("orig"))
    x1 = manager.append_context_edit(a1, {"content": "one"})
    manager.append_context_edit(a1, {"content": "two"})

    def text():
        return manager.build_session_context().messages[1]["content"][0]["text"]

    assert text() == "two"
    manager.branch(x1)
    assert text() == "one"
    manager.branch(a1)
    assert text() == "orig"


def test_unhashable_entry_type_contributes_nothing_instead_of_raising():
    # Hand-written files can carry any JSON as `type`; such entries are unknown and silent.
    from explorer.session.context import build_session_context, build_session_projection

    entries = [
        {"type": [], "id": "a", "parentId": None, "timestamp": "x"},
        {"type": {"k": 1}, "id": "b", "parentId": "a", "timestamp": "x"},
        {
            "type": "message",
            "id": "c",
            "parentId": "b",
            "timestamp": "x",
            "message": {"role": "user", "content": "hi", "timestamp": 1},
        },
    ]
    assert build_session_context(entries).messages == [entries[2]["message"]]
    projection = build_session_projection(entries)
    assert [len(item.messages) for item in projection.entries] == [0, 0, 1]
