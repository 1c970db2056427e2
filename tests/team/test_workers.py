"""Several daphne workers sharing one database and the Redis channel layer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.live.server import LiveServer
from tests.team.test_redis import next_entries, open_viewer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def small_session_file(tmp_path, small_session_bytes):
    path = tmp_path / "small.jsonl"
    path.write_bytes(small_session_bytes)
    return path


def label(server: LiveServer, pk: int, text: str, *, via: int = 0) -> None:
    status, body = server.post("eddie", f"/sessions/{pk}/label/",
                               {"target": "a1b2c3d4", "label": text}, via=via)  # fmt: skip
    assert status in (200, 204, 302), body


@pytest.mark.needs_postgres
@pytest.mark.needs_redis
async def test_a_viewer_on_one_worker_sees_entries_appended_through_the_other(
    tmp_path, small_session_file
):
    with LiveServer(tmp_path / "site", sessions=[str(small_session_file)], workers=2) as server:
        pk = server.session_pks[0]
        cookie, origin = server.cookie("vera"), server.worker_url(0)
        on_first = await open_viewer(server.worker_ws(0), pk, cookie, origin)
        on_second = await open_viewer(server.worker_ws(1), pk, cookie, server.worker_url(1))
        label(server, pk, "written-via-worker-2", via=1)
        first = await next_entries(on_first)
        assert [e["type"] for e in first] == ["label"]
        assert server.entry(pk, first[0]["id"])["label"] == "written-via-worker-2"
        assert [e["id"] for e in await next_entries(on_second)] == [e["id"] for e in first]
        label(server, pk, "written-via-worker-1", via=0)
        second = await next_entries(on_second)
        assert [e["type"] for e in second] == ["label"]
        assert server.entry(pk, second[0]["id"])["label"] == "written-via-worker-1"
        await on_first.close()
        await on_second.close()
        stored = [e for e in server.entries(pk) if e["type"] == "label"]
        labels = [e["label"] for e in stored]
        assert labels[-2:] == ["written-via-worker-2", "written-via-worker-1"]
        # One chain: the second label's parent is the first one, whichever worker wrote it.
        assert stored[-1]["parentId"] == stored[-2]["id"]


def children(pid: int) -> list[int]:
    """Live child processes of ``pid`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def wait_for(predicate, what: str, timeout: float = 30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.needs_redis
async def test_serve_runs_n_daphne_workers_behind_one_port_and_restarts_a_dead_one(
    tmp_path, small_session_file
):
    with LiveServer(
        tmp_path / "site", sessions=[str(small_session_file)], serve_workers=2
    ) as server:
        parent = server.proc.pid
        workers = wait_for(lambda: len(children(parent)) == 2 and children(parent), "2 workers")
        for pid in workers:
            assert "daphne" in Path(f"/proc/{pid}/cmdline").read_text()
        pk = server.session_pks[0]
        viewer = await open_viewer(server.ws_base, pk, server.cookie("vera"), server.base_url)
        label(server, pk, "through-serve")
        seen = await next_entries(viewer)
        assert [e["type"] for e in seen] == ["label"]
        assert server.entry(pk, seen[0]["id"])["label"] == "through-serve"
        await viewer.close()

        # A worker that dies is replaced; the port keeps answering meanwhile.
        os.kill(workers[0], signal.SIGKILL)
        replaced = wait_for(
            lambda: (now := children(parent)) and len(now) == 2 and workers[0] not in now and now,
            "a replacement worker",
        )
        assert workers[1] in replaced
        with urllib.request.urlopen(server.base_url + "/healthz", timeout=10) as response:
            assert response.status == 200
        running = children(parent)
    # Stopping the supervisor stops every worker.
    for pid in running:
        wait_for(lambda pid=pid: not Path(f"/proc/{pid}").exists()
                 or "Z" in Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[:1],
                 f"worker {pid} to stop", timeout=20)  # fmt: skip


def test_several_workers_without_a_shared_channel_layer_are_refused(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
    env.update({"SQLITE_PATH": str(tmp_path / "db.sqlite3"), "SESSIONS_VAR_DIR": str(tmp_path)})
    done = subprocess.run(
        [sys.executable, "manage.py", "serve", "--workers", "2", "--no-demo", "--setup-only"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "--workers 2 needs REDIS_URL" in done.stderr
    assert not (tmp_path / "db.sqlite3").exists()  # refused before touching the database
