"""Conformance with Pi 1.6.0 (docs/spec-pi-1.6.md, scenarios P01-P15).

Each test names the scenario it checks. Where 1.0.3 behaved differently and that behaviour is
still reachable (`pi_version="1.0.3"`), the test checks both, so the difference itself is
pinned down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.session.branch_summary import (
    generate_branch_summary,
    navigate_tree,
    prepare_branch_entries,
)
from explorer.session.compaction import compact, compact_session, prepare_compaction
from explorer.session.jsonfmt import utf16_len
from explorer.session.listing import find_by_id, list_sessions, paths_equal
from explorer.session.manager import SessionManager
from explorer.session.message_meta import format_duration, message_facts, provider_total_name
from explorer.session.messages import combine_usage
from explorer.session.pi_version import check_pi_version
from explorer.session.prompts import PREFIX_INSTRUCTIONS
from explorer.session.request_preview import (
    branch_entries_request_preview,
    branch_summary_request_preview,
    compaction_request_preview,
    format_request_preview,
)
from explorer.session.serialize import serialize_conversation, slice_head, truncate_for_summary
from explorer.session.summarizers import EmbeddedSummarizer
from explorer.session.tokens import CompactionSettings
from tests.fakes.stub_summarizer import StubSummarizer
from tests.session.ctx_helpers import AC, A, R, U, chain, edit, msg

from .manager_helpers import Clock, header, msg_entry, read_bytes, write_lines

ROOT = Path(__file__).resolve().parents[2]


def x(n: int) -> str:
    return "x" * n


def thinking_assistant(text: str, thought: str) -> dict:
    message = A(text)
    message["content"] = [{"type": "thinking", "thinking": thought}, {"type": "text", "text": text}]
    return message


def split_path() -> list[dict]:
    """A path whose newest turn is cut in the middle (history and a turn prefix)."""
    return chain(
        msg("e1", U(x(400))),
        msg("e2", thinking_assistant(x(400), "SECRET-REASONING-1")),
        msg("e3", U("do the big task")),
        msg("e4", AC("bash", {"command": "ls"})),
        msg("e5", R(x(4000))),
        msg("e6", AC("bash", {"command": "ls"})),
        msg("e7", R(x(4000))),
        msg("e8", A(x(400))),
    )


SPLIT = CompactionSettings(True, 16384, 1500)


# --------------------------------------------------------------------------------------------
# P01 thinking is not serialized


def test_p01_thinking_is_left_out_of_summary_requests():
    path = chain(
        msg("e1", U("fix the parser")),
        msg("e2", thinking_assistant(x(4000), "SECRET-REASONING")),
        msg("e3", U(x(4000))),
        msg("e4", A(x(4000))),
    )
    prep = prepare_compaction(path, CompactionSettings(True, 16384, 1500))
    stub = StubSummarizer("S")
    compact(prep, stub)
    (prompt,) = stub.prompts
    assert "SECRET-REASONING" not in prompt
    assert "[Assistant thinking]" not in prompt
    assert "[User]: fix the parser\n\n[Assistant]: " + x(4000) in prompt
    legacy = StubSummarizer("S")
    compact(prep, legacy, pi_version="1.0.3")
    assert "[Assistant thinking]: SECRET-REASONING\n\n[Assistant]: " in legacy.prompts[0]


def test_p01_thinking_only_assistant_contributes_nothing():
    message = A("")
    message["content"] = [{"type": "thinking", "thinking": "t"}]
    assert serialize_conversation([U("q"), message]) == "[User]: q"
    assert (
        serialize_conversation([U("q"), message], pi_version="1.0.3")
        == "[User]: q\n\n[Assistant thinking]: t"
    )


# --------------------------------------------------------------------------------------------
# P02 no output cap


def test_p02_no_output_cap_on_any_summary_request():
    prep = prepare_compaction(split_path(), SPLIT)
    assert prep.is_split_turn and prep.messages_to_summarize
    stub = StubSummarizer("T")
    compact(prep, stub, model={"maxTokens": 1000})
    assert [r.kind for r in stub.requests] == ["history", "turn_prefix"]
    assert [r.max_tokens for r in stub.requests] == [None, None]
    assert all("maxTokens" not in r.to_json()["options"] for r in stub.requests)
    legacy = StubSummarizer("T")
    compact(prep, legacy, model={"maxTokens": 1000}, pi_version="1.0.3")
    assert [r.max_tokens for r in legacy.requests] == [1000, 1000]

    entries = chain(msg("u", U("q")), msg("a", A("r")))
    branch = StubSummarizer("B")
    generate_branch_summary(entries, branch, model={"maxTokens": 1000})
    assert branch.requests[0].max_tokens is None
    generate_branch_summary(entries, branch, model={"maxTokens": 100000}, pi_version="1.0.3")
    assert branch.requests[1].max_tokens == 4096


def test_p02_embedded_summarizer_uses_the_model_limit_without_a_cap():
    path = chain(*(msg(f"e{i}", U(f"step {i} edits src/file_{i}.py " + x(300))) for i in range(60)))
    prep = prepare_compaction(path, CompactionSettings(True, 16384, 200))
    limited = compact(prep, EmbeddedSummarizer(), model={"maxTokens": 100})
    assert utf16_len(limited.summary.split("\n\n<read-files>")[0]) <= 400
    unlimited = compact(prep, EmbeddedSummarizer(default_max_tokens=0))
    assert len(unlimited.summary) > len(limited.summary)


# --------------------------------------------------------------------------------------------
# P03 surrogate-safe truncation


def test_p03_truncation_never_splits_a_surrogate_pair():
    text = x(1999) + "😀" + x(10)  # the emoji occupies units 1999-2000; 2011 units in all
    assert utf16_len(text) == 2011
    out = truncate_for_summary(text)
    assert out == x(1999) + "\n\n[... 11 more characters truncated]"
    legacy = truncate_for_summary(text, pi_version="1.0.3")
    assert legacy == x(1999) + "\ud83d" + "\n\n[... 11 more characters truncated]"
    # A pair that ends exactly at the cut is kept whole.
    assert truncate_for_summary(x(1998) + "😀" + x(5)).startswith(x(1998) + "😀\n\n[... 5 more")
    serialized = serialize_conversation([R(text)])
    assert serialized == "[Tool result]: " + x(1999) + "\n\n[... 11 more characters truncated]"
    serialized.encode("utf-8")  # valid text: no lone surrogate


@pytest.mark.parametrize(
    ("text", "units", "expected"),
    [("ab😀", 3, "ab"), ("ab😀", 4, "ab😀"), ("😀", 0, ""), ("abc", 9, "abc")],
)
def test_p03_slice_head(text, units, expected):
    assert slice_head(text, units) == expected


# --------------------------------------------------------------------------------------------
# P04 custom instructions reach the turn prefix


def test_p04_split_turn_with_custom_instructions():
    prep = prepare_compaction(split_path(), SPLIT)
    stub = StubSummarizer("H", "P")
    result = compact(prep, stub, custom_instructions="keep the test names")
    history, prefix = stub.prompts
    assert history.endswith("\n\nAdditional focus: keep the test names")
    assert prefix == (
        "# Conversation\n"
        + serialize_conversation(prep.turn_prefix_messages)
        + "\n\n# Instructions\n"
        + PREFIX_INSTRUCTIONS
        + "\n\nAdditional focus: keep the test names"
    )
    assert "previous-summary" not in prefix
    assert result.summary == "H\n\n---\n\n**Turn Context (split turn):**\n\nP"
    legacy = StubSummarizer("H", "P")
    compact(prep, legacy, custom_instructions="keep the test names", pi_version="1.0.3")
    assert legacy.prompts[1].endswith(PREFIX_INSTRUCTIONS)


# --------------------------------------------------------------------------------------------
# P05 branch summaries apply context edits


def branch_with_edits() -> list[dict]:
    return chain(
        msg("u1", U("first question")),
        msg("a1", AC("edit", {"path": "hidden.py"})),
        msg("t1", R("ok")),
        msg("a2", AC("read", {"path": "kept.py"})),
        msg("t2", R("contents")),
        msg("u2", U("original wording")),
        msg("a3", A("visible answer")),
        edit("x1", "a1", None),
        edit("x2", "u2", {"content": "first replacement"}),
        edit("x3", "u2", {"content": "latest replacement"}),
        edit("x4", "a3", {"content": "replaced answer"}),
        edit("x5", "t2", None),
    )


def test_p05_branch_summary_over_hidden_and_replaced_messages():
    entries = branch_with_edits()
    prepared = prepare_branch_entries(entries)
    assert [m["role"] for m in prepared.messages] == ["user", "assistant", "user", "assistant"]
    assert prepared.messages[2]["content"] == "latest replacement"
    assert prepared.messages[3]["content"] == [{"type": "text", "text": "replaced answer"}]
    stub = StubSummarizer("SUM")
    result = generate_branch_summary(entries, stub)
    prompt = stub.prompts[0]
    assert (
        "hidden.py" not in prompt
        and "original wording" not in prompt
        and "first replacement" not in prompt
    )
    assert "[User]: latest replacement" in prompt and "[Assistant]: replaced answer" in prompt
    assert '[Assistant tool calls]: read(path="kept.py")' in prompt
    # The hidden edit's file is not listed; the stored summary lists what was summarized.
    assert result.read_files == ["kept.py"] and result.modified_files == []
    assert result.summary.endswith("SUM\n\n<read-files>\nkept.py\n</read-files>")
    # The stored entries are not changed by the projection.
    assert entries[5]["message"]["content"] == "original wording"


def test_p05_raw_reading_with_1_0_3():
    stub = StubSummarizer("SUM")
    result = generate_branch_summary(branch_with_edits(), stub, pi_version="1.0.3")
    assert "original wording" in stub.prompts[0] and "hidden.py" in stub.prompts[0]
    assert result.modified_files == ["hidden.py"]


def test_p05_edit_outside_the_abandoned_entries_does_not_apply():
    entries = chain(msg("u1", U("kept text")), msg("a1", A("r")))
    outside = edit("x9", "u1", None, parent="a1")
    prepared = prepare_branch_entries(entries)
    assert prepared.messages[0]["content"] == "kept text"
    assert [m["content"] for m in prepare_branch_entries(entries + [outside]).messages] == [
        [{"type": "text", "text": "r"}]
    ]


# --------------------------------------------------------------------------------------------
# P06 branch summaries pass the thinking level as reasoning


@pytest.mark.parametrize(
    ("model", "level", "version", "expected"),
    [
        ({"reasoning": True}, "high", "1.6.0", "high"),
        ({"reasoning": True}, "off", "1.6.0", None),
        ({"reasoning": False}, "high", "1.6.0", None),
        ({"reasoning": True}, None, "1.6.0", None),
        ({"reasoning": True}, "high", "1.0.3", None),
    ],
)
def test_p06_branch_summary_reasoning(model, level, version, expected):
    stub = StubSummarizer("S")
    generate_branch_summary(
        chain(msg("u", U("q"))), stub, model=model, thinking_level=level, pi_version=version
    )
    options = stub.requests[0].options
    assert options.get("reasoning") == expected
    assert options["cacheRetention"] == "none" and options["sessionId"]


def test_p06_navigation_passes_no_level_unless_asked():
    m = SessionManager.in_memory("/w")
    root = m.append_message(U("q"))
    m.append_message(A("r"))
    stub = StubSummarizer("S")
    navigate_tree(m, root, summarize=True, summarizer=stub, model={"reasoning": True})
    assert "reasoning" not in stub.requests[0].options


# --------------------------------------------------------------------------------------------
# P07 a failed append leaves memory unchanged


def test_p07_failed_write_leaves_memory_unchanged(tmp_path):
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock())
    u1 = m.append_message(U("hello"))
    a1 = m.append_message(A("hi"))
    path = m.get_session_file()
    saved = read_bytes(path)
    entries_before = [dict(e) for e in m.get_entries()]
    os.remove(path)
    os.symlink("/dev/full", path)  # a full disk: every write fails with ENOSPC
    with pytest.raises(OSError):
        m.append_message(U("lost"))
    with pytest.raises(OSError):
        m.append_label_change(u1, "important")
    assert m.get_leaf_id() == a1
    assert m.get_entries() == entries_before
    assert m.get_label(u1) is None
    os.remove(path)
    with open(path, "wb") as fh:
        fh.write(saved)
    u2 = m.append_message(U("again"))
    assert m.get_entry(u2)["parentId"] == a1
    reopened = SessionManager.open(path)
    assert [e["id"] for e in reopened.get_entries()] == [u1, a1, u2]
    assert reopened.get_leaf_id() == u2


def test_p07_failed_first_write_is_retried_by_the_next_append(tmp_path):
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock())
    path = m.get_session_file()
    with open(path, "w") as fh:
        fh.write("someone else's file\n")
    with pytest.raises(FileExistsError):
        m.append_message(U("hello"))
    assert m.get_entries() == [] and m.get_leaf_id() is None
    os.remove(path)
    u1 = m.append_message(U("hello"))
    assert [e["id"] for e in SessionManager.open(path).get_entries()] == [u1]


def test_p07_failed_branch_summary_keeps_memory_consistent(tmp_path):
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock())
    u1 = m.append_message(U("q"))
    m.append_message(A("r"))
    path = m.get_session_file()
    count = len(m.get_entries())
    os.remove(path)
    os.symlink("/dev/full", path)
    with pytest.raises(OSError):
        m.branch_with_summary(u1, "summary")
    assert len(m.get_entries()) == count
    assert all(e["type"] != "branch_summary" for e in m.get_entries())
    # As in Pi, the leaf stays where branching put it before the write (the branch point).
    assert m.get_leaf_id() == u1


# --------------------------------------------------------------------------------------------
# P08 directory comparisons use normalised path equality


def test_p08_directory_spellings_compare_equal(tmp_path, monkeypatch):
    agent = tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    default = agent / "sessions" / "--w-proj--"
    default.mkdir(parents=True)
    write_lines(default / "a.jsonl", [header("mine", "/w/proj"), msg_entry("m-e", None, U("q"))])
    write_lines(default / "b.jsonl", [header("theirs", "/other"), msg_entry("t-e", None, U("q"))])
    os.utime(default / "a.jsonl", (1000, 1000))
    os.utime(default / "b.jsonl", (2000, 2000))
    spelled = str(default) + "/./"
    assert paths_equal(spelled, str(default))
    # The default directory, however spelled, lists every session in it (no cwd filter).
    assert SessionManager.continue_recent("/w/proj", spelled).get_session_id() == "theirs"
    assert {i.id for i in list_sessions("/w/proj", spelled)} == {"mine", "theirs"}
    assert find_by_id("/w/proj", "theirs", spelled) is not None
    assert SessionManager.create("/w/proj", spelled).uses_default_session_dir()
    other = tmp_path / "other"
    other.mkdir()
    assert not paths_equal(str(other), str(default))


# --------------------------------------------------------------------------------------------
# P09 previews are exactly what is sent


def fixed_clock():
    return 1_764_000_000_000


def test_p09_compaction_preview_matches_the_sent_requests():
    path = split_path()
    options = {
        "model": {"reasoning": True},
        "custom_instructions": "focus",
        "thinking_level": "medium",
        "session_id": "route-1",
        "clock": fixed_clock,
    }
    preview = compaction_request_preview(path, SPLIT, **options)
    stub = StubSummarizer("H", "P")
    compact(prepare_compaction(path, SPLIT), stub, **options)
    assert preview["requests"] == [r.to_json() for r in stub.requests]
    first = preview["requests"][0]
    assert list(first) == ["kind", "label", "systemPrompt", "messages", "options"]
    assert first["options"] == {
        "reasoning": "medium",
        "cacheRetention": "none",
        "sessionId": "route-1",
    }
    assert [m["role"] for m in first["messages"]] == ["user"]
    assert preview["isSplitTurn"] and preview["firstKeptEntryId"] == prep_first_kept(path)
    assert compaction_request_preview(path[:1], SPLIT) is None
    text = format_request_preview(preview)
    assert "=== request 2 of 2: Turn prefix summarization (turn_prefix) ===" in text
    assert "(no maxTokens: the provider's output limit for the model applies)" in text


def prep_first_kept(path):
    return prepare_compaction(path, SPLIT).first_kept_entry_id


def test_p09_branch_preview_matches_the_sent_request():
    m = SessionManager.in_memory("/w", clock=Clock())
    root = m.append_message(U("q"))
    a1 = m.append_message(AC("write", {"path": "w.py"}))
    u2 = m.append_message(U("drop this"))
    m.append_context_edit(u2, None)
    leaf = m.get_leaf_id()
    preview = branch_summary_request_preview(
        m, leaf, root, model={"reasoning": True}, thinking_level="low", clock=fixed_clock
    )
    stub = StubSummarizer("S")
    result = navigate_tree(
        m,
        root,
        summarize=True,
        summarizer=stub,
        model={"reasoning": True},
        thinking_level="low",
        clock=fixed_clock,
    )
    sent = stub.requests[0].to_json()
    sent["options"]["sessionId"] = preview["requests"][0]["options"][
        "sessionId"
    ]  # fresh per request
    assert preview["requests"] == [sent]
    assert preview["entryIds"] == [a1, u2, leaf]
    assert preview["commonAncestorId"] == root and preview["summarizedMessages"] == 1
    assert preview["modifiedFiles"] == ["w.py"] == result.summary.modified_files
    assert "drop this" not in preview["requests"][0]["messages"][0]["content"][0]["text"]
    entries = [m.get_entry(i) for i in preview["entryIds"]]
    assert (
        branch_entries_request_preview(
            entries, model={"reasoning": True}, thinking_level="low", clock=fixed_clock
        )["requests"][0]["messages"]
        == preview["requests"][0]["messages"]
    )
    empty = branch_summary_request_preview(m, root, root)
    assert empty["requests"] == [] and empty["summary"] == "No content to summarize"


# --------------------------------------------------------------------------------------------
# P10 / P11 command line previews


def run_cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "explorer.session", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        check=False,
    )


def session_file(tmp_path: Path) -> Path:
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock())
    for step in range(6):
        m.append_message(U(f"step {step} " + x(2000)))
        m.append_message(thinking_assistant(f"done {step} " + x(2000), f"PRIVATE-{step}"))
    fork_point = m.get_entries()[2]["id"]
    m.branch(fork_point)
    m.append_message(U("an alternative"))
    m.append_message(AC("edit", {"path": "alt.py"}))
    return Path(m.get_session_file())


def test_p10_compact_show_request(tmp_path):
    path = session_file(tmp_path)
    before = path.read_bytes()
    leaf = SessionManager.open(str(path)).get_entries()[-3]["id"]
    args = ["compact", path, "--leaf", leaf, "--dry-run", "--show-request", "--keep-recent", "600"]
    done = run_cli(*args, "--instructions", "tests first")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "=== request 1 of 1: Summarization (history) ===" in out
    assert "--- system prompt ---\nYou are a context-summarization assistant." in out
    assert "--- user prompt ---\n<conversation>\n[User]: step 0 " in out
    assert "Additional focus: tests first" in out
    assert "PRIVATE-" not in out and "\n  maxTokens: " not in out
    as_json = run_cli(*args, "--json", "--pi-version", "1.0.3")
    record = json.loads(as_json.stdout)
    (request,) = record["requests"]
    assert request["options"]["maxTokens"] == 13107
    assert "[Assistant thinking]: PRIVATE-0" in request["messages"][0]["content"][0]["text"]
    assert path.read_bytes() == before


def test_p11_branch_summary_dry_run(tmp_path):
    path = session_file(tmp_path)
    before = path.read_bytes()
    m = SessionManager.open(str(path))
    leaf = m.get_leaf_id()
    target = m.get_entries()[-3]["id"]
    done = run_cli(
        "branch-summary",
        path,
        "--from",
        leaf,
        "--to",
        target,
        "--dry-run",
        "--thinking-level",
        "high",
        "--reasoning-model",
    )
    assert done.returncode == 0, done.stderr
    assert "=== request 1 of 1: Branch summarization (branch) ===" in done.stdout
    assert '[Assistant tool calls]: edit(path="alt.py")' in done.stdout
    assert 'reasoning: "high"' in done.stdout
    assert "modified files: alt.py" in done.stdout
    record = json.loads(
        run_cli(
            "branch-summary", path, "--from", leaf, "--to", target, "--dry-run", "--json"
        ).stdout
    )
    assert record["commonAncestorId"] == m.get_entries()[2]["id"]
    assert "reasoning" not in record["requests"][0]["options"]
    refused = run_cli("branch-summary", path, "--from", leaf, "--to", target)
    assert refused.returncode == 2 and "--dry-run" in refused.stderr
    missing = run_cli("branch-summary", path, "--from", "nope", "--to", target, "--dry-run")
    assert missing.returncode == 1 and "Entry nope not found" in missing.stderr
    assert path.read_bytes() == before


# --------------------------------------------------------------------------------------------
# P12 newer persisted fields


def newer_fields_lines() -> list[dict]:
    assistant = A("answer")
    assistant.update(
        {
            "provider": "azure-openai-responses",
            "responseModel": "gpt-x-2026-01-01",
            "thinkingLevel": "high",
            "diagnostics": [
                {"type": "stream_retry", "timestamp": 5, "error": {"message": "reset"}}
            ],
            "rawStopReason": "end_turn",
            "durationMs": 1234,
            "endTurn": True,
        }
    )
    ran = R("ran")
    ran["durationMs"] = 80
    never_ran = R("skipped")
    return [
        header("s-new", "/w/proj"),
        msg_entry("u1", None, U("q")),
        msg_entry("a1", "u1", assistant),
        msg_entry("t1", "a1", ran),
        msg_entry("t2", "t1", never_ran),
        {
            "type": "config_update",
            "id": "c1",
            "parentId": "t2",
            "timestamp": "2026-11-20T00:00:00.000Z",
            "futureField": {"k": [1, 2]},
        },
    ]


def test_p12_newer_fields_survive_and_are_shown(tmp_path):
    path = tmp_path / "new.jsonl"
    original = write_lines(path, newer_fields_lines())
    m = SessionManager.open(str(path))
    m.append_message(U("more"))
    assert read_bytes(path).startswith(original)
    assert SessionManager.open(str(path)).get_entry("a1")["message"]["durationMs"] == 1234
    assert SessionManager.open(str(path)).get_entry("c1")["futureField"] == {"k": [1, 2]}
    shown = run_cli("show", path)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert (
        "took 1.2 s · answered by gpt-x-2026-01-01 · thinking high · provider stop end_turn · 1 diagnostic (stream_retry)"
        in text
    )
    assert "took 80 ms" in text
    skipped = next(line for line in text.splitlines() if "skipped" in line)
    assert "took" not in skipped


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1234, "took 1.2 s"),
        (80, "took 80 ms"),
        (0, "took 0 ms"),
        (125_000, "took 2 min 5 s"),
        (120_000, "took 2 min"),
        (None, None),
        ("5", None),
        (-1, None),
        (float("nan"), None),
        (True, None),
    ],
)
def test_p12_format_duration(value, expected):
    assert format_duration(value) == expected


def test_p12_provider_names_for_totals():
    assert provider_total_name("azure-openai-responses") == "azure"
    assert provider_total_name("azure") == "azure"
    assert provider_total_name("anthropic") == "anthropic"
    assert message_facts({"role": "assistant", "model": "m", "responseModel": "m"}) == []


# --------------------------------------------------------------------------------------------
# P15 combined usage of a split-turn compaction


def test_p15_combined_usage_says_whether_the_total_came_from_the_provider():
    def usage(flag):
        cost = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "total": 2}
        if flag is not None:
            cost["totalFromProvider"] = flag
        return {
            "input": 1,
            "output": 1,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 2,
            "cost": cost,
        }

    assert combine_usage(usage(True), usage(True))["cost"]["totalFromProvider"] is True
    assert combine_usage(usage(True), usage(None))["cost"]["totalFromProvider"] is False
    assert combine_usage(usage(False), usage(True))["cost"]["totalFromProvider"] is False
    assert (
        "totalFromProvider"
        not in combine_usage(usage(True), usage(True), pi_version="1.0.3")["cost"]
    )
    prep = prepare_compaction(split_path(), SPLIT)
    result = compact(prep, StubSummarizer("H", "P"))
    assert list(result.usage["cost"]) == [
        "input",
        "output",
        "cacheRead",
        "cacheWrite",
        "total",
        "totalFromProvider",
    ]


# --------------------------------------------------------------------------------------------
# P13 the version switch


def test_p13_unknown_versions_are_refused():
    assert check_pi_version("1.6.0") == "1.6.0"
    with pytest.raises(ValueError, match="Unknown Pi version"):
        serialize_conversation([], pi_version="1.5")
    with pytest.raises(ValueError):
        compaction_request_preview(split_path(), SPLIT, pi_version="latest")


# --------------------------------------------------------------------------------------------
# P14 the whole pipeline stores what 1.6.0 stores


def test_p14_compact_session_stores_the_1_6_result():
    m = SessionManager.in_memory("/w")
    for i in range(4):
        m.append_message(U(f"task {i} " + x(3000)))
        m.append_message(AC("read", {"path": f"src/m{i}.py"}))
        m.append_message(R(x(3000)))
        m.append_message(thinking_assistant("ok " + x(3000), "HIDDEN"))
    stub = StubSummarizer("SUMMARY")
    entry_id, result = compact_session(m, stub, CompactionSettings(True, 16384, 2000))
    stored = m.get_entry(entry_id)
    assert stored["summary"] == result.summary
    assert stored["summary"].startswith("SUMMARY\n\n<read-files>\nsrc/m0.py")
    assert stored["details"] == result.details
    assert all(r.max_tokens is None and "HIDDEN" not in r.prompt_text for r in stub.requests)
