"""A 1.2 MB entry reaches a live viewer intact: the live frame carries a row of the entry
that shows the start of its text (no frame above ``live_frames.FRAME_BYTES``) and links to
the whole of it, and the link, asked by the same viewer, answers with every character."""

from __future__ import annotations

import html
import json
import re

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from explorer import live_frames, services
from tests.live.conftest import close_all

pytestmark = pytest.mark.django_db(transaction=True)

TIP = "1b2c3d4e"  # the small session's newest entry (its file leaf)


async def test_a_big_entry_arrives_as_a_link_whose_page_holds_it_whole(
    ws_connect, make_session, viewer_user, editor_user
):
    session = await database_sync_to_async(make_session)()
    comm, connected, _ = await ws_connect(f"/ws/sessions/{session.pk}/", user=viewer_user)
    assert connected
    await comm.send_to(
        text_data=json.dumps({"type": "resume", "after": TIP, "tip": TIP, "follow": True})
    )
    assert 'id="live-state"' in await comm.receive_from(timeout=5)
    # 1.2 MB of words with a marker every 10,000 characters: a lost or repeated piece shows.
    text = "".join(f"[piece {i:04d}] " + "lorem ipsum " * 834 for i in range(120))
    assert len(text) > 1_200_000

    def append() -> str:
        message = {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}
        entry = services.append_message(session, editor_user, message, leaf_id=TIP).entry
        return entry.entry_id

    entry_id = await database_sync_to_async(append)()
    frames: list[str] = []
    while f'data-tip="{entry_id}"' not in (frames[-1] if frames else ""):
        frames.append(await comm.receive_from(timeout=20))
    assert all(live_frames.size(f) <= live_frames.FRAME_BYTES for f in frames)
    row = re.search(rf'<li id="e-{entry_id}"[^>]*>(.*?)</li>', "".join(frames), re.S)
    assert row is not None
    # The row shows the start of the text and links to the whole of it (the entry panel).
    full = re.search(r'<a[^>]*href="([^"]+)"[^>]*>Full text \((\d+) characters\)', row.group(1))
    assert full is not None and int(full.group(2)) == len(text)
    link = html.unescape(full.group(1))
    await close_all([comm])

    def follow_links() -> str:
        client = Client()
        client.force_login(viewer_user)
        panel = client.get(link)
        assert panel.status_code == 200
        # The entry panel shows the start too, and loads the whole text when asked.
        more = re.search(
            r'<a[^>]*class="[^"]*load-full[^"]*"[^>]*href="([^"]+)"[^>]*>Load full text \((\d+)',
            panel.content.decode(),
        )
        assert more is not None and int(more.group(2)) == len(text)
        whole = client.get(html.unescape(more.group(1)))
        assert whole.status_code == 200
        return whole.content.decode()

    page = await database_sync_to_async(follow_links)()
    pieces = re.findall(r"\[piece (\d{4})\]", page)
    assert pieces[-120:] == [f"{i:04d}" for i in range(120)]
    assert text in html.unescape(page)
