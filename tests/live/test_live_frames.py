"""No live frame above ``live_frames.FRAME_BYTES``: a burst of big rows arrives whole, in
order, in several bounded frames; a row too big for a frame arrives as a link to it."""

from __future__ import annotations

import json
import re

import pytest
from channels.db import database_sync_to_async

from explorer import broadcast, live_frames
from tests.live.conftest import close_all

pytestmark = pytest.mark.django_db(transaction=True)

TIP = "1b2c3d4e"  # the small session's newest entry (its file leaf)


def test_pack_keeps_order_and_the_bound():
    parts = ["a" * 100, "é" * 100, "b" * 300, "c" * 50]
    frames = live_frames.pack(parts, limit=400)
    assert "".join(frames) == "".join(parts)
    assert all(live_frames.size(f) <= 400 for f in frames)
    assert [live_frames.size(f) for f in frames] == [300, 350]  # "é" is two bytes
    assert live_frames.pack([], limit=10) == []


def test_a_row_too_big_for_a_frame_keeps_its_identity_and_links_to_the_entry():
    small = '<li id="e-abc" data-entry="abc">hi</li>'
    assert live_frames.bounded_row(7, "abc", "abc", small) == small
    big = '<li id="e-abc" data-entry="abc">' + "x" * (live_frames.ROW_BYTES + 1) + "</li>"
    row = live_frames.bounded_row(7, "abc", "abc", big)
    assert 'id="e-abc"' in row and 'data-entry="abc"' in row
    assert "/sessions/7/transcript/?entry=abc" in row and "too large to send live" in row
    assert live_frames.size(row) < 1024


def test_a_long_turn_text_is_cut_into_pieces_that_add_up():
    text = "y" * (live_frames.TEXT_CHARS * 2 + 5)
    pieces = live_frames.text_pieces(text, offset=3)
    assert [o for o, _ in pieces] == [3, 3 + live_frames.TEXT_CHARS, 3 + 2 * live_frames.TEXT_CHARS]
    assert "".join(p for _, p in pieces) == text


def _append_blocks(session, user, leaf: str, blocks: int, tag: str):
    from explorer import services

    content = [{"type": "text", "text": f"{tag} {i} " + "z" * 5900} for i in range(blocks)]
    message = {"role": "user", "content": content, "timestamp": 1741064900000}
    return services.append_message(session, user, message, leaf_id=leaf, source="edit").entry


async def test_a_burst_of_big_rows_arrives_whole_in_bounded_frames(
    ws_connect, make_session, viewer_user, editor_user
):
    session = await database_sync_to_async(make_session)()
    comm, connected, _ = await ws_connect(f"/ws/sessions/{session.pk}/", user=viewer_user)
    assert connected
    await comm.send_to(
        text_data=json.dumps({"type": "resume", "after": TIP, "tip": TIP, "follow": True})
    )
    assert 'id="live-state"' in await comm.receive_from(timeout=5)

    def burst() -> list[str]:
        ids, parent = [], TIP
        with broadcast._render_lock:  # the worker waits: the writes become one burst
            for i in range(14):
                blocks = 40 if i == 6 else 8  # ~240 KB of text in one row, ~48 KB in others
                parent = _append_blocks(session, editor_user, parent, blocks, f"m{i}").entry_id
                ids.append(parent)
        return ids

    ids = await database_sync_to_async(burst)()
    frames: list[str] = []
    while f'data-tip="{ids[-1]}"' not in (frames[-1] if frames else ""):
        frames.append(await comm.receive_from(timeout=20))
    rows = [f for f in frames if "beforeend:#transcript" in f]
    assert len(rows) >= 3  # 13 rows of ~48 KB and a short one do not fit in one frame
    assert all(live_frames.size(f) <= live_frames.FRAME_BYTES for f in frames)
    shown = re.findall(r'<li id="e-([0-9a-f]{8})"', "".join(rows))
    assert shown == ids  # every row once, in order
    assert "too large to send live" in "".join(rows)
    big = re.search(rf'<li id="e-{ids[6]}"[^>]*>(.*?)</li>', "".join(rows), re.S)
    assert big is not None and f"?entry={ids[6]}" in big.group(1)
    await close_all([comm])


def test_the_live_benchmark_checks_the_servers_bound():
    from benchmarks.bench_live import FRAME_BYTES

    assert FRAME_BYTES == live_frames.FRAME_BYTES
