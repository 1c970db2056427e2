"""Redis as a team server uses it: the channel layer under a real daphne, and the cache."""

from __future__ import annotations

import asyncio
import json
import os
import secrets

import pytest

from tests.live.server import LiveServer
from tests.live.wsclient import WSClient

pytestmark = pytest.mark.needs_redis

IDLE_SECONDS = 35  # past 30 s: several of channels_redis's 5 s blocking pops and a daphne ping


async def open_viewer(url: str, pk: int, cookie: str, origin: str) -> WSClient:
    ws = await WSClient.connect(
        f"{url}/ws/sessions/{pk}/?format=json", origin=origin, cookie=cookie
    )
    await ws.send(json.dumps({"type": "resume", "after": "999999"}))
    while json.loads(await ws.recv(timeout=10))["type"] != "resumed":
        pass
    return ws


async def next_entries(ws: WSClient, pending: asyncio.Task | None = None) -> list[dict]:
    """The entries of the next ``entries`` message (other messages are skipped)."""
    while True:
        text = await asyncio.wait_for(pending, 20) if pending else await ws.recv(timeout=20)
        pending = None
        assert text is not None, f"viewer closed with {ws.close_code}"
        message = json.loads(text)
        if message["type"] == "entries":
            return message["entries"]


@pytest.fixture
def small_session_file(tmp_path, small_session_bytes):
    path = tmp_path / "small.jsonl"
    path.write_bytes(small_session_bytes)
    return path


async def test_an_idle_viewer_stays_connected_past_30_seconds(tmp_path, small_session_file):
    with LiveServer(tmp_path / "site", sessions=[str(small_session_file)]) as server:
        pk = server.session_pks[0]
        ws = await open_viewer(server.ws_base, pk, server.cookie("vera"), server.base_url)
        # Nothing is sent for a while; the socket must neither close nor deliver anything.
        waiting = asyncio.ensure_future(ws.recv())
        done, _ = await asyncio.wait({waiting}, timeout=IDLE_SECONDS)
        assert not done, f"idle viewer got {waiting.result()!r} (close code {ws.close_code})"
        status, body = server.post(
            "eddie", f"/sessions/{pk}/label/", {"target": "a1b2c3d4", "label": "after-the-wait"}
        )
        assert status in (200, 204, 302), body
        entries = await next_entries(ws, waiting)
        assert [e["type"] for e in entries] == ["label"]
        assert server.entry(pk, entries[0]["id"])["label"] == "after-the-wait"
        assert ws.close_code is None
        await ws.close()
        log = server.log.read_text(errors="replace")
        assert "TimeoutError" not in log, log


def test_cache_keys_always_expire_and_stay_out_of_the_channel_layer_database():
    import redis
    from django.core.cache.backends.redis import RedisCache

    from sessions_site.cache import BoundedRedisCache
    from sessions_site.env import redis_url_db, redis_url_with_db

    layer_url = os.environ["REDIS_URL"]
    cache_url = redis_url_with_db(layer_url, redis_url_db(layer_url) + 1)
    prefix = f"test-{secrets.token_hex(4)}"
    cache = BoundedRedisCache(cache_url, {"KEY_PREFIX": prefix, "OPTIONS": {"MAX_TIMEOUT": 90}})
    assert isinstance(cache, RedisCache)
    cache.set("forever", "x", None)  # asks for no expiry
    cache.set("long", "y", 7 * 24 * 3600)
    cache.set("short", "z", 30)
    client = redis.Redis.from_url(cache_url)
    ttls = {name: client.ttl(cache.make_key(name)) for name in ("forever", "long", "short")}
    assert 0 < ttls["forever"] <= 90 and 0 < ttls["long"] <= 90, ttls
    assert 0 < ttls["short"] <= 30, ttls
    assert cache.get("forever") == "x"
    layer = redis.Redis.from_url(layer_url)
    assert not layer.exists(cache.make_key("forever"))
    cache.delete_many(["forever", "long", "short"])
