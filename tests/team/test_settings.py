"""Team-server settings, read by a fresh process as a deployment would (no server needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sessions_site.env import redis_url_db, redis_url_with_db
from sessions_site.fingerprint import code_fingerprint

ROOT = Path(__file__).resolve().parents[2]

DUMP = r"""
import json
from django.conf import settings
from channels_redis.core import RedisChannelLayer
print(json.dumps({
    "databases": settings.DATABASES,
    "channel_layers": settings.CHANNEL_LAYERS,
    "caches": settings.CACHES,
    "brpop_timeout": RedisChannelLayer.brpop_timeout,
}, default=str))
"""


def settings_for(env_extra: dict[str, str]) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "DATABASE_URL",
            "REDIS_URL",
            "REDIS_CACHE_URL",
            "REDIS_PREFIX",
            "SESSIONS_CACHE",
            "DJANGO_ALLOW_ASYNC_UNSAFE",
        )
    }
    env.update({"DJANGO_SETTINGS_MODULE": "sessions_site.settings", **env_extra})
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup()\n" + DUMP],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def dump(env_extra: dict[str, str]) -> dict:
    done = settings_for(env_extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_channel_layer_outwaits_its_blocking_pop_and_the_cache_has_its_own_database():
    # Nothing listens on port 1: reading the settings must not need Redis.
    out = dump({"REDIS_URL": "redis://:s3cret@127.0.0.1:1/2"})
    host = out["channel_layers"]["default"]["CONFIG"]["hosts"][0]
    assert host["address"] == "redis://:s3cret@127.0.0.1:1/2"
    # The idle-viewer disconnects of channels_redis#422 come from socket_timeout <= the pop.
    assert host["socket_timeout"] > out["brpop_timeout"] + 1
    assert host["socket_connect_timeout"] > 0
    cache = out["caches"]["default"]
    assert cache["BACKEND"] == "sessions_site.cache.BoundedRedisCache"
    assert cache["LOCATION"] == "redis://:s3cret@127.0.0.1:1/3"
    assert cache["OPTIONS"]["MAX_TIMEOUT"] == 24 * 3600
    layer_prefix = out["channel_layers"]["default"]["CONFIG"]["prefix"]
    assert layer_prefix != cache["KEY_PREFIX"]


def test_a_separate_cache_server_and_prefix_can_be_chosen():
    out = dump(
        {
            "REDIS_URL": "redis://127.0.0.1:1/0",
            "REDIS_CACHE_URL": "redis://127.0.0.1:2/0",
            "REDIS_PREFIX": "site-b",
            "SESSIONS_CACHE_MAX_SECONDS": "600",
        }
    )
    assert out["caches"]["default"]["LOCATION"] == "redis://127.0.0.1:2/0"
    # Named by the running code too (sessions_site/fingerprint.py).
    assert out["caches"]["default"]["KEY_PREFIX"] == f"site-b:cache:{code_fingerprint(ROOT)}"
    assert out["caches"]["default"]["OPTIONS"]["MAX_TIMEOUT"] == 600
    assert out["channel_layers"]["default"]["CONFIG"]["prefix"] == "site-b:asgi"


def test_a_socket_timeout_within_the_blocking_pop_is_refused():
    done = settings_for({"REDIS_URL": "redis://127.0.0.1:1/0", "REDIS_SOCKET_TIMEOUT": "5"})
    assert done.returncode != 0
    assert "REDIS_SOCKET_TIMEOUT must be at least" in done.stderr


def test_postgresql_uses_the_pool_without_persistent_connections():
    out = dump(
        {"DATABASE_URL": "postgres://app:pw@127.0.0.1:1/explorer", "DATABASE_POOL_MAX_SIZE": "7"}
    )
    db = out["databases"]["default"]
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert db["CONN_MAX_AGE"] == 0  # Django refuses a pool with persistent connections
    assert db["OPTIONS"]["pool"] == {"min_size": 1, "max_size": 7, "timeout": 30}
    assert db["CONN_HEALTH_CHECKS"] is True


def test_the_pool_can_be_turned_off_and_bad_sizes_fail_loudly():
    out = dump({"DATABASE_URL": "postgres://app:pw@127.0.0.1:1/explorer", "DATABASE_POOL": "false"})
    assert "pool" not in out["databases"]["default"].get("OPTIONS", {})
    assert out["databases"]["default"]["CONN_MAX_AGE"] == 0
    done = settings_for(
        {
            "DATABASE_URL": "postgres://app:pw@127.0.0.1:1/explorer",
            "DATABASE_POOL_MIN_SIZE": "5",
            "DATABASE_POOL_MAX_SIZE": "2",
        }
    )
    assert done.returncode != 0
    assert "DATABASE_POOL_MAX_SIZE (2) is below DATABASE_POOL_MIN_SIZE (5)" in done.stderr


@pytest.mark.parametrize(
    "url, db, next_url",
    [
        ("redis://h:6379", 0, "redis://h:6379/1"),
        ("redis://:pw@h:6379/4", 4, "redis://:pw@h:6379/5"),
        ("rediss://u:pw@h/2?ssl_cert_reqs=none", 2, "rediss://u:pw@h/3?ssl_cert_reqs=none"),
        ("unix:///run/redis.sock", 0, "unix:///run/redis.sock?db=1"),
        ("unix:///run/redis.sock?db=6", 6, "unix:///run/redis.sock?db=7"),
    ],
)
def test_redis_urls_select_the_next_database(url, db, next_url):
    assert redis_url_db(url) == db
    assert redis_url_with_db(url, db + 1) == next_url


def test_a_redis_url_with_a_bad_database_fails_loudly():
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match="no valid database number"):
        redis_url_db("redis://h:6379/zero")


def test_without_redis_the_cache_is_the_quicker_file_cache():
    cache = dump({})["caches"]["default"]
    assert cache["BACKEND"] == "sessions_site.cache.QuickFileCache"
    assert cache["OPTIONS"]["MAX_ENTRIES"] > 0
