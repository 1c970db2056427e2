"""The broadcast worker: frames rendered once, after the write returned; entries on other
branches are counted, not drawn; exactly once and in order with two writers (real daphne)."""

from __future__ import annotations

import asyncio
import json
import re
import threading

import pytest
from channels.db import database_sync_to_async

from explorer import broadcast
from tests.live.conftest import close_all, frames_for, settled
from tests.live.server import LiveServer
from tests.live.wsclient import WSClient, json_viewer

pytestmark = pytest.mark.django_db(transaction=True)

TIP = "1b2c3d4e"  # the small session's newest entry (its file leaf)
OTHER = "e5f6a7b8"  # the leaf of its other branch


def append(session, user, leaf: str, text: str):
    from explorer import services

    message = {"role": "user", "content": text, "timestamp": 1741064900000}
    return services.append_message(session, user, message, leaf_id=leaf, source="edit").entry


@pytest.fixture
def stored(make_session):
    return make_session()


async def html_viewer(ws_connect, session, user, tip: str = TIP):
    comm, connected, _ = await ws_connect(f"/ws/sessions/{session.pk}/", user=user)
    assert connected
    await comm.send_to(
        text_data=json.dumps({"type": "resume", "after": tip, "tip": tip, "follow": True})
    )
    assert 'id="live-state"' in await comm.receive_from(timeout=5)
    return comm


async def next_frame(comm) -> str:
    """The next frame about arrivals (skipping the live meter)."""
    while True:
        frame = await comm.receive_from(timeout=10)
        if 'id="live-state"' in frame:
            return frame


async def test_entries_on_another_branch_are_counted_without_a_route_rebuild(
    ws_connect, stored, viewer_user, editor_user, monkeypatch
):
    from explorer import consumers

    swaps = []
    real_swap = consumers._window_swap
    monkeypatch.setattr(
        consumers, "_window_swap", lambda *a: swaps.append(a) or real_swap(*a)
    )  # fmt: skip
    viewers = [await html_viewer(ws_connect, stored, viewer_user) for _ in range(2)]
    parent = OTHER
    walks = []
    for i in range(3):
        before = broadcast.route_walks
        entry = await database_sync_to_async(append)(stored, editor_user, parent, f"side {i}")
        frames = [await next_frame(comm) for comm in viewers]
        walks.append(broadcast.route_walks - before)
        for frame in frames:
            # The small notice only: no row appended, no transcript window swapped in.
            assert 'id="branch-arrivals"' in frame
            assert f"{i + 1} new entr" in frame and f"<code>{entry.entry_id}</code>" in frame
            assert "beforeend:#transcript" not in frame
            assert 'id="transcript"' not in frame
            assert f'data-tip="{TIP}"' in frame  # the viewers stay on their branch
        parent = entry.entry_id
    # The branch's route is walked once; each further entry lengthens the map in memory.
    assert walks[1:] == [0, 0] and walks[0] <= 1
    assert swaps == []
    # An entry at the viewers' tip is drawn, and the count of other branches stays.
    tip_entry = await database_sync_to_async(append)(stored, editor_user, TIP, "at the tip")
    for comm in viewers:
        frame = await next_frame(comm)
        assert f'id="e-{tip_entry.entry_id}"' in frame and "beforeend:#transcript" in frame
        assert f'data-tip="{tip_entry.entry_id}"' in frame
    # Asking for the other branch (the notice's button) swaps it in for that viewer only.
    await viewers[0].send_to(text_data=json.dumps({"type": "switch", "to": parent}))
    frame = await next_frame(viewers[0])
    assert 'id="transcript"' in frame and f'id="e-{parent}"' in frame
    assert f'data-tip="{parent}"' in frame
    assert len(swaps) == 1
    await close_all(viewers)


async def test_a_web_write_returns_before_its_frame_is_rendered(
    ws_connect, stored, viewer_user, editor_user
):
    from django.test import Client

    comm = await html_viewer(ws_connect, stored, viewer_user)
    client = Client()
    await database_sync_to_async(client.force_login)(editor_user)
    await settled()  # the import's own frames are out of the way
    # While the worker may not render, the write's request completes all the same ...
    with broadcast._render_lock:
        response = await database_sync_to_async(client.post)(
            f"/sessions/{stored.pk}/label/", {"target": "a1b2c3d4", "label": "before"},
            HTTP_HX_REQUEST="true",
        )  # fmt: skip
        assert response.status_code in (200, 204, 302)
        assert await frames_for(comm, 0.3) == []  # ... and nothing was sent yet.
    # Then the worker renders it, and the viewer receives the row.
    frame = await next_frame(comm)
    new = re.search(r'data-tip="([0-9a-f]{8})"', frame).group(1)
    assert new != TIP and f'id="e-{new}"' in frame
    await close_all([comm])


def test_a_burst_is_coalesced_into_one_frame(stored, editor_user, sent_broadcasts):
    with broadcast._render_lock:  # the worker waits: the three writes queue up
        parent = TIP
        ids = []
        for i in range(3):
            entry = append(stored, editor_user, parent, f"burst {i}")
            ids.append(entry.entry_id)
            parent = entry.entry_id
    assert broadcast.drain(30)
    frames = [m for m in sent_broadcasts if m["type"] == "live.entries"]
    assert [[e["id"] for e in m["entries"]] for m in frames] == [ids]
    (chain,) = frames[0]["chains"]
    assert chain["from"] == TIP and chain["ids"] == ids
    assert all(f'id="e-{i}"' in "".join(chain["frames"]) for i in ids)


# ---------------------------------------------------------------------------------------------
# Real daphne: two writers, one on each branch, HTML and JSON viewers


async def collect_json(ws: WSClient, count: int) -> list[dict]:
    got: list[dict] = []
    while len(got) < count:
        message = json.loads(await ws.recv(timeout=30))
        if message["type"] == "entries":
            got.extend(message["entries"])
    return got


async def collect_html(ws: WSClient, last_position: int) -> list[str]:
    frames: list[str] = []
    while True:
        frame = await ws.recv(timeout=30)
        if 'id="live-state"' in frame:
            frames.append(frame)
            if f'data-last-position="{last_position}"' in frame:
                return frames


async def test_two_web_writers_on_two_branches_reach_every_viewer_once_in_order(
    tmp_path, small_session_file
):
    users = {"vera": "viewer", "eddie": "editor", "edna": "editor"}
    with LiveServer(tmp_path / "site", users=users, sessions=[str(small_session_file)]) as server:
        pk = server.session_pks[0]
        # edna writes on the other branch, eddie at the tip.
        for user, target in (("edna", OTHER), ("eddie", TIP)):
            status, body = server.post(user, f"/sessions/{pk}/cursor/", {"target": target})
            assert status in (200, 204, 302), body
        watchers = [await json_viewer(server, pk) for _ in range(2)]
        page = await WSClient.connect(
            f"{server.ws_base}/ws/sessions/{pk}/", origin=server.base_url,
            cookie=server.cookie("vera"),
        )  # fmt: skip
        with server.db() as conn:
            start = conn.execute(
                "SELECT MAX(position) FROM explorer_entry WHERE session_id=?", (pk,)
            ).fetchone()[0]
        await page.send(json.dumps({"type": "resume", "after": start, "tip": TIP}))
        assert 'id="live-state"' in await page.recv(timeout=30)
        per_writer = 6

        def write(user: str) -> None:
            for i in range(per_writer):
                status, body = server.post(
                    user, f"/sessions/{pk}/label/", {"target": "a1b2c3d4", "label": f"{user} {i}"}
                )
                assert status in (200, 204, 302), body

        threads = [threading.Thread(target=write, args=(u,)) for u in ("eddie", "edna")]
        for t in threads:
            t.start()
        received = await asyncio.gather(*(collect_json(w, 2 * per_writer) for w in watchers))
        for t in threads:
            t.join()
        with server.db() as conn:
            rows = conn.execute(
                "SELECT entry_id, parent_id, position FROM explorer_entry "
                "WHERE session_id=? AND position>? ORDER BY position",
                (pk, start),
            ).fetchall()
        assert len(rows) == 2 * per_writer
        frames = await collect_html(page, rows[-1][2])
        for got in received:  # every entry, once, in file order
            assert [e["id"] for e in got] == [r[0] for r in rows]
        # The page viewer drew exactly the entries continuing its tip, each once, in order.
        chain, tip = [], TIP
        for entry_id, parent, _ in rows:
            if parent == tip:
                chain.append(entry_id)
                tip = entry_id
        drawn = re.findall(r'<li id="e-([0-9a-f]{8})"', "".join(frames))
        assert drawn == chain and len(chain) == per_writer
        counts = re.findall(
            r"<strong>(\d+) new entr[a-z]*</strong> on other branches", "".join(frames)
        )
        assert counts[-1] == str(per_writer)  # each counted once, never drawn
        assert 'id="transcript"' not in "".join(frames)  # never rebuilt
        for ws in [*watchers, page]:
            await ws.close()
