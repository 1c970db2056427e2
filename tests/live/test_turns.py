"""The turn runner: streamed answers reach every viewer, one turn at a time, cancel, compaction."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from channels.db import database_sync_to_async

from explorer.session.providers import OpenAIChatProvider
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.live.conftest import close_all, frames_for, settled

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def stored(make_session):
    return make_session()


async def collect_turn(comm, timeout: float = 10) -> list[dict]:
    """Turn events (and entries) a JSON viewer receives until the turn ends."""
    seen = []
    while True:
        message = json.loads(await comm.receive_from(timeout=timeout))
        seen.append(message)
        if message["type"] == "turn" and message["event"] in ("end", "error"):
            return seen


async def viewer(ws_connect, session, user):
    comm, connected, _ = await ws_connect(f"/ws/sessions/{session.pk}/?format=json", user=user)
    assert connected
    await comm.send_to(text_data=json.dumps({"type": "resume", "after": "latest-unknown"}))
    while json.loads(await comm.receive_from(timeout=5))["type"] != "resumed":
        pass
    return comm


def stored_message(session, entry_id: str) -> dict:
    from explorer.models import Entry

    return Entry.objects.get(session=session, entry_id=entry_id).data()


async def wait_done(turn) -> None:
    await asyncio.get_running_loop().run_in_executor(None, turn.done.wait, 15)
    assert turn.done.is_set()


async def test_a_turn_streams_deltas_in_order_to_every_viewer(
    ws_connect, stored, viewer_user, editor_user
):
    from explorer import turns

    chunks = ["The ", "answer ", "is ", "forty-", "two."]
    usage = {"prompt_tokens": 1500, "completion_tokens": 9, "total_tokens": 1509}
    with FakeOpenAIServer(Reply(chunks=chunks, usage=usage, delay=0.01)) as server:
        provider = OpenAIChatProvider(server.base_url, "fake-model")
        viewers = [await viewer(ws_connect, stored, viewer_user) for _ in range(2)]
        turn = await database_sync_to_async(turns.start_turn)(
            stored, editor_user, "What is the answer?", provider=provider
        )
        streams = [await collect_turn(comm) for comm in viewers]
        await wait_done(turn)
        # The request carried the conversation up to the new user message.
        sent = server.requests[0]["body"]["messages"]
        assert sent[-1]["role"] == "user"
        assert "What is the answer?" in json.dumps(sent[-1])
    for seen in streams:
        deltas = [m for m in seen if m["type"] == "turn" and m["event"] == "delta"]
        # a word is sent once complete (it could be the start of a secret until then)
        assert [d["text"] for d in deltas] == ["The ", "answer ", "is ", "forty-two."]
        assert [d["offset"] for d in deltas] == [0, 4, 11, 14]
        # The turn starts, the user message is appended, then the stream, then the answer.
        turn_events = [m for m in seen if m["type"] == "turn"]
        assert turn_events[0]["event"] == "start"
        first_entries = next(i for i, m in enumerate(seen) if m["type"] == "entries")
        first_delta = next(i for i, m in enumerate(seen) if m.get("event") == "delta")
        assert first_entries < first_delta
        end = seen[-1]
        assert end["event"] == "end" and end["stop_reason"] == "stop"
        entry_ids = [e["id"] for m in seen if m["type"] == "entries" for e in m["entries"]]
        assert entry_ids == [turn.user_entry_id, turn.assistant_entry_id]
    assistant = await database_sync_to_async(stored_message)(stored, turn.assistant_entry_id)
    message = assistant["message"]
    assert assistant["parentId"] == turn.user_entry_id
    assert message["content"] == [{"type": "text", "text": "".join(chunks)}]
    assert message["usage"]["input"] == 1500 and message["usage"]["output"] == 9
    assert message["usage"]["totalTokens"] == 1509
    assert message["stopReason"] == "stop"
    user_entry = await database_sync_to_async(stored_message)(stored, turn.user_entry_id)
    # Appended at the editor's cursor: the file's leaf for a first-time user.
    assert user_entry["parentId"] == "1b2c3d4e"
    assert user_entry["message"]["role"] == "user"
    await close_all(viewers)


async def test_deltas_wait_behind_entries_the_worker_has_not_sent_yet(
    ws_connect, stored, viewer_user, editor_user
):
    """The broadcast worker is held (as when it renders a big burst) while the whole turn
    runs: the deltas must still reach viewers after the user message, not before it."""
    from explorer import broadcast, turns

    with FakeOpenAIServer(Reply(chunks=["Held ", "back."])) as server:
        provider = OpenAIChatProvider(server.base_url, "fake-model")
        comm = await viewer(ws_connect, stored, viewer_user)
        await settled()
        with broadcast._worker.gate:
            turn = await database_sync_to_async(turns.start_turn)(
                stored, editor_user, "Wait for it", provider=provider
            )
            await wait_done(turn)
            # Nothing reached the viewer while the worker could not run.
            assert await frames_for(comm, 0.3) == []
        seen = await collect_turn(comm)
    kinds = [m["type"] if m["type"] != "turn" else m["event"] for m in seen]
    assert kinds.index("entries") < kinds.index("delta")
    assert [d["text"] for d in seen if d.get("event") == "delta"] == ["Held ", "back."]
    entry_ids = [e["id"] for m in seen if m["type"] == "entries" for e in m["entries"]]
    assert entry_ids == [turn.user_entry_id, turn.assistant_entry_id]
    assert kinds[-1] == "end"
    await close_all([comm])


async def test_a_second_turn_on_a_busy_session_is_refused(stored, editor_user, admin_user):
    from explorer import turns

    gate = threading.Event()

    def held(body):
        gate.wait(10)
        return Reply(chunks=["late"])

    with FakeOpenAIServer([held]) as server:
        provider = OpenAIChatProvider(server.base_url, "fake-model")
        first = await database_sync_to_async(turns.start_turn)(
            stored, editor_user, "one", provider=provider
        )
        with pytest.raises(turns.TurnBusy) as refused:
            await database_sync_to_async(turns.start_turn)(
                stored, admin_user, "two", provider=provider
            )
        assert "already running" in str(refused.value)
        gate.set()
        await wait_done(first)
    # Only one user message and one answer were appended: nothing interleaved.
    from explorer.models import Entry

    roles = await database_sync_to_async(
        lambda: list(
            Entry.objects.filter(session=stored, author__isnull=False)
            .order_by("position")
            .values_list("role", flat=True)
        )
    )()
    assert roles == ["user", "assistant"]
    assert turns.running_turn(stored.pk) is None


async def test_a_turn_running_in_another_worker_blocks_this_one(stored, editor_user):
    from explorer import turns
    from explorer.models import TurnLock

    await database_sync_to_async(TurnLock.objects.create)(session=stored, turn_id="elsewhere")
    with FakeOpenAIServer(Reply("x")) as server:
        provider = OpenAIChatProvider(server.base_url, "fake-model")
        with pytest.raises(turns.TurnBusy):
            await database_sync_to_async(turns.start_turn)(
                stored, editor_user, "hi", provider=provider
            )
        assert server.requests == []
    # A cancel from this worker is passed on through the lock row.
    assert await database_sync_to_async(turns.cancel_turn)(stored.pk)
    lock = await database_sync_to_async(TurnLock.objects.get)(session=stored)
    assert lock.turn_id == "elsewhere" and lock.cancel_requested


async def test_a_stale_marker_from_a_dead_worker_does_not_block(stored, editor_user):
    from django.utils import timezone

    from explorer import turns
    from explorer.models import TurnLock

    def old_marker():
        lock = TurnLock.objects.create(session=stored, turn_id="dead")
        TurnLock.objects.filter(pk=lock.pk).update(
            updated=timezone.now() - timezone.timedelta(seconds=turns.STALE_AFTER + 5)
        )

    await database_sync_to_async(old_marker)()
    with FakeOpenAIServer(Reply("fine")) as server:
        provider = OpenAIChatProvider(server.base_url, "fake-model")
        turn = await database_sync_to_async(turns.start_turn)(
            stored, editor_user, "hi", provider=provider
        )
        await wait_done(turn)
    assert turn.assistant_message["stopReason"] == "stop"
    assert not await database_sync_to_async(TurnLock.objects.filter(session=stored).exists)()


async def test_cancel_aborts_the_stream_and_records_aborted(
    ws_connect, stored, viewer_user, editor_user
):
    from explorer import turns

    chunks = [f"w{i} " for i in range(200)]
    with FakeOpenAIServer(Reply(chunks=chunks, delay=0.02)) as server:
        provider = OpenAIChatProvider(server.base_url, "fake-model")
        comm = await viewer(ws_connect, stored, viewer_user)
        turn = await database_sync_to_async(turns.start_turn)(
            stored, editor_user, "talk a lot", provider=provider
        )
        while True:
            message = json.loads(await comm.receive_from(timeout=10))
            if message["type"] == "turn" and message["event"] == "delta":
                break
        assert await database_sync_to_async(turns.cancel_turn)(stored.pk)
        seen = await collect_turn(comm)
        await wait_done(turn)
    assert seen[-1]["stop_reason"] == "aborted"
    stored_answer = await database_sync_to_async(stored_message)(stored, turn.assistant_entry_id)
    assert stored_answer["message"]["stopReason"] == "aborted"
    text = (
        stored_answer["message"]["content"][0]["text"]
        if stored_answer["message"]["content"]
        else ""
    )
    assert len(text) < len("".join(chunks))
    await close_all([comm])


async def test_auto_compaction_fires_past_the_threshold(
    ws_connect, stored, viewer_user, editor_user, settings
):
    from explorer import turns
    from explorer.models import Entry
    from explorer.session.summarizers import EmbeddedSummarizer
    from explorer.session.tokens import CompactionSettings

    settings.SESSIONS_CONTEXT_WINDOW = 4000
    settings.SESSIONS_COMPACTION = CompactionSettings(
        enabled=True, reserve_tokens=500, keep_recent_tokens=5
    )
    usage = {"prompt_tokens": 3600, "completion_tokens": 10, "total_tokens": 3610}
    with FakeOpenAIServer(Reply(chunks=["Noted", "."], usage=usage)) as server:
        provider = OpenAIChatProvider(server.base_url, "fake-model")
        comm = await viewer(ws_connect, stored, viewer_user)
        turn = await database_sync_to_async(turns.start_turn)(
            stored,
            editor_user,
            "Please remember this.",
            provider=provider,
            summarizer=EmbeddedSummarizer(),
        )
        seen = await collect_turn(comm)
        await wait_done(turn)
    assert turn.error is None
    assert turn.compacted
    assert seen[-1]["compacted"] is True
    assert any(m["type"] == "turn" and m["event"] == "compacting" for m in seen)
    appended = [e for m in seen if m["type"] == "entries" for e in m["entries"]]
    assert [e["type"] for e in appended] == ["message", "message", "compaction"]
    compaction = await database_sync_to_async(
        lambda: Entry.objects.get(session=stored, type="compaction").data()
    )()
    assert compaction["parentId"] == turn.assistant_entry_id
    assert compaction["tokensBefore"] > 0 and compaction["summary"]
    await close_all([comm])


async def test_no_compaction_below_the_threshold(stored, editor_user, settings):
    from explorer import turns

    settings.SESSIONS_CONTEXT_WINDOW = 128000
    with FakeOpenAIServer(Reply("ok")) as server:
        provider = OpenAIChatProvider(server.base_url, "fake-model")
        turn = await database_sync_to_async(turns.start_turn)(
            stored, editor_user, "hi", provider=provider
        )
        await wait_done(turn)
    assert not turn.compacted and turn.error is None


async def test_without_a_provider_turns_are_refused_plainly(stored, editor_user, settings):
    from explorer import turns

    settings.SESSIONS_LLM = {"SESSIONS_LLM_BASE_URL": ""}
    with pytest.raises(turns.NoProvider) as refused:
        await database_sync_to_async(turns.start_turn)(stored, editor_user, "hi")
    assert "No model provider is configured" in str(refused.value)
    assert "embedded summarizer" in str(refused.value)


async def test_a_turn_names_the_cursor_it_was_shown(stored, editor_user):
    """A turn aimed at the leaf the page showed runs there; one aimed at a leaf the cursor
    has left is refused before the provider is asked, and leaves the session free."""
    from explorer import queries, turns
    from explorer.models import Entry, TurnLock

    shown = await database_sync_to_async(queries.cursor_id)(stored, editor_user)
    with FakeOpenAIServer(Reply("fine")) as server:
        provider = OpenAIChatProvider(server.base_url, "fake-model")
        with pytest.raises(turns.TurnStale) as refused:
            await database_sync_to_async(turns.start_turn)(
                stored, editor_user, "hi", provider=provider, expected_leaf="0000beef"
            )
        assert "Nothing was written" in str(refused.value) and refused.value.current == shown
        assert server.requests == []
        assert not await database_sync_to_async(TurnLock.objects.filter(session=stored).exists)()
        turn = await database_sync_to_async(turns.start_turn)(
            stored, editor_user, "hi", provider=provider, expected_leaf=shown
        )
        await wait_done(turn)
    asked = await database_sync_to_async(Entry.objects.get)(
        session=stored, entry_id=turn.user_entry_id
    )
    assert asked.parent_id == shown and turn.assistant_message["stopReason"] == "stop"
