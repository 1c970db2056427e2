"""Claude Code and Codex files read by the engine: every fact of expected-facts.json, detection,
the mapping to Pi-shaped messages, compaction projections and sub-agent links."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from explorer.session.formats import detect_bytes, detect_format, load_foreign, load_foreign_bytes
from tests.conftest import AGENT_FACTS, FIXTURES_DIR

pytestmark = pytest.mark.agent_fixtures  # (every test here reads ../shared)


def _facts() -> dict:
    if not AGENT_FACTS.is_file():
        return {"missing.jsonl": {}}  # deselected by the agent_fixtures marker
    return json.loads(AGENT_FACTS.read_text())["files"]


FACTS = _facts()


@pytest.mark.parametrize("rel", sorted(FACTS))
def test_facts_of_every_example_file(rel: str) -> None:
    expected = FACTS[rel]
    path = FIXTURES_DIR / rel
    assert detect_format(str(path)) == rel.split("/", 1)[0]
    session = load_foreign(str(path))
    assert len(session.entries()) == expected["records"]
    routes = {leaf: [r.id for r in session.route(leaf)] for leaf in session.leaves()}
    assert routes == expected["leaves"]
    for leaf in expected["leaves"]:
        assert session.compactions(leaf) == expected["compactions"][leaf]
        usage = session.route_usage(leaf)
        assert {
            "input": usage["input"],
            "output": usage["output"],
            "cache_read": usage["cacheRead"],
            "cache_write": usage["cacheWrite"],
        } == expected["usage"][leaf]


CC = FIXTURES_DIR / "claude-code"
RATE = CC / "own/rate-limit/145d1213-c732-5068-9ff5-eef2735100ec.jsonl"
AGENT = CC / "own/rate-limit/145d1213-c732-5068-9ff5-eef2735100ec/subagents/agent-b41e9d0.jsonl"
PRESERVED = CC / "claude-code-log/dag_compact_after_rewind_preserved.jsonl"
CODEX = FIXTURES_DIR / "codex/own/sessions/2026/10/12"
ROLLBACK = CODEX / "rollout-2026-10-12T10-00-00-019a2000-0000-7000-8000-0000000000e1.jsonl"
FORK = CODEX / "rollout-2026-10-12T10-30-00-019a2000-0000-7000-8000-0000000000e2.jsonl"
CODEX_LOG = FIXTURES_DIR / "codex/claude-code-log/sessions/2026/01"


def test_claude_code_session_is_named_and_linked_to_its_sub_agent_both_ways() -> None:
    main = load_foreign(str(RATE))
    assert main.title == "Add rate limiting"  # ai-title
    assert main.session_id == "145d1213-c732-5068-9ff5-eef2735100ec"
    [agent_link] = main.links["subagents"]
    assert agent_link["agentId"] == "b41e9d0"
    assert Path(agent_link["file"]) == AGENT
    call_entry = main.get(agent_link["resultEntryId"])
    assert (
        call_entry is not None and call_entry.messages[0]["toolCallId"] == agent_link["toolUseId"]
    )
    agent = load_foreign(str(AGENT))
    assert agent.links["parent"]["toolUseId"] == agent_link["toolUseId"]
    assert Path(agent.links["parent"]["file"]) == RATE


def test_split_response_carries_its_usage_once() -> None:
    session = load_foreign(str(RATE))
    by_response: dict[str, list[dict]] = {}
    for record in session.entries():
        message = record.entry["message"] if record.entry["type"] == "message" else None
        if message and message.get("role") == "assistant":
            by_response.setdefault(message["responseId"], []).append(message["usage"])
    split = [usages for usages in by_response.values() if len(usages) > 1]
    assert split, "the fixture splits one response over several records"
    for usages in split:
        assert sum(1 for u in usages if u["totalTokens"]) == 1


def test_compaction_is_an_entry_with_its_summary_and_kept_messages() -> None:
    session = load_foreign(str(PRESERVED))
    boundary = session.get("cb")
    assert boundary is not None and boundary.entry["type"] == "compaction"
    assert boundary.entry["summary"].startswith("This session is being continued")
    assert boundary.entry["details"]["keptEntryIds"] == ["b2a", "b2u2", "b2a2"]
    assert boundary.entry["tokensBefore"] == 150000
    # What the model saw: the summary, the preserved messages, then what followed; nothing
    # from before the boundary that was not preserved.
    ids = [entry_id for entry_id, _ in session.context("p1a")]
    assert ids == ["cs", "b2a", "b2u2", "b2a2", "p1u", "p1a"]
    assert session.context_source() == "derived"


def test_tool_results_become_tool_result_messages_named_by_their_call() -> None:
    agent = load_foreign(str(AGENT))
    roles = [m["role"] for _, m in agent.context(agent.current_leaf)]
    assert roles == ["user", "assistant", "toolResult", "assistant"]
    call = agent.context(agent.current_leaf)[1][1]["content"][0]
    result = agent.context(agent.current_leaf)[2][1]
    assert call["type"] == "toolCall" and result["toolCallId"] == call["id"]
    assert result["toolName"] == call["name"]


def test_codex_rollback_branches_and_compaction_projects_the_replacement_history() -> None:
    session = load_foreign(str(ROLLBACK))
    assert session.leaves() == ["L20", "L38"]
    assert session.get("L26").parent == "L12"  # the rollback of one turn
    assert session.current_leaf == "L38"
    compaction = session.get("L32")
    assert compaction.entry["type"] == "compaction"
    assert "Summary" in compaction.entry["summary"]
    context = session.context("L38")
    assert [i for i, _ in context] == ["L32", "L32", "L35", "L38"]
    assert session.context_source() == "recorded"
    # The abandoned branch still sees its own turn and not the compaction.
    assert [i for i, _ in session.context("L20")][-2:] == ["L17", "L20"]


def test_codex_fork_and_spawn_links() -> None:
    fork = load_foreign(str(FORK))
    assert fork.session_id == "019a2000-0000-7000-8000-0000000000e2"  # the first session_meta
    assert fork.links["forkedFrom"] == {"threadId": "019a2000-0000-7000-8000-0000000000e1"}
    child = load_foreign(
        str(CODEX_LOG / "03/rollout-2026-01-03T04-05-10-33333333-3333-4333-8333-333333333333.jsonl")
    )
    assert child.links["spawnedBy"] == {
        "threadId": "22222222-2222-4222-8222-222222222222",
        "callId": "call-spawn-001",
    }


def test_codex_encrypted_reasoning_is_never_shown_and_unknown_records_are_kept() -> None:
    path = CODEX_LOG / "02/rollout-2026-01-02T03-04-05-11111111-1111-4111-8111-111111111111.jsonl"
    session = load_foreign(str(path))
    dumped = json.dumps([m for _, m in session.context(session.current_leaf)])
    assert "SYNTHETIC_ENCRYPTED_CONTENT_MUST_NOT_RENDER" not in dumped
    assert "I will inspect the synthetic directory." in dumped
    unknown = [r for r in session.records if r.record_type == "future_synthetic_record"]
    assert len(unknown) == 1 and unknown[0].kind == "unknown"
    assert session.raw(unknown[0]) == path.read_bytes().splitlines()[unknown[0].line - 1]
    outputs = [m for _, m in session.context(session.current_leaf) if m["role"] == "toolResult"]
    assert [m["toolName"] for m in outputs] == [
        "exec_command",
        "apply_patch",
        "mcp__synthetic__lookup",
    ]


def test_original_lines_are_kept_byte_for_byte() -> None:
    data = RATE.read_bytes()
    session = load_foreign(str(RATE))
    physical = data.split(b"\n")
    for record, raw in session.iter_raw():
        assert raw == physical[record.line - 1]
    assert session.original_bytes() == data


def test_detection_by_content_not_name() -> None:
    pi_header = b'{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/"}\n'
    assert detect_bytes(pi_header) == "pi"
    assert detect_bytes(ROLLBACK.read_bytes()) == "codex"
    assert detect_bytes(b"not json\n[1]\n" + RATE.read_bytes()) == "claude-code"
    assert detect_bytes(b'{"hello": "world"}\n') is None
    legacy = b'{"id":"abc","timestamp":"2025-05-01T00:00:00Z","instructions":""}\n{"record_type":"state"}\n{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}\n'
    assert detect_bytes(legacy) == "codex"
    session = load_foreign_bytes(legacy)
    assert [r.id for r in session.entries()] == ["L3"]
    with pytest.raises(ValueError, match="not a Pi, Claude Code or Codex"):
        load_foreign_bytes(b'{"hello": "world"}\n')


@pytest.mark.parametrize("rel", sorted(FACTS))
def test_pisession_stats_and_tree_of_every_example_file(rel: str) -> None:
    from tests.session.test_agent_generated import pisession

    expected = FACTS[rel]
    path = FIXTURES_DIR / rel
    lines = pisession("stats", path, "--all-leaves", "--json").stdout.splitlines()
    stats = {r["leafId"]: r["usage"] for r in map(json.loads, lines)}
    assert stats == {
        leaf: {
            "input": u["input"],
            "output": u["output"],
            "cacheRead": u["cache_read"],
            "cacheWrite": u["cache_write"],
        }
        for leaf, u in expected["usage"].items()
    }
    tree = json.loads(pisession("tree", path, "--json").stdout)
    stack, leaves = list(tree["roots"]), set()
    while stack:
        node = stack.pop()
        if not node["children"]:
            leaves.add(node["id"])
        stack.extend(node["children"])
    assert leaves == set(expected["leaves"])
    report = json.loads(pisession("validate", path, "--json", "--allow-warnings", code=-1).stdout)
    assert report["format"] == rel.split("/", 1)[0]


@pytest.mark.parametrize("rel", sorted(FACTS))
def test_pi_form_is_a_valid_pi_file_with_the_same_tree_and_usage(rel: str) -> None:
    from explorer.session.describe import usage_of
    from explorer.session.diagnostics import validate_bytes
    from explorer.session.formats.pi_form import pi_bytes
    from explorer.session.manager import SessionManager

    session = load_foreign(str(FIXTURES_DIR / rel))
    data = pi_bytes(session)
    assert pi_bytes(load_foreign(str(FIXTURES_DIR / rel))) == data  # deterministic
    assert [p for p in validate_bytes(data).problems if p.severity == "error"] == []
    manager = SessionManager.load_readonly(data)
    parents = {e.get("parentId") for e in manager.get_entries()}
    assert [e["id"] for e in manager.get_entries() if e["id"] not in parents] == session.leaves()
    for leaf in session.leaves():
        total = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
        for entry in manager.get_branch(leaf):
            for key in total:
                total[key] += (usage_of(entry) or {}).get(key, 0)
        assert total == session.route_usage(leaf)
        if session.format == "claude-code":
            # Pi's projection of the stored form is the engine's derived context (the summary
            # under its compaction's id).
            manager.branch(leaf)
            projected = [
                p.source_entry["id"]
                for p in manager.build_session_projection().entries
                for _ in p.messages
            ]
            boundary_of = {v: k for k, v in session.summary_of.items()}
            assert projected == [boundary_of.get(i, i) for i, _ in session.context(leaf)]


def test_a_pre_envelope_rollout_without_its_header_is_still_codex() -> None:
    lines = (
        b'{"record_type":"state"}\n'
        b'{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}\n'
        b'{"type":"function_call","name":"shell","arguments":"{}","call_id":"c1"}\n'
    )
    assert detect_bytes(lines) == "codex"
    session = load_foreign_bytes(lines)
    assert session.leaves() == ["L3"] and [r.id for r in session.route("L3")] == ["L2", "L3"]
    # A Claude Code record of the same type is not mistaken for one.
    assert detect_bytes(RATE.read_bytes()) == "claude-code"
