"""Generated Claude Code and Codex files of realistic shape, with the facts they must give.

Each generator writes a file the way the agent does (split responses, structural records,
compactions, rewinds or rollbacks, a sub-agent, a multi-MB tool result, damaged lines) and
tracks, while writing, what the reading rules must derive from it: every leaf's route, its
compaction count and its usage. The tests compare the engine's reading with these facts, which
are computed by construction here, not by the engine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BIG = 5 * 1024 * 1024


@dataclass
class Facts:
    """What a generated file must read as: leaf -> route, compactions, usage (Pi keys)."""

    routes: dict[str, list[str]] = field(default_factory=dict)
    compactions: dict[str, int] = field(default_factory=dict)
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    records: int = 0
    skipped_lines: list[int] = field(default_factory=list)


def _ts(n: int) -> str:
    return (
        f"2026-11-0{1 + n // 86400}T{(n // 3600) % 24:02d}:{(n // 60) % 60:02d}:{n % 60:02d}.000Z"
    )


def _add(total: dict[str, int], part: dict[str, int]) -> dict[str, int]:
    return {k: total[k] + part[k] for k in total}


ZERO = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}


class _Writer:
    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def put(self, value: Any) -> int:
        self.lines.append(json.dumps(value, separators=(",", ":")).encode())
        return len(self.lines)

    def put_raw(self, raw: bytes) -> int:
        self.lines.append(raw)
        return len(self.lines)


def claude_code_session(
    folder: Path,
    turns: int = 120,
    compact_at: tuple[int, ...] = (40, 80),
    rewind_at: int = 20,
    agent_at: int = 10,
    big_at: int = 30,
) -> tuple[Path, Facts, Path]:
    """A project folder with one main session and its sub-agent file; returns (main file,
    facts, agent file)."""
    session_id = "7d1c0c57-0000-4000-8000-00000000c0de"
    w = _Writer()
    facts = Facts()
    clock = [0]
    counter = [0]

    def uid(prefix: str) -> str:
        counter[0] += 1
        return f"{prefix}-{counter[0]:06d}"

    def base(kind: str, uuid: str, parent: str | None) -> dict[str, Any]:
        clock[0] += 7
        return {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/home/dev/generated",
            "sessionId": session_id,
            "version": "2.1.140",
            "gitBranch": "main",
            "type": kind,
            "uuid": uuid,
            "timestamp": _ts(clock[0]),
        }

    # State of the line being written: its tip, route, compactions and usage.
    tip: str | None = None
    route: list[str] = []
    compactions = 0
    usage = dict(ZERO)

    def conversation(record: dict[str, Any]) -> None:
        nonlocal tip
        w.put(record)
        facts.records += 1
        route.append(record["uuid"])
        tip = record["uuid"]

    def turn(n: int, *, agent: bool = False, big: bool = False) -> None:
        nonlocal usage, tip
        user = base("user", uid("u"), tip)
        user["message"] = {"role": "user", "content": f"turn {n}: please do step {n}"}
        conversation(user)
        # One response split over two records; the first holds a streaming snapshot.
        message_id = f"msg_{n:05d}"
        final = {
            "input_tokens": 3,
            "output_tokens": 40 + n,
            "cache_read_input_tokens": 1000 * n,
            "cache_creation_input_tokens": 200,
        }
        snapshot = dict(final, output_tokens=1)
        tool_id = f"toolu_{n:05d}"
        for i, (block, use) in enumerate(
            [
                ({"type": "thinking", "thinking": f"think {n}", "signature": "sig"}, snapshot),
                (
                    {
                        "type": "tool_use",
                        "id": tool_id,
                        "name": "Task" if agent else "Bash",
                        "input": {"prompt": "look"} if agent else {"command": f"echo {n}"},
                    },
                    final,
                ),
            ]
        ):
            record = base("assistant", uid("a"), tip)
            record["requestId"] = f"req_{n:05d}"
            record["message"] = {
                "model": "claude-sonnet-4-5-20250929",
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "content": [block],
                "stop_reason": None if i == 0 else "tool_use",
                "usage": use,
            }
            conversation(record)
        usage = _add(
            usage,
            {"input": 3, "output": 40 + n, "cacheRead": 1000 * n, "cacheWrite": 200},
        )
        result = base("user", uid("r"), tip)
        output = ("x" * BIG) if big else f"{n}"
        result["message"] = {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": output}],
        }
        result["toolUseResult"] = (
            {"status": "completed", "agentId": "a9e7", "totalTokens": 999}
            if agent
            else {"stdout": output[:20], "stderr": "", "interrupted": False}
        )
        conversation(result)
        # A structural progress record between the result and the answer (R3/R7).
        progress = base("progress", uid("p"), tip)
        progress["data"] = {"type": "hook_progress"}
        w.put(progress)
        answer = base("assistant", uid("a"), progress["uuid"])
        answer["message"] = {
            "model": "claude-sonnet-4-5-20250929",
            "id": f"msg_{n:05d}_b",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": f"done {n}"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 2, "output_tokens": 5, "cache_read_input_tokens": 10},
        }
        w.put(answer)
        facts.records += 1
        route.append(answer["uuid"])
        tip = answer["uuid"]
        usage = _add(usage, {"input": 2, "output": 5, "cacheRead": 10, "cacheWrite": 0})

    w.put({"type": "summary", "summary": "Generated work", "leafUuid": "nowhere"})
    for n in range(1, turns + 1):
        if n == rewind_at:
            # The user rewinds: this turn is written, then abandoned for another child of
            # the same parent.
            saved = (tip, list(route), compactions, dict(usage))
            turn(n)
            assert tip is not None
            facts.routes[tip] = list(route)
            facts.compactions[tip] = compactions
            facts.usage[tip] = dict(usage)
            tip, route, compactions, usage = saved[0], saved[1], saved[2], saved[3]
        if n in compact_at:
            boundary = base("system", uid("cb"), None)
            boundary.update(
                {
                    "subtype": "compact_boundary",
                    "content": "Conversation compacted",
                    "level": "info",
                    "logicalParentUuid": tip,
                    "compactMetadata": {"trigger": "auto", "preTokens": 150000 + n},
                }
            )
            conversation(boundary)
            compactions += 1
            summary = base("user", uid("s"), tip)
            summary["isCompactSummary"] = True
            summary["message"] = {"role": "user", "content": f"Summary before turn {n}."}
            conversation(summary)
        if n == turns // 2:
            w.put_raw(b'{"type":"user","uuid":"broken')  # damaged in the middle
            facts.skipped_lines.append(len(w.lines))
            w.put_raw(b'"a string, not an object"')
            facts.skipped_lines.append(len(w.lines))
            # A re-appended copy of an early record (same uuid): ignored (R2).
            w.put_raw(w.lines[2])
        turn(n, agent=n == agent_at, big=n == big_at)
    assert tip is not None
    facts.routes[tip] = list(route)
    facts.compactions[tip] = compactions
    facts.usage[tip] = dict(usage)
    w.put({"type": "ai-title", "aiTitle": "Generated session", "sessionId": session_id})
    truncated = b'{"parentUuid":"' + tip.encode() + b'","type":"assistant","uuid":"half'
    w.put_raw(truncated)
    facts.skipped_lines.append(len(w.lines))

    folder.mkdir(parents=True, exist_ok=True)
    main = folder / f"{session_id}.jsonl"
    main.write_bytes(b"\n".join(w.lines))  # no final newline: the crash left half a line
    agents = folder / session_id / "subagents"
    agents.mkdir(parents=True, exist_ok=True)
    agent_lines = []
    parent = None
    for i in range(4):
        record = base("user" if i % 2 == 0 else "assistant", f"ag-{i}", parent)
        record.update({"isSidechain": True, "agentId": "a9e7"})
        if i % 2 == 0:
            record["message"] = {"role": "user", "content": f"agent step {i}"}
        else:
            record["message"] = {
                "model": "claude-haiku-4-5",
                "id": f"msg_ag_{i}",
                "type": "message",
                "role": "assistant",
                "content": [{"type": "text", "text": f"agent answer {i}"}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 10, "output_tokens": 20},
            }
        agent_lines.append(json.dumps(record))
        parent = record["uuid"]
    agent = agents / "agent-a9e7.jsonl"
    agent.write_text("\n".join(agent_lines) + "\n")
    (agents / "agent-a9e7.meta.json").write_text(
        json.dumps({"agentType": "Explore", "description": "Look", "toolUseId": "toolu_00010"})
    )
    return main, facts, agent


def codex_session(
    folder: Path,
    turns: int = 120,
    compact_at: tuple[int, ...] = (40, 80),
    rollback_at: int = 20,
    big_at: int = 30,
) -> tuple[Path, Facts]:
    """A rollout under sessions/YYYY/MM/DD with rollbacks, compactions (one encrypted), a
    5 MB tool output, repeated token counts and damaged lines."""
    thread = "019b0000-0000-7000-8000-00000000c0de"
    w = _Writer()
    facts = Facts()
    clock = [0]

    def envelope(kind: str, payload: dict[str, Any]) -> int:
        clock[0] += 3
        return w.put({"timestamp": _ts(clock[0]), "type": kind, "payload": payload})

    tip: str | None = None
    route: list[str] = []
    compactions = 0
    usage = dict(ZERO)
    total = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0, "total_tokens": 0}

    def item(payload: dict[str, Any]) -> None:
        nonlocal tip
        line = envelope("response_item", payload)
        facts.records += 1
        tip = f"L{line}"
        route.append(tip)

    def count(last: dict[str, int]) -> None:
        nonlocal usage
        for key in total:
            total[key] += last.get(key, 0)
        info = {"total_token_usage": dict(total), "last_token_usage": last}
        envelope("event_msg", {"type": "token_count", "info": info, "rate_limits": None})
        usage = _add(
            usage,
            {
                "input": last["input_tokens"] - last["cached_input_tokens"],
                "output": last["output_tokens"],
                "cacheRead": last["cached_input_tokens"],
                "cacheWrite": 0,
            },
        )

    envelope(
        "session_meta",
        {
            "id": thread,
            "timestamp": _ts(0),
            "cwd": "/home/dev/generated",
            "originator": "codex_cli_rs",
            "cli_version": "0.150.0",
            "source": "cli",
            "model_provider": "openai",
        },
    )
    item(
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "<environment_context>x</environment_context>"}
            ],
        }
    )

    def turn(n: int) -> None:
        envelope("event_msg", {"type": "task_started", "turn_id": f"t{n}"})
        envelope("turn_context", {"turn_id": f"t{n}", "model": "gpt-5.1-codex", "cwd": "/"})
        item(
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": f"turn {n}"}],
            }
        )
        envelope("event_msg", {"type": "user_message", "message": f"turn {n}"})
        item(
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": f"plan {n}"}],
                "content": None,
                "encrypted_content": "gAAAA-secret",
            }
        )
        item(
            {
                "type": "function_call",
                "name": "shell",
                "arguments": json.dumps({"command": ["echo", str(n)]}),
                "call_id": f"call_{n}",
            }
        )
        output = ("y" * BIG) if n == big_at else str(n)
        item({"type": "function_call_output", "call_id": f"call_{n}", "output": output})
        count({"input_tokens": 900 + n, "cached_input_tokens": 800, "output_tokens": 30})
        item(
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": f"done {n}"}],
            }
        )
        count({"input_tokens": 950 + n, "cached_input_tokens": 900, "output_tokens": 10})
        # The same cumulative total again (a rate-limit refresh): not counted (X6).
        info = {"total_token_usage": dict(total), "last_token_usage": {"input_tokens": 5}}
        envelope("event_msg", {"type": "token_count", "info": info})
        envelope("event_msg", {"type": "token_count", "info": None})
        envelope("event_msg", {"type": "task_complete", "turn_id": f"t{n}"})

    for n in range(1, turns + 1):
        if n == rollback_at:
            saved = (list(route), compactions, dict(usage))
            turn(n)
            assert tip is not None
            facts.routes[tip] = list(route)
            facts.compactions[tip] = compactions
            facts.usage[tip] = dict(usage)
            envelope("event_msg", {"type": "thread_rolled_back", "num_turns": 1})
            route, compactions, usage = saved
            tip = route[-1]
        if n in compact_at:
            history: list[dict[str, Any]] = [
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": f"turn {n - 1}"}],
                }
            ]
            if n == compact_at[0]:
                history.append({"type": "compaction", "encrypted_content": "gAAAA-compacted"})
            else:
                history.append(
                    {
                        "type": "message",
                        "role": "user",
                        "content": [{"type": "input_text", "text": f"Summary before {n}"}],
                    }
                )
            line = envelope("compacted", {"message": "", "replacement_history": history})
            facts.records += 1
            tip = f"L{line}"
            route.append(tip)
            compactions += 1
        if n == turns // 2:
            w.put_raw(b'{"timestamp":"x","type":"response_item","payload":{"type":')
            facts.skipped_lines.append(len(w.lines))
            w.put_raw(b"[1, 2, 3]")
            facts.skipped_lines.append(len(w.lines))
        turn(n)
    assert tip is not None
    facts.routes[tip] = list(route)
    facts.compactions[tip] = compactions
    facts.usage[tip] = dict(usage)
    w.put_raw(b'{"timestamp":"2026-11-09T00:00:00.000Z","type":"event_msg","payl')
    facts.skipped_lines.append(len(w.lines))
    day = folder / "sessions" / "2026" / "11" / "01"
    day.mkdir(parents=True, exist_ok=True)
    path = day / f"rollout-2026-11-01T00-00-00-{thread}.jsonl"
    path.write_bytes(b"\n".join(w.lines))
    return path, facts
