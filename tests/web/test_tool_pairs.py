"""A tool result is paired with its call by id on its route, not by its parent.

Claude Code writes each content block of a response as a record of its own and each result
as another, so two parallel calls are two assistant entries followed by two results (the
first result's parent is the *second* call, with a progress record between them); Codex
writes each call and each output as its own item; a Pi reply with two calls is followed by
both results in a chain. Every page that pairs (the entry panel's "Result of" and its
call's "result in", the Transcript, the HTML export) follows one rule
(``analysis.tool_pairs.find_call``): the nearest assistant above the result holding a call
with that id, within its turn, looked for at most ``MAX_STEPS`` entries up.

The Claude Code and Codex cases are the shared examples rewritten into that shape (a copy in
the test's folder: the examples hold one call per reply).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.urls import reverse

from explorer import agent_import, items, queries, services
from explorer.analysis.tool_pairs import MAX_STEPS, find_call
from explorer.models import Entry, Session
from tests.conftest import FIXTURES_DIR

pytestmark = pytest.mark.django_db

CLAUDE = FIXTURES_DIR / "claude-code/own/rate-limit/145d1213-c732-5068-9ff5-eef2735100ec.jsonl"
CODEX = (
    FIXTURES_DIR / "codex/own/sessions/2026/10/12/"
    "rollout-2026-10-12T10-00-00-019a2000-0000-7000-8000-0000000000e1.jsonl"
)
TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


def _dump(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records)


def _claude_parallel(tmp_path: Path) -> Path:
    """The Claude Code example with its one call made two parallel calls: call E1, call E2
    (same response), a progress record, E1's result, E2's result, then the reply."""
    records = [json.loads(line) for line in CLAUDE.read_text(encoding="utf-8").splitlines()]
    call = next(r for r in records if "toolu_E1" in json.dumps(r) and r["type"] == "assistant")
    result = next(r for r in records if "toolu_E1" in json.dumps(r) and r["type"] == "user")
    after = next(r for r in records if r.get("parentUuid") == result["uuid"])
    second = json.loads(json.dumps(call))
    second["uuid"] = "c2c2c2c2-0000-4000-8000-000000000002"
    second["parentUuid"] = call["uuid"]
    second["message"]["content"] = [
        {"type": "tool_use", "id": "toolu_E2", "name": "Read",
         "input": {"file_path": "/srv/app/limits.py"}}
    ]  # fmt: skip
    progress = {"type": "progress", "uuid": "d3d3d3d3-0000-4000-8000-000000000003",
                "parentUuid": second["uuid"], "sessionId": call.get("sessionId"),
                "timestamp": call.get("timestamp"), "data": {"type": "hook_progress"}}  # fmt: skip
    result["parentUuid"] = progress["uuid"]
    result2 = json.loads(json.dumps(result))
    result2["uuid"] = "e4e4e4e4-0000-4000-8000-000000000004"
    result2["parentUuid"] = result["uuid"]
    result2["message"]["content"] = [
        {"type": "tool_result", "tool_use_id": "toolu_E2", "content": "LIMIT = 100"}
    ]
    after["parentUuid"] = result2["uuid"]
    out: list[dict[str, Any]] = []
    for r in records:
        out.append(r)
        if r is call:
            out += [second, progress]
        if r is result:
            out.append(result2)
    path = tmp_path / CLAUDE.name
    path.write_text(_dump(out), encoding="utf-8")
    return path


def _codex_parallel(tmp_path: Path) -> Path:
    """The Codex example with a second call between its call and its output, and the
    second output after the first."""
    lines = CODEX.read_text(encoding="utf-8").splitlines()
    out: list[str] = []
    for line in lines:
        value = json.loads(line)
        payload = value.get("payload") or {}
        if payload.get("type") == "function_call_output" and payload.get("call_id") == "call_1":
            second = {"type": "function_call", "name": "shell", "call_id": "call_2",
                      "arguments": json.dumps({"command": ["bash", "-lc", "cat VERSION"]})}  # fmt: skip
            out.append(json.dumps({**value, "payload": second}))
            out.append(line)
            output = {"type": "function_call_output", "call_id": "call_2", "output": "1.3.0"}
            out.append(json.dumps({**value, "payload": output}))
            continue
        out.append(line)
    path = tmp_path / CODEX.name
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path


def _rows(session: Session) -> dict[str, dict]:
    return {
        eid: json.loads(raw)
        for eid, raw in Entry.objects.filter(session=session).values_list("entry_id", "raw")
    }


def _calls_and_results(session: Session) -> dict[str, tuple[str, str]]:
    """call id → (entry holding the call, entry holding its result), from the stored lines."""
    calls: dict[str, str] = {}
    results: dict[str, str] = {}
    for eid, value in _rows(session).items():
        message = value.get("message") or {}
        if message.get("role") == "toolResult":
            results[message["toolCallId"]] = eid
        for block in message.get("content") or [] if message.get("role") == "assistant" else []:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                calls[block["id"]] = eid
    return {cid: (calls[cid], results[cid]) for cid in calls if cid in results}


def _panel(client, session: Session, entry_id: str) -> str:
    r = client.get(reverse("explorer:entry", args=[session.pk]), {"id": entry_id})
    assert r.status_code == 200
    return r.content.decode()


def _result_of(html: str) -> tuple[str, str] | None:
    """(tool name, call's entry id) of the panel's "Result of" line, or None."""
    m = re.search(r'Result of</span> <strong>([^<]*)</strong>.*?called in</span> <a class="mono"'
                  r'[^>]*>([^<]*)</a>', html, re.S)  # fmt: skip
    return (m.group(1), m.group(2)) if m else None


def _result_in(html: str) -> list[str]:
    """The result entry ids the panel's calls show ("result in ID")."""
    return re.findall(r'result in <a class="mono"[^>]*>([^<]*)</a>', html)


def _export_rows(client, session: Session) -> list[dict]:
    r = client.get(reverse("explorer:export_html", args=[session.pk]))
    assert r.status_code == 200
    body = b"".join(r.streaming_content).decode() if r.streaming else r.content.decode()
    chunks = re.findall(r'<script type="application/json" class="x-rows">(.*?)</script>', body)
    return [row for chunk in chunks for row in json.loads(chunk)]


def assert_pairs_shown(client, session: Session, expect: dict[str, tuple[str, str]]) -> None:
    """Every page pairs each call of ``expect`` (call id → (call entry, result entry)) with
    its result: the result's panel says "Result of" that call, the call's panel shows the
    result, the Transcript draws the result inside the call's card and the export too."""
    names = {}
    for cid, (call_entry, result_entry) in expect.items():
        message = _rows(session)[call_entry]["message"]
        names[cid] = next(b["name"] for b in message["content"] if b.get("id") == cid)
        assert _result_of(_panel(client, session, result_entry)) == (names[cid], call_entry)
        assert result_entry in _result_in(_panel(client, session, call_entry))
    for _call_entry, result_entry in expect.values():
        page = client.get(
            reverse("explorer:transcript", args=[session.pk]), {"leaf": result_entry}
        ).content.decode()
        # The result's output sits in the call's card, its own card is the stub.
        assert f'id="r-{items.html.dom_id(result_entry)}"' in page
        assert "tool result shown with its call above" in page
    rows = {row["id"]: row for row in _export_rows(client, session)}
    for call_entry, result_entry in expect.values():
        assert rows[result_entry].get("pt") == call_entry
        assert f'data-result="{result_entry}"' in rows[call_entry]["h"]


@pytest.mark.agent_fixtures
def test_claude_code_parallel_calls_are_paired_by_id(tmp_path, viewer_client):
    agent_import.import_agent_file(str(_claude_parallel(tmp_path)))
    session = Session.objects.get(agent="claude-code")
    pairs = _calls_and_results(session)
    assert set(pairs) == {"toolu_E1", "toolu_E2"}
    (_call_1, result_1), (call_2, result_2) = pairs["toolu_E1"], pairs["toolu_E2"]
    parents = dict(Entry.objects.filter(session=session).values_list("entry_id", "parent_id"))
    # The shape this is about: neither result's parent is its call.
    assert parents[result_1] == call_2 and parents[result_2] == result_1
    assert_pairs_shown(viewer_client, session, pairs)
    # The Integrity tab's "tool results without their call" follows the same rule.
    assert queries.unmatched_tool_results(session) == []


@pytest.mark.agent_fixtures
def test_codex_parallel_calls_are_paired_by_id(tmp_path, viewer_client):
    agent_import.import_agent_file(str(_codex_parallel(tmp_path)))
    session = Session.objects.get(agent="codex")
    pairs = _calls_and_results(session)
    assert set(pairs) == {"call_1", "call_2"}
    parents = dict(Entry.objects.filter(session=session).values_list("entry_id", "parent_id"))
    assert parents[pairs["call_1"][1]] == pairs["call_2"][0]
    assert parents[pairs["call_2"][1]] == pairs["call_1"][1]
    assert_pairs_shown(viewer_client, session, pairs)
    assert queries.unmatched_tool_results(session) == []


HEADER = b'{"type":"session","version":3,"id":"s-pairs","timestamp":"t","cwd":"/w"}\n'


def _message(eid: str, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "id": eid, "parentId": parent,
            "timestamp": "2025-03-04T05:06:07.000Z", "message": {"timestamp": 1, **message}}  # fmt: skip


def _user(eid: str, parent: str | None, text: str) -> dict[str, Any]:
    return _message(eid, parent, {"role": "user", "content": text})


def _calls(eid: str, parent: str, calls: list[tuple[str, str, dict]]) -> dict[str, Any]:
    content = [{"type": "toolCall", "id": c, "name": n, "arguments": a} for c, n, a in calls]
    return _message(eid, parent, {"role": "assistant", "content": content,
                                  "stopReason": "toolUse"})  # fmt: skip


def _result(eid: str, parent: str, call_id: str, text: str) -> dict[str, Any]:
    return _message(eid, parent, {"role": "toolResult", "toolCallId": call_id, "toolName": "bash",
                                  "content": [{"type": "text", "text": text}],
                                  "isError": False})  # fmt: skip


def _pi(entries: list[dict[str, Any]]) -> Session:
    data = HEADER + b"".join(json.dumps(e).encode() + b"\n" for e in entries)
    result = services.import_bytes(data)
    assert result.ok, [str(p) for p in result.problems]
    return result.session


def test_pi_parallel_calls_pair_and_a_secret_stays_masked(viewer_client):
    """A Pi reply with two calls, then both results in a chain: the second result's parent
    is the first result, and its call's arguments (holding a token) show masked."""
    session = _pi([
        _user("u1", None, "look"),
        _calls("a1", "u1", [("c-1", "bash", {"command": "ls"}),
                            ("c-2", "bash", {"command": f"curl -H 'token: {TOKEN}' x"})]),
        _result("r1", "a1", "c-1", "one"),
        _result("r2", "r1", "c-2", "two"),
        _message("a2", "r2", {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}),
    ])  # fmt: skip
    assert_pairs_shown(viewer_client, session, {"c-1": ("a1", "r1"), "c-2": ("a1", "r2")})
    panel = _panel(viewer_client, session, "r2")
    assert "curl -H" in panel and TOKEN not in panel
    # The panel names the role as the tree and the Transcript do.
    assert 'title="toolResult">tool result</span>' in panel
    # The secret is in the stored line: masking, not absence, keeps it off the page.
    assert TOKEN in Entry.objects.get(session=session, entry_id="a1").raw


def test_a_result_whose_call_is_above_the_transcript_window_says_result_of(viewer_client):
    """The Transcript's window starting at a result (its call on the previous page), and the
    live rows of a newly arrived result, show a "Result of" line with the call's files."""
    session = _pi([
        _user("u1", None, "look"),
        _calls("a1", "u1", [("c-1", "read", {"path": "notes.md"}),
                            ("c-2", "read", {"path": f"/tmp/{TOKEN}/key"})]),
        _result("r1", "a1", "c-1", "one"),
        _result("r2", "r1", "c-2", "two"),
    ])  # fmt: skip
    rmap = queries.route_map(session, "r2")
    start = rmap.ids.index("r1")
    shown = items.window_items(session, rmap, start, len(rmap.ids), target=None, leaf_q=None)
    by_id = {it["id"]: it for it in shown}
    for eid, path in (("r1", "notes.md"), ("r2", None)):
        of = by_id[eid]["result_of"]
        assert of["entry_id"] == "a1" and of["name"] == "read"
        if path:
            assert of["files"] == [{"kind": "read", "path": path}]
        else:
            assert TOKEN not in json.dumps(of) and of["files"][0]["path"].startswith("/tmp/")
        assert "paired_to" not in by_id[eid]
    html = str(items.shared_rows(session, shown)[1])
    assert "Result of</span> <strong>read</strong>" in html and "#a1" in html
    assert TOKEN not in html


def test_a_call_id_that_names_nothing_shows_no_line(viewer_client):
    """A result whose id names no call of its turn (only one of an older turn, before a
    user message) shows no "Result of" line, and the pages still draw it."""
    session = _pi([
        _user("u0", None, "before"),
        _calls("a0", "u0", [("c-404", "bash", {"command": "pwd"})]),
        _result("r0", "a0", "c-404", "older"),
        _user("u1", "r0", "look"),
        _calls("a1", "u1", [("c-1", "bash", {"command": "ls"})]),
        _result("r1", "a1", "c-404", "stray"),
        _result("r2", "r1", "c-1", "one"),
    ])  # fmt: skip
    stray = _panel(viewer_client, session, "r1")
    assert _result_of(stray) is None and "stray" in stray
    assert _result_of(_panel(viewer_client, session, "r2")) == ("bash", "a1")
    assert _result_in(_panel(viewer_client, session, "a1")) == ["r2"]
    page = viewer_client.get(reverse("explorer:transcript", args=[session.pk]), {"leaf": "r2"})
    assert page.status_code == 200 and "stray" in page.content.decode()
    assert [f["id"] for f in queries.unmatched_tool_results(session)] == ["r1"]


def test_a_reused_call_id_pairs_within_its_own_turn(viewer_client):
    """Some providers number calls anew in each reply: ``call_0`` of the second turn answers
    the second turn's call, and the first turn's call keeps its own result."""
    session = _pi([
        _user("u1", None, "first"),
        _calls("a1", "u1", [("call_0", "bash", {"command": "ls one"})]),
        _result("r1", "a1", "call_0", "first output"),
        _user("u2", "r1", "second"),
        _calls("a2", "u2", [("call_0", "bash", {"command": "ls two"})]),
        _message("a3", "a2", {"role": "assistant", "content": [{"type": "text", "text": "hm"}]}),
        _result("r2", "a3", "call_0", "second output"),
    ])  # fmt: skip
    assert _result_of(_panel(viewer_client, session, "r2")) == ("bash", "a2")
    assert _result_of(_panel(viewer_client, session, "r1")) == ("bash", "a1")
    assert _result_in(_panel(viewer_client, session, "a1")) == ["r1"]
    assert _result_in(_panel(viewer_client, session, "a2")) == ["r2"]
    rmap = queries.route_map(session, "r2")
    shown = items.window_items(session, rmap, 0, len(rmap.ids), target=None, leaf_q=None)
    paired = {
        it["id"]: b["paired"]["id"]
        for it in shown
        for b in it["blocks"]
        if b["kind"] == "toolCall" and b.get("paired")
    }
    assert paired == {"a1": "r1", "a2": "r2"}


def test_the_walk_stops_at_a_user_message_and_after_max_steps():
    """The rule reads ancestors lazily and stops: at the first user message (an older
    turn's call is not this result's), and after ``MAX_STEPS`` entries."""
    read: list[str] = []

    def ancestors(roles: list[str]):
        for k, role in enumerate(roles):
            read.append(role)
            yield f"e{k}", role

    holds = {"e3": {"x"}}
    assert find_call("x", ancestors(["toolResult", "assistant", "custom", "assistant"]),
                     lambda e: holds.get(e, set())) == "e3"  # fmt: skip
    read.clear()
    assert find_call("x", ancestors(["assistant", "user", "custom", "assistant"]),
                     lambda e: holds.get(e, set())) is None  # fmt: skip
    assert read == ["assistant", "user"]
    read.clear()
    far = ["toolResult"] * MAX_STEPS + ["assistant"]
    holds = {f"e{MAX_STEPS}": {"x"}}
    assert find_call("x", ancestors(far), lambda e: holds.get(e, set())) is None
    assert len(read) == MAX_STEPS + 1
    assert find_call("", ancestors(["assistant"]), lambda e: {""}) is None


def test_result_of_reads_index_rows_not_the_results_between(viewer_client):
    """The walk from a second result to its call passes the first result, a big line: it
    reads that entry's index row (role, parent), never its raw line, and stops at the call."""
    big = "x" * 300_000
    session = _pi([
        _user("u1", None, "look"),
        _calls("a1", "u1", [("c-1", "bash", {"command": "ls"}),
                            ("c-2", "bash", {"command": "pwd"})]),
        _result("r1", "a1", "c-1", big),
        _result("r2", "r1", "c-2", "two"),
    ])  # fmt: skip
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    cache.clear()
    with CaptureQueriesContext(connection) as seen:
        panel = _panel(viewer_client, session, "r2")
    assert _result_of(panel) == ("bash", "a1")
    raw_reads = [q["sql"] for q in seen.captured_queries if '"raw"' in q["sql"]]
    assert raw_reads and not any("'r1'" in q for q in raw_reads), raw_reads
    assert any("'a1'" in q for q in raw_reads)
