"""A running turn is resumable from any worker: a viewer who connects to the other worker
mid-turn gets the answer so far, then the following deltas."""

from __future__ import annotations

import json

import pytest

from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.live.server import LiveServer
from tests.live.wsclient import WSClient

pytestmark = [pytest.mark.needs_postgres, pytest.mark.needs_redis]

CHUNKS = [f"part{i} " for i in range(12)]


@pytest.fixture
def small_session_file(tmp_path, small_session_bytes):
    path = tmp_path / "small.jsonl"
    path.write_bytes(small_session_bytes)
    return path


async def open_viewer(url: str, pk: int, cookie: str, origin: str) -> tuple[WSClient, list]:
    """A connected viewer and the turn messages it got while connecting."""
    ws = await WSClient.connect(
        f"{url}/ws/sessions/{pk}/?format=json", origin=origin, cookie=cookie
    )
    await ws.send(json.dumps({"type": "resume", "after": "999999"}))
    early = []
    while (message := json.loads(await ws.recv(timeout=10)))["type"] != "resumed":
        if message["type"] == "turn":
            early.append(message)
    return ws, early


async def turn_messages(ws, *, until_deltas: int | None = None, seen=None) -> list[dict]:
    """Turn messages until the turn ends (or ``until_deltas`` deltas were seen)."""
    seen = list(seen or [])
    while True:
        text = await ws.recv(timeout=30)
        assert text is not None, f"viewer closed with {ws.close_code}"
        message = json.loads(text)
        if message["type"] != "turn":
            continue
        seen.append(message)
        deltas = [m for m in seen if m["event"] == "delta"]
        if message["event"] in ("end", "error"):
            return seen
        if until_deltas is not None and len(deltas) >= until_deltas:
            return seen


def text_of(messages: list[dict]) -> str:
    text = ""
    for m in messages:
        if m["event"] == "delta":
            assert m["offset"] == len(text), (m, text)  # contiguous, no gap, no repeat
            text += m["text"]
    return text


async def test_a_viewer_joining_mid_turn_on_the_other_worker_sees_the_stream_so_far(
    tmp_path, small_session_file
):
    with FakeOpenAIServer([Reply(chunks=CHUNKS, delay=0.25)]) as llm:
        # The team server's cache: Redis, shared by the workers (the suite's default is a
        # per-process memory cache).
        env = {"SESSIONS_LLM_BASE_URL": llm.base_url, "SESSIONS_LLM_MODEL": "fake-model",
               "SESSIONS_CACHE": "redis"}  # fmt: skip
        with LiveServer(tmp_path / "site", sessions=[str(small_session_file)], env=env,
                        workers=2) as server:  # fmt: skip
            pk = server.session_pks[0]
            cookie = server.cookie("vera")
            first, _ = await open_viewer(server.worker_ws(0), pk, cookie, server.worker_url(0))
            status, body = server.post("eddie", f"/sessions/{pk}/live/turn/", {"text": "Go"})
            assert status in (200, 202, 204), body
            early = await turn_messages(first, until_deltas=3)
            late, on_join = await open_viewer(server.worker_ws(1), pk, cookie, server.worker_url(1))
            joined = await turn_messages(late, seen=on_join)
            rest = await turn_messages(first)
            await first.close()
            await late.close()
    full = "".join(CHUNKS)
    assert text_of(early + rest) == full
    # A delta from the group may reach the socket before the catch-up; what counts is
    # what follows the "start" the joining worker sends with the text so far.
    starts = [i for i, m in enumerate(joined) if m["event"] == "start"]
    assert starts, joined
    joined = joined[starts[-1] :]
    so_far = [m for m in joined if m["event"] == "delta"][0]
    assert so_far["offset"] == 0 and len(so_far["text"]) >= len("".join(CHUNKS[:3]))
    assert len(so_far["text"]) < len(full)  # it joined mid-turn, not after the end
    assert text_of(joined) == full
    assert joined[-1]["event"] == "end"
