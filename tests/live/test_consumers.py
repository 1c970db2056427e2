"""The session websocket: who may connect, fan-out to every viewer, resume without loss."""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer

from tests.live.conftest import close_all

pytestmark = pytest.mark.django_db(transaction=True)


async def receive_json(comm, timeout: float = 5) -> dict:
    return json.loads(await comm.receive_from(timeout=timeout))


async def receive_until(comm, kind: str, timeout: float = 5) -> dict:
    while True:
        message = await receive_json(comm, timeout)
        if message["type"] == kind:
            return message


async def resume(comm, after) -> dict:
    await comm.send_to(text_data=json.dumps({"type": "resume", "after": after}))
    entries = []
    while True:
        message = await receive_json(comm)
        if message["type"] == "entries":
            entries.extend(message["entries"])
        elif message["type"] == "resumed":
            return {"entries": entries, "lastPosition": message["lastPosition"]}


def label(session, user, target: str, text: str):
    from explorer import services

    return services.set_label(session, user, target, text)


@pytest.fixture
def stored(make_session):
    return make_session()


async def test_it_refuses_anonymous_users(ws_connect, stored):
    comm, connected, _ = await ws_connect(f"/ws/sessions/{stored.pk}/")
    assert connected  # accepted only to be told why
    closed = await comm.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": 4401}


async def test_it_refuses_users_without_a_role(ws_connect, stored, norole_user):
    comm, connected, _ = await ws_connect(f"/ws/sessions/{stored.pk}/", user=norole_user)
    assert connected
    assert (await comm.receive_output(timeout=5))["code"] == 4403


async def test_it_closes_for_a_missing_session(ws_connect, stored, viewer_user):
    comm, connected, _ = await ws_connect(f"/ws/sessions/{stored.pk + 999}/", user=viewer_user)
    assert connected
    assert (await comm.receive_output(timeout=5))["code"] == 4404


async def test_it_refuses_foreign_origins(ws_connect, stored, viewer_user):
    comm, connected, _ = await ws_connect(
        f"/ws/sessions/{stored.pk}/", user=viewer_user, origin=b"http://evil.example"
    )
    assert not connected


async def test_a_viewer_on_an_allowed_origin_connects_and_resumes(ws_connect, stored, viewer_user):
    comm, connected, _ = await ws_connect(
        f"/ws/sessions/{stored.pk}/?format=json", user=viewer_user
    )
    assert connected
    got = await resume(comm, 0)
    ids = [e["id"] for e in got["entries"]]
    assert ids == [
        "a1b2c3d4",
        "b2c3d4e5",
        "c3d4e5f6",
        "d4e5f6a7",
        "e5f6a7b8",
        "f6a7b8c9",
        "0a1b2c3d",
        "1b2c3d4e",
    ]
    assert got["lastPosition"] == got["entries"][-1]["position"]
    await close_all([comm])


async def test_every_viewer_receives_a_new_entry_once(ws_connect, stored, viewer_user, editor_user):
    comms = []
    for _ in range(3):
        comm, connected, _ = await ws_connect(
            f"/ws/sessions/{stored.pk}/?format=json", user=viewer_user
        )
        assert connected
        await resume(comm, "1b2c3d4e")  # an entry id works as well as a position
        comms.append(comm)
    result = await database_sync_to_async(label)(stored, editor_user, "a1b2c3d4", "live")
    new_id = result.entry.entry_id
    for comm in comms:
        message = await receive_until(comm, "entries")
        assert [e["id"] for e in message["entries"]] == [new_id]
        assert message["entries"][0]["parentId"] is not None
    # Nothing is delivered twice: a sync finds nothing new.
    for comm in comms:
        await comm.send_to(text_data=json.dumps({"type": "sync"}))
    await asyncio.sleep(0.2)
    for comm in comms:
        while not await comm.receive_nothing(timeout=0.1):
            message = await receive_json(comm)
            assert message["type"] != "entries"
    await close_all(comms)


async def test_resume_after_reconnect_sends_the_missed_entries_in_order(
    ws_connect, stored, viewer_user, editor_user
):
    comm, _, _ = await ws_connect(f"/ws/sessions/{stored.pk}/?format=json", user=viewer_user)
    got = await resume(comm, 0)
    last = got["lastPosition"]
    await comm.disconnect()
    new_ids = []
    for i in range(3):
        result = await database_sync_to_async(label)(stored, editor_user, "a1b2c3d4", f"l{i}")
        new_ids.append(result.entry.entry_id)
    comm2, _, _ = await ws_connect(f"/ws/sessions/{stored.pk}/?format=json", user=viewer_user)
    got = await resume(comm2, last)
    assert [e["id"] for e in got["entries"]] == new_ids
    positions = [e["position"] for e in got["entries"]]
    assert positions == sorted(positions) and positions[0] > last
    await close_all([comm2])


async def test_a_dropped_group_message_is_filled_from_the_database(
    ws_connect, stored, viewer_user, editor_user
):
    from explorer import broadcast, items

    comm, _, _ = await ws_connect(f"/ws/sessions/{stored.pk}/?format=json", user=viewer_user)
    await resume(comm, "1b2c3d4e")
    # Two appends whose broadcasts never happen (as if the layer dropped them) ...
    real = broadcast.entries_appended
    broadcast.entries_appended = lambda *args, **kwargs: None
    try:
        first = await database_sync_to_async(label)(stored, editor_user, "a1b2c3d4", "x")
        second = await database_sync_to_async(label)(stored, editor_user, "a1b2c3d4", "y")
    finally:
        broadcast.entries_appended = real
    # ... then a third whose message arrives: the viewer gets all three, in order.
    third = await database_sync_to_async(label)(stored, editor_user, "a1b2c3d4", "z")
    ids = []
    while len(ids) < 3:
        message = await receive_until(comm, "entries")
        ids.extend(e["id"] for e in message["entries"])
    assert ids == [first.entry.entry_id, second.entry.entry_id, third.entry.entry_id]
    # A repeated group message is not delivered again.
    fragments = await database_sync_to_async(lambda: items.entry_fragments([third.entry]))()
    await get_channel_layer().group_send(
        stored.group_name, {"type": "live.entries", "entries": fragments}
    )
    assert (
        await comm.receive_nothing(timeout=0.3) or (await receive_json(comm))["type"] != "entries"
    )
    await close_all([comm])


async def test_nothing_is_delivered_before_the_client_says_where_it_stands(
    ws_connect, stored, viewer_user, editor_user
):
    comm, _, _ = await ws_connect(f"/ws/sessions/{stored.pk}/?format=json", user=viewer_user)
    result = await database_sync_to_async(label)(stored, editor_user, "a1b2c3d4", "early")
    await asyncio.sleep(0.2)
    while not await comm.receive_nothing(timeout=0.1):
        assert (await receive_json(comm))["type"] != "entries"
    got = await resume(comm, "1b2c3d4e")
    assert [e["id"] for e in got["entries"]] == [result.entry.entry_id]
    await close_all([comm])


async def test_htmx_viewers_get_out_of_band_swaps(ws_connect, stored, viewer_user, editor_user):
    comm, _, _ = await ws_connect(f"/ws/sessions/{stored.pk}/", user=viewer_user)
    await comm.send_to(
        text_data=json.dumps(
            {"type": "resume", "after": "1b2c3d4e", "tip": "1b2c3d4e", "follow": True}
        )
    )
    state = await comm.receive_from(timeout=5)
    assert 'id="live-state"' in state
    result = await database_sync_to_async(label)(stored, editor_user, "a1b2c3d4", "<b>x</b>")
    html = ""
    while "tree-arrivals" not in html:
        html = await comm.receive_from(timeout=5)
    new_id = result.entry.entry_id
    # The transcript grows by the Transcript tab's row; the tree says what arrived; the
    # state moves on.
    assert 'hx-swap-oob="beforeend:#transcript"' in html
    assert f'<li id="e-{new_id}" data-entry="{new_id}" class="t-entry' in html
    assert 'id="tree-arrivals"' in html and "1 new entry" in html
    assert f'data-tip="{new_id}"' in html
    assert "<b>x</b>" not in html  # escaped
    await close_all([comm])


async def test_cursor_moves_are_shown_and_switch_the_branch_when_not_following(
    ws_connect, stored, viewer_user
):
    from explorer import services

    comm, _, _ = await ws_connect(f"/ws/sessions/{stored.pk}/", user=viewer_user)
    await comm.send_to(
        text_data=json.dumps(
            {"type": "resume", "after": "1b2c3d4e", "tip": "1b2c3d4e", "follow": False}
        )
    )
    await comm.receive_from(timeout=5)
    await database_sync_to_async(services.move_cursor)(stored, viewer_user, "e5f6a7b8")
    html = await comm.receive_from(timeout=5)
    assert 'id="cursor-status"' in html and "Your cursor" in html and "e5f6a7b8" in html
    # The transcript now shows the branch root → e5f6a7b8 only.
    assert '<ol class="transcript" id="transcript"' in html and 'hx-swap-oob="true"' in html
    assert 'id="e-e5f6a7b8"' in html and 'id="e-a1b2c3d4"' in html
    assert 'id="e-d4e5f6a7"' not in html
    await close_all([comm])


async def test_the_projection_panel_follows_new_entries(
    ws_connect, stored, viewer_user, editor_user
):
    from explorer import services

    comm, _, _ = await ws_connect(f"/ws/sessions/{stored.pk}/?format=json", user=viewer_user)
    await resume(comm, "1b2c3d4e")
    message = {"role": "user", "content": "one more question", "timestamp": 1741064900000}
    result = await database_sync_to_async(services.append_message)(
        stored, editor_user, message, leaf_id="1b2c3d4e", source="edit"
    )
    projection = await receive_until(comm, "projection", timeout=5)
    assert projection["leaf_id"] == result.entry.entry_id
    # The path to the new message: the earlier context plus the new user message.
    assert projection["messages"] >= 4
    assert projection["tokens"] > 0 and projection["window"] > 0
    await close_all([comm])


async def test_htmx_viewers_get_the_projection_panel_swapped(
    ws_connect, stored, viewer_user, editor_user
):
    comm, _, _ = await ws_connect(f"/ws/sessions/{stored.pk}/", user=viewer_user)
    await comm.send_to(text_data=json.dumps({"type": "resume", "after": "1b2c3d4e"}))
    await comm.receive_from(timeout=5)
    await database_sync_to_async(label)(stored, editor_user, "a1b2c3d4", "p")
    html = ""
    while 'id="projection-panel"' not in html:
        html = await comm.receive_from(timeout=5)
    assert "<meter" in html and "messages" in html
    await close_all([comm])


async def test_viewers_hear_when_following_the_file_stops(ws_connect, stored, viewer_user):
    from explorer import services

    comm, _, _ = await ws_connect(f"/ws/sessions/{stored.pk}/", user=viewer_user)
    await comm.send_to(
        text_data=json.dumps(
            {"type": "resume", "after": "1b2c3d4e", "tip": "1b2c3d4e", "follow": True}
        )
    )
    assert 'id="live-state"' in await comm.receive_from(timeout=5)  # joined and resumed
    await database_sync_to_async(services.follow_stopped)(stored.pk, "s.jsonl: truncated")
    seen = ""
    while "follow stopped" not in seen:
        seen = await comm.receive_from(timeout=5)
    assert "s.jsonl: truncated" in seen and 'id="live-notice"' in seen
    await close_all([comm])


async def test_a_new_row_is_rendered_once_for_every_viewer(
    ws_connect, stored, viewer_user, editor_user, monkeypatch
):
    """Two viewers, one write: the Transcript tab's row is rendered once (in the broadcast)
    and both viewers receive the same bytes."""
    from explorer import items as html_mod

    calls = []
    real = html_mod.route_rows

    def counting(session, rmap, lo):
        calls.append(len(rmap.ids) - lo)
        return real(session, rmap, lo)

    monkeypatch.setattr(html_mod, "route_rows", counting)
    viewers = []
    for _ in range(2):
        comm, _, _ = await ws_connect(f"/ws/sessions/{stored.pk}/", user=viewer_user)
        await comm.send_to(
            text_data=json.dumps({"type": "resume", "after": "1b2c3d4e", "tip": "1b2c3d4e"})
        )
        assert 'id="live-state"' in await comm.receive_from(timeout=5)
        viewers.append(comm)
    result = await database_sync_to_async(label)(stored, editor_user, "a1b2c3d4", "once")
    new_id = result.entry.entry_id
    frames = []
    for comm in viewers:
        frame = ""
        while "tree-arrivals" not in frame:
            frame = await comm.receive_from(timeout=5)
        frames.append(frame)
    assert calls == [1]
    assert frames[0] == frames[1] and f'id="e-{new_id}"' in frames[0]
    await close_all(viewers)
