"""End to end: daphne serving the site, a real OpenAI-compatible SSE server on 127.0.0.1,
real websocket clients, and follow mode fed by another process."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.live.server import LiveServer
from tests.live.wsclient import HandshakeRefused, WSClient

CHUNKS = ["Stream", "ing ", "through ", "daphne", " works", "."]


async def open_viewer(server: LiveServer, pk: int, user: str = "vera") -> WSClient:
    ws = await WSClient.connect(
        f"{server.ws_base}/ws/sessions/{pk}/?format=json",
        origin=server.base_url,
        cookie=server.cookie(user),
    )
    await ws.send(json.dumps({"type": "resume", "after": "999999"}))
    while json.loads(await ws.recv(timeout=10))["type"] != "resumed":
        pass
    return ws


async def read_turn(ws: WSClient, timeout: float = 20) -> list[dict]:
    seen = []
    while True:
        text = await ws.recv(timeout=timeout)
        assert text is not None, f"closed with {ws.close_code}"
        message = json.loads(text)
        seen.append(message)
        if message["type"] == "turn" and message["event"] in ("end", "error"):
            return seen


@pytest.fixture
def fake_llm():
    usage_small = {"prompt_tokens": 1200, "completion_tokens": 6, "total_tokens": 1206}
    usage_big = {"prompt_tokens": 3700, "completion_tokens": 8, "total_tokens": 3708}
    with FakeOpenAIServer(
        [
            Reply(chunks=CHUNKS, usage=usage_small, delay=0.02),
            Reply(chunks=["Big", " context."], usage=usage_big),
        ]
    ) as server:
        yield server


@pytest.fixture
def daphne(tmp_path, fake_llm, small_session_file):
    env = {
        "SESSIONS_LLM_BASE_URL": fake_llm.base_url,
        "SESSIONS_LLM_MODEL": "fake-model",
        "SESSIONS_CONTEXT_WINDOW": "4000",
        "SESSIONS_COMPACTION_RESERVE_TOKENS": "500",
        "SESSIONS_COMPACTION_KEEP_RECENT_TOKENS": "5",
    }
    with LiveServer(tmp_path / "site", sessions=[str(small_session_file)], env=env) as server:
        yield server


async def test_it_streams_a_turn_through_daphne_and_compacts_past_the_threshold(daphne, fake_llm):
    pk = daphne.session_pks[0]
    viewers = [await open_viewer(daphne, pk) for _ in range(2)]
    status, body = daphne.post("eddie", f"/sessions/{pk}/live/turn/", {"text": "Hello there"})
    assert status == 202, body
    streams = [await read_turn(ws) for ws in viewers]
    for seen in streams:
        sent = [m for m in seen if m["type"] == "turn" and m["event"] == "delta"]
        deltas = [m["text"] for m in sent]
        # In order and each once; the secret masking releases text a word at a time (it
        # holds back what could still be the start of a secret), so chunks may merge.
        assert "".join(deltas) == "".join(CHUNKS) and len(deltas) > 1
        offsets = [m["offset"] for m in sent]
        assert offsets == [sum(map(len, deltas[:k])) for k in range(len(deltas))]
        assert seen[-1]["stop_reason"] == "stop" and not seen[-1]["compacted"]
    entries = [e for m in streams[0] if m["type"] == "entries" for e in m["entries"]]
    assert [e["role"] for e in entries] == ["user", "assistant"]
    stored = daphne.entry(pk, entries[1]["id"])["message"]
    assert stored["content"] == [{"type": "text", "text": "".join(CHUNKS)}]
    assert stored["usage"]["input"] == 1200 and stored["usage"]["output"] == 6
    assert stored["stopReason"] == "stop"
    assert fake_llm.requests[0]["body"]["model"] == "fake-model"

    # The second answer reports a context past window - reserve: compaction follows by itself.
    status, _ = daphne.post("eddie", f"/sessions/{pk}/live/turn/", {"text": "More"})
    assert status == 202
    seen = await read_turn(viewers[0])
    assert seen[-1]["compacted"] is True
    types = [e["type"] for m in seen if m["type"] == "entries" for e in m["entries"]]
    assert types == ["message", "message", "compaction"]
    assert daphne.entries(pk)[-1]["type"] == "compaction"
    for ws in viewers:
        await ws.close()


async def test_a_busy_session_refuses_a_second_turn_over_http(daphne, fake_llm):
    pk = daphne.session_pks[0]
    import threading

    gate = threading.Event()

    def held(body):
        gate.wait(20)
        return Reply("done")

    fake_llm.script = [held]
    ws = await open_viewer(daphne, pk)
    status, _ = daphne.post("eddie", f"/sessions/{pk}/live/turn/", {"text": "one"})
    assert status == 202
    status, body = daphne.post("eddie", f"/sessions/{pk}/live/turn/", {"text": "two"})
    assert status == 409
    assert "already running" in body
    gate.set()
    seen = await read_turn(ws)
    assert seen[-1]["event"] == "end"
    await ws.close()


async def test_daphne_refuses_anonymous_and_foreign_origins(daphne):
    pk = daphne.session_pks[0]
    ws = await WSClient.connect(f"{daphne.ws_base}/ws/sessions/{pk}/", origin=daphne.base_url)
    assert await ws.recv(timeout=10) is None
    assert ws.close_code == 4401
    with pytest.raises(HandshakeRefused) as refused:
        await WSClient.connect(
            f"{daphne.ws_base}/ws/sessions/{pk}/",
            origin="http://evil.example",
            cookie=daphne.cookie("vera"),
        )
    assert refused.value.status == 403


def assistant_line(i: int) -> str:
    return json.dumps(
        {
            "type": "message",
            "id": f"a{i:07d}",
            "parentId": f"a{i - 1:07d}",
            "timestamp": "2025-03-04T05:06:09.000Z",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": f"part {i}"}],
                "api": "x",
                "provider": "p",
                "model": "m",
                "usage": {
                    "input": 1,
                    "output": 1,
                    "cacheRead": 0,
                    "cacheWrite": 0,
                    "totalTokens": 2,
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
                },
                "stopReason": "stop",
                "timestamp": 1741064769000,
            },
        },
        separators=(",", ":"),
    )


async def test_follow_mode_streams_what_another_process_writes(tmp_path):
    sessions_dir = tmp_path / "pi-sessions"
    project = sessions_dir / "--home-ana-proj--"
    project.mkdir(parents=True)
    path = project / "2025-03-04T05-06-07-089Z_0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a2b.jsonl"
    header = (
        '{"type":"session","version":3,"id":"0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a2b",'
        '"timestamp":"2025-03-04T05:06:07.089Z","cwd":"/home/ana/proj"}'
    )
    first = (
        '{"type":"message","id":"a0000001","parentId":null,"timestamp":"2025-03-04T05:06:08.000Z",'
        '"message":{"role":"user","content":"hi","timestamp":1741064768000}}'
    )
    path.write_text(header + "\n" + first + "\n")
    with LiveServer(tmp_path / "site", follow_dir=str(sessions_dir)) as server:
        pk = None
        deadline = time.monotonic() + 20
        while pk is None and time.monotonic() < deadline:
            with server.db() as conn:
                row = conn.execute(
                    "SELECT id FROM explorer_session WHERE state = 'ready'"
                ).fetchone()
            pk = row[0] if row else None
            time.sleep(0.05)
        assert pk is not None, server.log.read_text()
        ws = await open_viewer(server, pk)
        lines = [assistant_line(i) for i in range(2, 12)]
        # Another process writes the lines, each split in two writes with a pause between.
        writer = subprocess.Popen(
            [
                sys.executable,
                "-c",
                (
                    "import sys, time\n"
                    "path = sys.argv[1]\n"
                    "for line in sys.argv[2:]:\n"
                    "    with open(path, 'ab', buffering=0) as fh:\n"
                    "        data = (line + '\\n').encode()\n"
                    "        fh.write(data[:40]); time.sleep(0.15); fh.write(data[40:])\n"
                ),
                str(path),
                *lines,
            ]
        )
        received = []
        while len(received) < len(lines):
            text = await ws.recv(timeout=20)
            assert text is not None
            message = json.loads(text)
            if message["type"] == "entries":
                received.extend(e["id"] for e in message["entries"])
        assert writer.wait(timeout=20) == 0
        assert received == [f"a{i:07d}" for i in range(2, 12)]
        stored = server.entries(pk)
        assert [e["id"] for e in stored] == ["a0000001", *received]
        # A truncated file is reported and nothing is merged.
        path.write_text(header + "\n")
        time.sleep(0.5)
        assert "truncated" in server.log.read_text()
        assert len(server.entries(pk)) == 11
        await ws.close()
