"""kill -9 during a new session's import (real process, real database): its committed
batches stay hidden, ``serve`` removes them when it starts, and the file imports again."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from tests.live.server import ROOT, LiveServer

ENTRIES = 30000


def _write_file(path) -> None:
    head = {"type": "session", "version": 3, "id": "killed-import", "cwd": "/w",
            "timestamp": "2025-03-04T05:06:07Z"}  # fmt: skip
    with open(path, "w") as fh:
        fh.write(json.dumps(head) + "\n")
        parent = None
        for k in range(ENTRIES):
            eid = f"{k:08x}"
            entry = {"type": "message", "id": eid, "parentId": parent,
                     "timestamp": "2025-03-04T05:06:08Z",
                     "message": {"role": "user", "content": f"entry {k} " + "w" * 400,
                                 "timestamp": 1}}  # fmt: skip
            fh.write(json.dumps(entry) + "\n")
            parent = eid


def _count(server: LiveServer, sql: str) -> int:
    with server.db() as db:
        return db.execute(sql).fetchone()[0]


def test_an_import_killed_midway_leaves_nothing_once_serve_starts(tmp_path):
    path = tmp_path / "big.jsonl"
    _write_file(path)
    with LiveServer(tmp_path, autostart=False) as server:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "import_sessions", str(path)],
            cwd=ROOT,
            env=server.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        stored = 0
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            stored = _count(server, "SELECT count(*) FROM explorer_entry")
            if stored:
                break
            time.sleep(0.02)
        proc.kill()  # SIGKILL: no clean-up of its own can run
        proc.wait()
        assert 0 < stored < ENTRIES, "the import ended before it could be killed midway"
        # Its batches are in the database, under a session no page shows.
        states = _count(server, "SELECT count(*) FROM explorer_session WHERE state = 'importing'")
        assert states == 1
        shown = server.run_django(
            "from explorer.models import Session; print(Session.objects.count())"
        )
        assert shown.strip().splitlines()[-1] == "0"
        out = server._run("manage.py", "serve", "--setup-only", "--no-demo")
        assert "Removed 1 unfinished import" in out
        assert _count(server, "SELECT count(*) FROM explorer_entry") == 0
        assert _count(server, "SELECT count(*) FROM explorer_session") == 0
        # The same file imports whole now.
        server._run("manage.py", "import_sessions", str(path))
        assert _count(server, "SELECT count(*) FROM explorer_entry") == ENTRIES
        assert _count(server, "SELECT count(*) FROM explorer_session WHERE state = 'ready'") == 1
