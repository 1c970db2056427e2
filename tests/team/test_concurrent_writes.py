"""One writer per session across processes: two daphne workers on one PostgreSQL and Redis.

Two editors post labels to one session at the same time, each through their own worker, each
post naming the leaf its author last saw (``expected_leaf``). Every accepted append must be
stored under exactly that leaf; every other one must be refused with 409 and nothing stored.
A refused author tries again at the leaf the refusal named, so in the end every label is
stored. ``.ci/run`` runs 2 × 250 (``SESSIONS_TEAM_APPENDS=250``); a developer's default is
2 × 120 (the same shape, a minute less)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.live.server import ROOT, LiveServer

pytestmark = [pytest.mark.needs_postgres, pytest.mark.needs_redis]

APPENDS = int(os.environ.get("SESSIONS_TEAM_APPENDS", "120"))  # per editor
THREADS = 1  # posts in flight per editor: the race is between the two editors' workers
USERS = {"eddie": "editor", "edna": "editor", "vera": "viewer"}
FIRST_TIP = "1b2c3d4e"  # the small session's last entry


@pytest.fixture
def small_session_file(tmp_path, small_session_bytes):
    path = tmp_path / "small.jsonl"
    path.write_bytes(small_session_bytes)
    return path


def post_json(server: LiveServer, user: str, path: str, data: dict, via: int) -> tuple[int, dict]:
    token = server.csrf_token(user)
    body = urllib.parse.urlencode(data).encode()
    req = urllib.request.Request(server.worker_url(via) + path + "?format=json", data=body)
    req.add_header("Cookie", f"{server.cookie(user)}; csrftoken={token}")
    req.add_header("X-CSRFToken", token)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"{}")


class Editor:
    """One editor posting labels through one worker, always at the leaf it last heard of."""

    def __init__(self, server: LiveServer, user: str, via: int, pk: int) -> None:
        self.server, self.user, self.via, self.pk = server, user, via, pk
        self.leaf = FIRST_TIP
        self.lock = threading.Lock()
        self.accepted: dict[str, str] = {}  # label text → the leaf it was aimed at
        self.refused = 0
        self.other: list[tuple[int, dict]] = []

    def attempt(self, n: int, *, retry: bool = False) -> None:
        """Post label ``n`` at the leaf last heard of; with ``retry``, a refused post is sent
        again at the leaf the refusal named, as its author would after reading the news."""
        text = f"{self.user}-{n}"
        for _try in range(200 if retry else 1):
            with self.lock:
                expected = self.leaf
            status, body = post_json(self.server, self.user, f"/sessions/{self.pk}/label/",
                                     {"target": "a1b2c3d4", "label": text,
                                      "expected_leaf": expected}, self.via)  # fmt: skip
            with self.lock:
                if status == 200 and body.get("ok"):
                    self.accepted[text] = expected
                    self.leaf = body["leaf"]
                    return
                if status != 409:
                    self.other.append((status, body))
                    return
                assert body["conflict"] and body["expected_leaf"] == expected, body
                self.refused += 1
                self.leaf = body["leaf"]


def check_counters(server: LiveServer, pk: int) -> None:
    with server.db() as conn:
        stored = conn.execute(
            "SELECT entry_count, leaf_count FROM explorer_session WHERE id=?", (pk,)
        ).fetchone()
        rows = conn.execute(
            "SELECT count(*), sum(CASE WHEN child_count=0 THEN 1 ELSE 0 END)"
            " FROM explorer_entry WHERE session_id=?",
            (pk,),
        ).fetchone()
    assert tuple(stored) == tuple(rows), (stored, rows)


@pytest.mark.timeout(300 + 3 * APPENDS)  # 2 × 500 posts and their retries on two cores
def test_two_editors_on_two_workers_append_one_valid_chain_and_losers_get_409(
    tmp_path, small_session_file
):
    site = tmp_path / "site"
    with LiveServer(site, users=USERS, sessions=[str(small_session_file)], workers=2) as server:
        pk = server.session_pks[0]
        editors = [Editor(server, "eddie", 0, pk), Editor(server, "edna", 1, pk)]
        with ThreadPoolExecutor(2 * THREADS) as pool:
            futures = [
                pool.submit(ed.attempt, n, retry=True) for n in range(APPENDS) for ed in editors
            ]
            for future in futures:
                future.result()
        assert [ed.other for ed in editors] == [[], []]
        accepted = {t: leaf for ed in editors for t, leaf in ed.accepted.items()}
        # Every label was stored in the end; on the way, losers were told (409) and tried
        # again at the leaf the refusal named.
        assert len(accepted) == 2 * APPENDS
        assert sum(ed.refused for ed in editors) > 0
        entries = server.entries(pk)
        labels = {e["label"]: e for e in entries if e["type"] == "label" and "-" in e["label"]}
        # Every accepted append is stored, each under exactly the leaf its author saw.
        assert set(labels) == set(accepted)
        assert {t: labels[t]["parentId"] for t in accepted} == accepted
        # One chain: each entry hangs from the entry stored before it; no id repeats.
        ids = [e["id"] for e in entries if e["type"] != "session"]
        assert len(set(ids)) == len(ids)
        tail = [e for e in entries if e.get("label") in labels]
        assert tail[0]["parentId"] == FIRST_TIP
        assert all(b["parentId"] == a["id"] for a, b in zip(tail, tail[1:], strict=False))
        check_counters(server, pk)


def pi_line(i: int, parent: str) -> str:
    return json.dumps({"type": "message", "id": f"f{i:07x}", "parentId": parent,
                       "timestamp": "2025-03-04T05:20:00.000Z",
                       "message": {"role": "user", "content": f"typed in Pi {i}",
                                   "timestamp": 1741065600000}})  # fmt: skip


def test_a_follower_and_web_edits_on_one_session_store_everything(tmp_path, small_session_bytes):
    sessions = tmp_path / "pi" / "--proj--"
    sessions.mkdir(parents=True)
    path = sessions / "2025-03-04T05-06-07-089Z_s.jsonl"
    path.write_bytes(small_session_bytes)
    site = tmp_path / "site"
    with LiveServer(site, users=USERS, sessions=[], workers=2) as server:
        follower = subprocess.Popen(
            [sys.executable, "manage.py", "follow", str(tmp_path / "pi"), "--interval", "0.05"],
            cwd=ROOT, env=server.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            pk = wait_for_session(server)
            editors = [Editor(server, "eddie", 0, pk), Editor(server, "edna", 1, pk)]
            lines = APPENDS // 2

            def pi_writes() -> None:
                parent = FIRST_TIP
                for i in range(lines):
                    with open(path, "a") as fh:
                        fh.write(pi_line(i, parent) + "\n")
                    parent = f"f{i:07x}"
                    time.sleep(0.01)

            writer = threading.Thread(target=pi_writes)
            writer.start()
            with ThreadPoolExecutor(4) as pool:
                futures = [pool.submit(ed.attempt, n) for n in range(lines) for ed in editors]
                for future in futures:
                    future.result(timeout=120)  # no deadlock
            writer.join(timeout=120)
            deadline = time.monotonic() + 60
            want = {f"f{i:07x}" for i in range(lines)}
            while time.monotonic() < deadline:
                stored = {e["id"] for e in server.entries(pk)}
                if want <= stored:
                    break
                time.sleep(0.2)
            assert want <= stored, f"{len(want - stored)} follower lines missing"
            assert [ed.other for ed in editors] == [[], []]
            labels = {e["label"]: e for e in server.entries(pk) if e["type"] == "label"}
            accepted = {t: leaf for ed in editors for t, leaf in ed.accepted.items()}
            assert {t: labels[t]["parentId"] for t in accepted} == accepted
            check_counters(server, pk)
        finally:
            follower.terminate()
            follower.wait(timeout=30)


def wait_for_session(server: LiveServer) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with server.db() as conn:
            # Ready, not only stored: a new session's import commits in batches while it
            # stays hidden, and its pages answer 404 until the last one.
            row = conn.execute("SELECT id FROM explorer_session WHERE state = 'ready'").fetchone()
        if row:
            return row[0]
        time.sleep(0.1)
    raise AssertionError("the follower stored no session")
