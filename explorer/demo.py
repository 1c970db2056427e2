"""Demo sessions written by the engine itself, so a new user sees a living app.

Everything goes through ``SessionManager`` (branches, tool calls and results, thinking, an
image, a compaction with a kept tail made by the embedded summarizer, a branch summary,
labels, a context edit, a session name). Clock and random source are fixed: the demo is the
same on every machine.
"""

from __future__ import annotations

import base64
import struct
import zlib
from collections.abc import Callable
from typing import Any

from explorer.session import ids
from explorer.session.compaction import append_compaction_result, compact, prepare_compaction
from explorer.session.manager import SessionManager
from explorer.session.summarizers import EmbeddedSummarizer
from explorer.session.tokens import CompactionSettings

START_MS = 1_764_403_200_000  # 2025-11-29T08:00:00Z


def _png(size: int = 16) -> str:
    """A small valid PNG (blue square with a white diagonal), base64-encoded."""
    rows = b""
    for y in range(size):
        row = bytearray([0])  # filter: none
        for x in range(size):
            row += bytes((255, 255, 255)) if abs(x - y) <= 1 else bytes((37, 99, 235))
        rows += bytes(row)

    def chunk(kind: bytes, body: bytes) -> bytes:
        return (
            struct.pack(">I", len(body))
            + kind
            + body
            + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
        )

    ihdr = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )
    return base64.b64encode(png).decode()


_PNG = _png()


class _Clock:
    def __init__(self, start: int) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 1_500
        return self.now

    def skip(self, ms: int) -> None:
        self.now += ms


def _usage(inp: int, out: int, read: int = 0) -> dict[str, Any]:
    cost_in, cost_out, cost_read = inp * 3e-6, out * 15e-6, read * 3e-7
    return {
        "input": inp,
        "output": out,
        "cacheRead": read,
        "cacheWrite": 0,
        "totalTokens": inp + out + read,
        "cost": {
            "input": round(cost_in, 6),
            "output": round(cost_out, 6),
            "cacheRead": round(cost_read, 6),
            "cacheWrite": 0,
            "total": round(cost_in + cost_out + cost_read, 6),
        },
    }


class _Writer:
    """Helpers that append Pi-shaped messages through the manager."""

    def __init__(
        self, manager: SessionManager, clock: _Clock, model: str = "claude-sonnet-4-5"
    ) -> None:
        self.m = manager
        self.clock = clock
        self.model = model
        self.calls = 0

    def user(self, content: Any) -> str:
        return self.m.append_message(
            {"role": "user", "content": content, "timestamp": self.clock.now + 1_500}
        )

    def system(self, content: str, **extra: Any) -> str:
        return self.m.append_message(
            {"role": "system", "content": content, **extra, "timestamp": self.clock.now}
        )

    def assistant(self, blocks: list[dict], *, stop: str = "stop", usage=(1200, 80)) -> str:
        return self.m.append_message(
            {
                "role": "assistant",
                "content": blocks,
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": self.model,
                "usage": _usage(*usage),
                "stopReason": stop,
                "timestamp": self.clock.now + 1_500,
            }
        )

    def tool(
        self,
        name: str,
        arguments: dict,
        result: str,
        *,
        thinking: str | None = None,
        text: str | None = None,
        is_error: bool = False,
        usage=(1500, 60),
    ) -> tuple[str, str]:
        self.calls += 1
        call_id = f"toolu_demo_{self.calls:03d}"
        blocks: list[dict] = []
        if thinking:
            blocks.append({"type": "thinking", "thinking": thinking})
        if text:
            blocks.append({"type": "text", "text": text})
        blocks.append({"type": "toolCall", "id": call_id, "name": name, "arguments": arguments})
        call = self.assistant(blocks, stop="toolUse", usage=usage)
        res = self.m.append_message(
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": name,
                "content": [{"type": "text", "text": result}],
                "isError": is_error,
                "timestamp": self.clock.now + 1_500,
            }
        )
        return call, res

    def say(self, text: str, *, thinking: str | None = None, usage=(1800, 120)) -> str:
        blocks: list[dict] = []
        if thinking:
            blocks.append({"type": "thinking", "thinking": thinking})
        blocks.append({"type": "text", "text": text})
        return self.assistant(blocks, usage=usage)


def _new(cwd: str, session_id: str, seed: str) -> tuple[SessionManager, _Clock]:
    clock = _Clock(START_MS)
    manager = SessionManager.in_memory(
        cwd, {"id": session_id}, clock=clock, rng=ids.deterministic_rng(seed)
    )
    return manager, clock


_TEST_FILE = """import pytest
from app.auth import login


def test_login_redirects(client, user):
    response = client.post("/login", {"user": user.name, "password": "secret"})
    assert response.status_code == 302
"""

_LOG = "\n".join(
    f"2025-11-28T22:{m:02d}:{s:02d}Z worker-{m % 3} session refresh ok latency={40 + (m * s) % 70}ms"
    for m in range(10, 40)
    for s in (5, 35)
)


def flaky_login_session() -> bytes:
    """A debugging session: branches, a compaction with a kept tail, a branch summary,
    labels, a context edit, an image and a name."""
    m, clock = _new("/home/demo/webapp", "019ac9a0-0000-7000-8000-00000000d001", "demo-1")
    w = _Writer(m, clock)
    w.system(
        "You are a careful coding assistant working in a Python web application.",
        sections={"style": "Answer briefly. Show commands you run.", "cwd": "/home/demo/webapp"},
        toolsAdded=[
            {
                "name": "read",
                "description": "Read a file",
                "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
            },
            {
                "name": "bash",
                "description": "Run a shell command",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
            {
                "name": "edit",
                "description": "Replace text in a file",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "old": {"type": "string"},
                        "new": {"type": "string"},
                    },
                },
            },
        ],
    )
    m.append_model_change("anthropic", "claude-sonnet-4-5")
    m.append_thinking_level_change("medium")
    first = w.user("The login test fails about one run in five on CI. Can you find out why?")
    w.tool(
        "bash",
        {"command": "pytest tests/test_login.py -x -q --count 20"},
        "....F...............\nFAILED tests/test_login.py::test_login_redirects - "
        "assert 200 == 302\n1 failed, 19 passed in 4.21s",
        thinking="A flaky redirect usually means shared state or time. Reproduce it first.",
        text="Let me reproduce it first.",
    )
    w.tool("read", {"path": "tests/test_login.py"}, _TEST_FILE)
    _call, big_log = w.tool(
        "bash",
        {"command": "tail -n 60 var/log/auth.log"},
        _LOG,
        thinking="The session refresh worker might race with the login.",
    )
    fork_point = w.say(
        "The test logs in while the **session refresh worker** may still be rotating the "
        "signing key. Two ways forward:\n\n1. freeze the clock in the test;\n"
        "2. make the worker finish rotation before the app accepts logins.",
        thinking="Option 2 is the real fix but larger; start with a quick experiment.",
    )
    m.append_label_change(first, "bug report")
    # Route A: freeze the clock (later abandoned with a branch summary).
    w.user("Try freezing the clock first.")
    w.tool(
        "edit",
        {
            "path": "tests/test_login.py",
            "old": "def test_login_redirects(client, user):",
            "new": '@freeze_time("2025-01-01")\ndef test_login_redirects(client, user):',
        },
        "Edited tests/test_login.py",
    )
    w.tool(
        "bash",
        {"command": "pytest tests/test_login.py -q --count 50"},
        "..........F.......................................\n1 failed, 49 passed",
        is_error=False,
    )
    abandoned = w.say(
        "Freezing the clock did not help: still 1 failure in 50. The race is not about wall time."
    )
    # Back to the fork point with a summary of what route A learned.
    m.branch_with_summary(
        fork_point,
        "The user explored a different conversation branch before returning here.\n"
        "Summary of that exploration:\n\n## Goal\nMake test_login_redirects stable.\n\n"
        "## Progress\n- Froze the clock with freeze_time in tests/test_login.py: still flaky "
        "(1 of 50 runs).\n\n## Key Decisions\n- Wall-clock time is not the cause.\n\n"
        "<modified-files>\ntests/test_login.py\n</modified-files>",
        {"readFiles": [], "modifiedFiles": ["tests/test_login.py"]},
        False,
    )
    w.user("Let's do the real fix: make the worker finish key rotation before logins.")
    w.tool(
        "read",
        {"path": "app/auth/worker.py"},
        "class RefreshWorker:\n    def start(self):\n        self.thread = Thread(target=self.rotate)\n"
        "        self.thread.start()\n",
    )
    w.tool(
        "edit",
        {
            "path": "app/auth/worker.py",
            "old": "        self.thread.start()\n",
            "new": "        self.thread.start()\n        self.ready.wait(timeout=5)\n",
        },
        "Edited app/auth/worker.py",
        thinking="Wait on an Event set after the first rotation.",
    )
    w.tool(
        "bash",
        {"command": "pytest tests/test_login.py -q --count 200"},
        "." * 200 + "\n200 passed in 31.02s",
        usage=(2400, 40),
    )
    w.say(
        "With the worker waiting for its first rotation, **200 of 200** runs pass.",
        usage=(2600, 90),
    )
    # The big log is no longer useful: replace it in what the model sees.
    m.append_context_edit(
        big_log, {"content": "(auth.log excerpt removed: 60 lines of routine refresh messages)"}
    )
    w.user(
        [
            {"type": "text", "text": "Here is the CI dashboard after the fix. Looks green?"},
            {"type": "image", "data": _PNG, "mimeType": "image/png"},
        ]
    )
    w.say(
        "Yes: the dashboard shows the job green. I'd keep the `--count 200` check in CI for a week."
    )
    # Compaction with a kept tail, made by the embedded summarizer.
    path = m.get_branch()
    prep = prepare_compaction(path, CompactionSettings(True, 16384, 600))
    if prep is not None:
        result = compact(prep, EmbeddedSummarizer(), clock=clock)
        append_compaction_result(m, result)
    w.user("Great. Write a short changelog entry.")
    w.say(
        "**Fixed:** login could fail while the session refresh worker rotated its signing "
        "key; the worker now finishes its first rotation before the app accepts logins."
    )
    m.append_session_info("Fix the flaky login test")
    del abandoned
    return m.to_bytes()


def data_pipeline_session() -> bytes:
    """A shorter session: an extension's custom message and state, a usage entry, two
    routes from the same question, labels."""
    m, clock = _new("/home/demo/pipeline", "019ac9a0-0000-7000-8000-00000000d002", "demo-2")
    w = _Writer(m, clock, model="gpt-5")
    m.append_model_change("openai", "gpt-5")
    w.system("You help with data engineering. Prefer SQL over pandas for large tables.")
    m.append_custom_entry("todo-list", {"items": [{"title": "profile nightly job", "done": False}]})
    question = w.user("Why does the nightly job take 40 minutes now? It used to take 5.")
    m.append_custom_message_entry(
        "reminder", "Remember: the warehouse is read-only between 01:00 and 03:00.", False
    )
    w.tool(
        "bash",
        {"command": "psql -c 'EXPLAIN ANALYZE SELECT * FROM events_daily'"},
        "Seq Scan on events (cost=0.00..2850000.00 rows=120000000)\nExecution Time: 2351234 ms",
        thinking="A sequential scan of 120M rows — an index was dropped?",
    )
    w.say(
        "The job scans the whole `events` table: the index on `day` is gone. Recreate it with "
        "`CREATE INDEX CONCURRENTLY events_day_idx ON events(day);`."
    )
    m.append_usage("cache_warm", "openai", "gpt-5", _usage(0, 0, 52000))
    # A second answer to the same question, on another route.
    m.branch(question)
    w.say(
        "Another angle: partition `events` by month so the nightly job touches one partition.",
        thinking="Partitioning is bigger but also bounds future growth.",
    )
    m.append_label_change(question, "performance")
    m.append_session_info("Nightly job got slow")
    return m.to_bytes()


DEMOS: list[tuple[str, Callable[[], bytes]]] = [
    ("demo:flaky-login.jsonl", flaky_login_session),
    ("demo:data-pipeline.jsonl", data_pipeline_session),
]


def load_demo(user=None) -> list:
    """Import the demo sessions (idempotent); returns the import results."""
    from explorer import services

    results = []
    for source, build in DEMOS:
        results.append(services.import_bytes(build(), source_path=source, user=user))
    return results
