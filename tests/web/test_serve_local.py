"""The README's run command serves a finished product: no debug pages, working static files
and login over plain HTTP on the loopback address."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_serve_without_debug_in_the_environment_shows_no_debug_page(tmp_path):
    port = _free_port()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DEBUG", "SECRET_KEY", "DATABASE_URL", "REDIS_URL", "SESSIONS_LOCAL_SERVE")
    }
    env.update(
        SESSIONS_VAR_DIR=str(tmp_path / "var"),
        SQLITE_PATH=str(tmp_path / "db.sqlite3"),
        STATIC_ROOT=str(tmp_path / "static"),
        DJANGO_SETTINGS_MODULE="sessions_site.settings",
    )
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--no-demo"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            try:
                if _get(base + "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.3)
        status, body = _get(base + "/no/such/page/")
        assert status == 404
        assert "Not found" in body and "URLconf" not in body and "DEBUG = True" not in body
        status, login = _get(base + "/accounts/login/")
        assert status == 200 and "csrfmiddlewaretoken" in login
        css = next(part.split('"')[0] for part in login.split('href="')[1:] if ".css" in part)
        assert _get(base + css)[0] == 200  # collected static files are served
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
