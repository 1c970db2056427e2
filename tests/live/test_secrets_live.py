"""Live frames never carry a secret: daphne serving the site, a real websocket client, an
editor appending a label that holds a token while a viewer watches (JSON and htmx)."""

from __future__ import annotations

import json

import pytest

from tests.live.server import LiveServer
from tests.live.wsclient import WSClient
from tests.secrets.seeded import build_session, make_secrets


@pytest.fixture
def seeded_server(tmp_path):
    data, _, _ = build_session()
    path = tmp_path / "seeded.jsonl"
    path.write_bytes(data)
    with LiveServer(tmp_path / "site", sessions=[str(path)]) as server:
        yield server


async def frames_until(ws: WSClient, done, timeout: float = 20) -> list[str]:
    seen = []
    while True:
        text = await ws.recv(timeout=timeout)
        assert text is not None, f"closed with {ws.close_code}"
        seen.append(text)
        if done(text):
            return seen


async def test_live_frames_and_resumes_show_no_secret(seeded_server):
    server = seeded_server
    pk = server.session_pks[0]
    secrets = make_secrets()
    viewers = {}
    for fmt in ("json", "html"):
        ws = await WSClient.connect(
            f"{server.ws_base}/ws/sessions/{pk}/?format={fmt}"
            if fmt == "json"
            else f"{server.ws_base}/ws/sessions/{pk}/",
            origin=server.base_url,
            cookie=server.cookie("vera"),
        )
        viewers[fmt] = ws
    # the htmx viewer resumes from the start, so every stored entry comes as a fragment
    await viewers["html"].send(json.dumps({"type": "resume", "after": "0"}))
    resumed = await frames_until(viewers["html"], lambda t: "live-state" in t)
    await viewers["json"].send(json.dumps({"type": "resume", "after": "0"}))
    seen = await frames_until(viewers["json"], lambda t: json.loads(t)["type"] == "resumed")
    leaf = (
        server.db()
        .execute(
            "SELECT entry_id FROM explorer_entry WHERE session_id = ? ORDER BY position DESC",
            [pk],
        )
        .fetchone()[0]
    )
    token = secrets["slack-token"]
    status, body = server.post(
        "eddie", f"/sessions/{pk}/label/", {"target": leaf, "label": f"ops {token}"}
    )
    assert status in (200, 204, 302), body
    seen += await frames_until(viewers["json"], lambda t: json.loads(t)["type"] == "entries")
    appended = await frames_until(viewers["html"], lambda t: "[REDACTED:slack-token]" in t)
    assert "[REDACTED:" in "\n".join(resumed)  # the resume did carry masked text
    frames = "\n".join(seen + resumed + appended)
    entries = [e for t in seen for e in json.loads(t).get("entries", [])]
    assert len(entries) == 13 and entries[-1]["type"] == "label"  # 12 seeded + the label
    for kind, secret in {**secrets, "appended": token}.items():
        for piece in (secret, json.dumps(secret)[1:-1]):
            assert piece not in frames, kind
    # the stored label keeps the token: only what is shown is masked
    stored = (
        server.db()
        .execute(
            "SELECT raw FROM explorer_entry WHERE session_id = ? AND type = 'label' "
            "ORDER BY position DESC",
            [pk],
        )
        .fetchone()[0]
    )
    assert token in stored
    for ws in viewers.values():
        await ws.close()
