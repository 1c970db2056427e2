"""Generated Claude Code and Codex files (long, several compactions, a rewind or rollback, a
sub-agent, a 5 MB tool result, damaged lines) read by the engine and by `pisession`.

The expected facts are tracked by the generator while it writes (tests/session/agent_files.py),
so these tests do not compare the engine with itself. None of them needs ../shared."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from explorer.session.formats import detect_format, load_foreign, load_foreign_bytes
from tests.conftest import SMALL_SESSION
from tests.session.agent_files import BIG, Facts, claude_code_session, codex_session

ROOT = Path(__file__).resolve().parents[2]


def pisession(*args: str | Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    """Run the command line as a real process; `code` is the exit status it must end with
    (negative: any)."""
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT))
    env.pop("PISESSION_DEBUG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "explorer.session", *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    if code >= 0:
        assert proc.returncode == code, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    return proc


def one_json(proc: subprocess.CompletedProcess[str]) -> Any:
    """The output's JSON; a tree of long routes nests deeper than the default limit allows."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    try:
        return json.loads(proc.stdout)
    finally:
        sys.setrecursionlimit(limit)


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Facts, Path]:
    return claude_code_session(tmp_path_factory.mktemp("claude") / "-home-dev-generated")


@pytest.fixture(scope="module")
def codex(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Facts]:
    return codex_session(tmp_path_factory.mktemp("codex"))


def _check_facts(path: Path, facts: Facts) -> None:
    session = load_foreign(str(path))
    assert len(session.entries()) == facts.records
    routes = {leaf: [r.id for r in session.route(leaf)] for leaf in session.leaves()}
    assert routes == facts.routes
    for leaf in facts.routes:
        assert session.compactions(leaf) == facts.compactions[leaf]
        assert session.route_usage(leaf) == facts.usage[leaf]
    skipped = sorted(p.line for p in session.problems if p.code == "skipped-line")
    assert skipped == facts.skipped_lines
    # The crash's half line is a warning; damage in the middle is an error.
    last = [p for p in session.problems if p.line == facts.skipped_lines[-1]]
    assert [p.severity for p in last] == ["warning"]


def test_generated_claude_code_file_reads_as_written(claude: tuple[Path, Facts, Path]) -> None:
    path, facts, _ = claude
    assert detect_format(str(path)) == "claude-code"
    _check_facts(path, facts)


def test_generated_codex_file_reads_as_written(codex: tuple[Path, Facts]) -> None:
    path, facts = codex
    assert detect_format(str(path)) == "codex"
    _check_facts(path, facts)


def test_long_claude_code_session(tmp_path: Path) -> None:
    path, facts, _ = claude_code_session(
        tmp_path / "p", turns=1500, compact_at=(300, 600, 900, 1200), big_at=0
    )
    _check_facts(path, facts)


def test_claude_code_context_after_compactions_and_the_big_result(
    claude: tuple[Path, Facts, Path],
) -> None:
    path, facts, _ = claude
    session = load_foreign(str(path))
    leaf = session.current_leaf
    assert leaf is not None and facts.compactions[leaf] == 2
    context = session.context(leaf)
    first = context[0][1]
    assert first["role"] == "user" and first["content"] == "Summary before turn 80."
    # The 5 MB tool result is before the first compaction: not in the context at the leaf,
    # but whole in the context at its own entry.
    assert all(len(json.dumps(m)) < BIG for _, m in context)
    [big] = [
        r.id
        for r in session.entries()
        if r.messages
        and r.messages[0]["role"] == "toolResult"
        and len(r.messages[0]["content"][0]["text"]) == BIG
    ]
    assert session.context(big)[-1] == (big, session.get(big).messages[0])
    assert len(session.context(big)) > 100


def test_codex_context_shows_an_encrypted_compaction_as_such(codex: tuple[Path, Facts]) -> None:
    path, facts = codex
    session = load_foreign(str(path))
    compactions = [r for r in session.entries() if r.entry and r.entry["type"] == "compaction"]
    assert compactions[0].entry["details"]["encrypted"] is True
    assert compactions[1].entry["details"]["encrypted"] is False
    assert compactions[1].entry["summary"] == "Summary before 80"
    leaf_before = facts.routes[session.current_leaf][
        facts.routes[session.current_leaf].index(compactions[1].id) - 1
    ]
    context = session.context(leaf_before)
    summaries = [m for _, m in context if m["role"] == "compactionSummary"]
    assert len(summaries) == 1 and summaries[0]["encrypted"] is True
    assert "gAAAA" not in json.dumps([m for _, m in context])


def test_sub_agent_file_is_its_own_session_linked_to_the_task_call(
    claude: tuple[Path, Facts, Path],
) -> None:
    path, _, agent_path = claude
    main = load_foreign(str(path))
    [link] = main.links["subagents"]
    assert Path(link["file"]) == agent_path and link["toolUseId"] == "toolu_00010"
    agent = load_foreign(str(agent_path))
    assert agent.links["parent"]["toolUseId"] == "toolu_00010"
    assert Path(agent.links["parent"]["file"]) == path
    assert agent.route_usage(agent.current_leaf) == {
        "input": 20,
        "output": 40,
        "cacheRead": 0,
        "cacheWrite": 0,
    }


@pytest.mark.parametrize("which", ["claude", "codex"])
def test_pisession_commands(which: str, request: pytest.FixtureRequest) -> None:
    path, facts = request.getfixturevalue(which)[:2]
    tree = one_json(pisession("tree", path, "--json"))
    leaves: list[str] = []
    stack = list(tree["roots"])
    count = 0
    while stack:
        node = stack.pop()
        count += 1
        if not node["children"]:
            leaves.append(node["id"])
        stack.extend(node["children"])
    assert count == facts.records and sorted(leaves) == sorted(facts.routes)

    entries = one_json(pisession("entries", path, "--json"))
    assert len(entries) == facts.records
    assert {"id", "parentId", "type", "line"} <= set(entries[0])
    everything = one_json(pisession("entries", path, "--json", "--all"))
    assert len(everything) > len(entries)

    for leaf in facts.routes:
        stats = one_json(pisession("stats", path, "--leaf", leaf, "--json"))
        assert stats["usage"] == facts.usage[leaf]
        assert stats["cost"]["estimate"] is True and stats["cost"]["total"] > 0
        assert stats["cost"]["priceList"].startswith("genai-prices")
        context = one_json(pisession("context", path, "--leaf", leaf, "--json"))
        assert len(context["messages"]) == len(context["entryIds"]) > 0
        assert context["contextSource"] == ("derived" if which == "claude" else "recorded")

    report = one_json(pisession("validate", path, "--json", code=1))
    assert not report["ok"]
    assert sorted(p["line"] for p in report["problems"] if p["code"] == "skipped-line") == (
        facts.skipped_lines
    )
    shown = pisession("show", path).stdout
    assert ("Claude Code session" if which == "claude" else "Codex session") in shown


def test_pisession_on_unknown_leaf_fails_clearly(codex: tuple[Path, Facts]) -> None:
    proc = pisession("context", codex[0], "--leaf", "L999999", "--json", code=1)
    assert "Entry L999999 not found" in proc.stderr


def test_stats_of_a_pi_file_counts_recorded_costs(tmp_path: Path) -> None:
    path = tmp_path / "small.jsonl"
    path.write_bytes(SMALL_SESSION)
    stats = one_json(pisession("stats", path, "--leaf", "d4e5f6a7", "--json"))
    assert stats["usage"] == {"input": 2500, "output": 52, "cacheRead": 0, "cacheWrite": 0}
    assert stats["responses"] == 2
    assert stats["cost"]["recorded"] == pytest.approx(0.0083)
    assert stats["cost"]["estimate"] is False
    other = one_json(pisession("stats", path, "--leaf", "e5f6a7b8", "--json"))
    assert other["usage"]["input"] == 10 and other["responses"] == 1


def test_stats_estimates_pi_usage_without_cost(tmp_path: Path) -> None:
    lines = SMALL_SESSION.splitlines()
    entry = json.loads(lines[2])
    del entry["message"]["usage"]["cost"]
    lines[2] = json.dumps(entry).encode()
    path = tmp_path / "nocost.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    stats = one_json(pisession("stats", path, "--leaf", "d4e5f6a7", "--json"))
    assert stats["cost"]["estimate"] is True
    # 1200 input and 40 output tokens of claude-sonnet-4-5 at $3 / $15 per million.
    assert stats["cost"]["estimated"] == pytest.approx(1200 * 3e-6 + 40 * 15e-6)
    assert stats["cost"]["recorded"] == pytest.approx(0.0041)


def test_codex_recorded_history_is_checked_against_the_route(tmp_path: Path) -> None:
    def line(kind: str, payload: dict) -> bytes:
        record = {"timestamp": "2026-10-12T10:00:00.000Z", "type": kind, "payload": payload}
        return json.dumps(record).encode() + b"\n"

    def user(text: str) -> dict:
        return {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        }

    meta = line("session_meta", {"id": "019a2000-0000-7000-8000-0000000000aa", "cwd": "/w"})
    body = (
        line("response_item", user("kept"))
        + line("event_msg", {"type": "thread_rolled_back", "num_turns": 1})
        + line("response_item", user("other branch"))
    )
    good = line(
        "compacted", {"message": "", "replacement_history": [user("other branch"), user("S")]}
    )
    bad = line("compacted", {"message": "", "replacement_history": [user("kept"), user("S")]})
    clean = load_foreign_bytes(meta + body + good)
    assert [p.code for p in clean.problems] == []
    wrong = load_foreign_bytes(meta + body + bad)
    [problem] = wrong.problems
    assert (
        problem.code == "compaction-history" and problem.line == 5 and "'kept'" in problem.message
    )


def test_codex_first_token_count_counts_even_without_a_total() -> None:
    meta = b'{"timestamp":"t","type":"session_meta","payload":{"id":"x"}}\n'
    item = b'{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"assistant","content":[]}}\n'
    count = b'{"timestamp":"t","type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":9,"cached_input_tokens":4,"output_tokens":2}}}}\n'
    session = load_foreign_bytes(meta + item + count + count)
    # The first counts (nothing counted before it); the second repeats its (absent) total.
    assert session.route_usage("L2") == {"input": 5, "output": 2, "cacheRead": 4, "cacheWrite": 0}


def test_claude_code_responses_group_by_any_message_id_and_the_last_record_counts() -> None:
    def record(uuid: str, parent: str | None, message_id: object, output: int) -> bytes:
        message = {"role": "assistant", "content": [], "usage": {"output_tokens": output}}
        if message_id is not None:
            message["id"] = message_id
        value = {"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": "s"}
        return json.dumps(dict(value, message=message)).encode() + b"\n"

    data = (
        record("a", None, 7, 1)  # a numeric id groups too
        + record("b", "a", 7, 30)  # the last record of the response counts
        + record("c", "b", None, 5)  # no id: its own group
        + record("d", "c", None, 6)
    )
    session = load_foreign_bytes(data)
    assert session.route_usage("d")["output"] == 30 + 5 + 6
