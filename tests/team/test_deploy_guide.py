"""docs/deploy.md's systemd unit, run in reduced form: its own command lines, fewer workers,
a free port, and the stop systemd performs with ``KillMode=mixed`` (SIGTERM to the main
process only; it must stop its workers itself)."""

from __future__ import annotations

import re
import shlex
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.live.server import LiveServer
from tests.team.test_workers import children, wait_for

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "deploy.md"


def unit_lines() -> dict[str, str]:
    """``Key=value`` lines of the guide's session-explorer.service unit."""
    text = GUIDE.read_text()
    unit = text.split("/etc/systemd/system/session-explorer.service", 1)[1]
    unit = unit.split("```ini", 1)[1].split("```", 1)[0]
    return dict(line.split("=", 1) for line in unit.splitlines() if re.match(r"^[A-Za-z]+=", line))


def manage_args(command: str) -> list[str]:
    """The arguments after ``manage.py`` of a unit's command line."""
    argv = shlex.split(command)
    assert argv[0].endswith("/.venv/bin/python") and argv[1] == "manage.py", argv
    return argv[2:]


def test_the_unit_stops_its_workers_itself_and_names_the_documented_options():
    unit = unit_lines()
    assert unit["KillMode"] == "mixed" and unit["KillSignal"] == "SIGTERM"
    start = manage_args(unit["ExecStart"])
    assert start[0] == "serve" and "--workers" in start and "--proxy-headers" in start
    assert manage_args(unit["ExecStartPre"])[:2] == ["serve", "--setup-only"]
    assert "client_max_body_size 512m;" in GUIDE.read_text()


@pytest.mark.needs_redis
def test_the_guides_unit_commands_serve_and_stop_cleanly(tmp_path, small_session_bytes):
    unit = unit_lines()
    session = tmp_path / "small.jsonl"
    session.write_bytes(small_session_bytes)
    server = LiveServer(tmp_path / "site", sessions=[str(session)], autostart=False)
    # Reduced: two workers on the helper's free port instead of four on 8000.
    args = manage_args(unit["ExecStart"])
    args[args.index("--port") + 1] = str(server.port)
    args[args.index("--workers") + 1] = "2"
    server.manage_args = args
    with server as probe:
        pre = subprocess.run(
            [sys.executable, "manage.py", *manage_args(unit["ExecStartPre"])],
            cwd=ROOT, env=probe.env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        assert pre.returncode == 0, pre.stderr
        assert "First admin account created" in pre.stdout  # printed once, to the journal
        probe.start()
        parent = probe.proc.pid
        workers = wait_for(lambda: len(children(parent)) == 2 and children(parent), "2 workers")
        with urllib.request.urlopen(probe.base_url + "/healthz", timeout=10) as response:
            assert response.status == 200
        # systemctl stop with KillMode=mixed: SIGTERM to the main process only.
        probe.proc.send_signal(signal.SIGTERM)
        assert probe.proc.wait(timeout=int(unit["TimeoutStopSec"])) == 0
        for pid in workers:
            assert (
                not Path(f"/proc/{pid}").exists()
                or Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
            ), f"worker {pid} outlived the supervisor"
