"""A real daphne process on a free 127.0.0.1 port with its own SQLite database.

Used by the end-to-end and browser tests and by ``benchmarks/bench_live.py``. The database is
prepared in a separate process (migrations, users, a session, logged-in cookies), then
daphne (or ``manage.py follow --serve``) serves it.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Run inside the prepared environment: users with roles, one stored session, cookies.
PREPARE = r"""
import json, sys
import django
django.setup()
from django.contrib.auth import get_user_model
from django.test import Client
from explorer import services
from explorer.permissions import set_role

spec = json.loads(sys.argv[1])
User = get_user_model()
out = {"cookies": {}, "sessions": []}
for name, role in spec["users"].items():
    user = User.objects.create_user(username=name, password="pw-" + name)
    set_role(user, role)
    client = Client()
    client.force_login(user)
    out["cookies"][name] = client.cookies["sessionid"].value
for path in spec.get("sessions", []):
    with open(path, "rb") as fh:
        result = services.import_bytes(fh.read(), source_path=path)
    assert result.ok, [str(p) for p in result.problems]
    out["sessions"].append(result.session.pk)
print(json.dumps(out))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """``with LiveServer(tmp, users={...}, sessions=[path]) as server: ...``"""

    def __init__(
        self,
        workdir: Path,
        *,
        users: dict[str, str] | None = None,
        sessions: list[str] | None = None,
        env: dict[str, str] | None = None,
        follow_dir: str | None = None,
        follow_interval: float = 0.05,
    ) -> None:
        self.workdir = Path(workdir)
        self.users = users or {"eddie": "editor", "vera": "viewer"}
        self.session_paths = sessions or []
        self.port = free_port()
        self.follow_dir = follow_dir
        self.follow_interval = follow_interval
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "sessions_site.settings",
            "SQLITE_PATH": str(self.workdir / "db.sqlite3"),
            "SESSIONS_VAR_DIR": str(self.workdir),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DEBUG": "true",
            "PYTHONPATH": str(ROOT),
            **(env or {}),
        }
        self.env.pop("REDIS_URL", None)
        self.proc: subprocess.Popen | None = None
        self.cookies: dict[str, str] = {}
        self.session_pks: list[int] = []
        self.log = self.workdir / "server.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_base(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def _run(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        if done.returncode != 0:
            raise RuntimeError(f"{args[:2]} failed:\n{done.stdout}\n{done.stderr}")
        return done.stdout

    def __enter__(self) -> LiveServer:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._run("manage.py", "migrate", "--noinput", "-v", "0")
        spec = json.dumps({"users": self.users, "sessions": self.session_paths})
        out = json.loads(self._run("-c", PREPARE, spec).strip().splitlines()[-1])
        self.cookies = out["cookies"]
        self.session_pks = out["sessions"]
        self._start()
        return self

    def _start(self) -> None:
        if self.follow_dir:
            cmd = [
                sys.executable,
                "manage.py",
                "follow",
                self.follow_dir,
                "--serve",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--interval",
                str(self.follow_interval),
            ]
        else:
            cmd = [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(self.port),
                "sessions_site.asgi:application",
            ]
        self._logfh = open(self.log, "ab")  # noqa: SIM115 - closed in __exit__
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=self.env, stdout=self._logfh, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("server exited:\n" + self.log.read_text(errors="replace"))
            try:
                with urllib.request.urlopen(self.base_url + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.__exit__()
        raise RuntimeError("server did not start:\n" + self.log.read_text(errors="replace"))

    def stop(self) -> None:
        """Stop the server (as a deploy would) but keep its database."""
        self.__exit__()
        self.proc = None

    def start(self) -> None:
        self._start()

    def run_django(self, code: str) -> str:
        """Run Python code with Django set up against this server's database."""
        return self._run("-c", "import django\ndjango.setup()\n" + code)

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if getattr(self, "_logfh", None):
            self._logfh.close()

    # -- helpers ---------------------------------------------------------------------------

    def cookie(self, user: str) -> str:
        return f"sessionid={self.cookies[user]}"

    def opener(self, user: str) -> tuple[urllib.request.OpenerDirector, CookieJar]:
        jar = CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.addheaders = [("Cookie", self.cookie(user))]
        return opener, jar

    def post(
        self, user: str, path: str, data: dict[str, str], *, htmx: bool = True
    ) -> tuple[int, str]:
        """POST like the page does: CSRF cookie from a GET, token in the header."""
        import urllib.parse

        token = self.csrf_token(user)
        body = urllib.parse.urlencode(data).encode()
        req = urllib.request.Request(self.base_url + path, data=body, method="POST")
        req.add_header("Cookie", f"{self.cookie(user)}; csrftoken={token}")
        req.add_header("X-CSRFToken", token)
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
        if htmx:
            req.add_header("HX-Request", "true")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def csrf_token(self, user: str) -> str:
        token = getattr(self, "_csrf", {}).get(user)
        if token:
            return token
        import secrets
        import string

        alphabet = string.ascii_letters + string.digits  # Django's CSRF secret alphabet
        token = "".join(secrets.choice(alphabet) for _ in range(32))
        self._csrf = {**getattr(self, "_csrf", {}), user: token}
        return token

    def db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.env["SQLITE_PATH"], timeout=30)

    def entry(self, session_pk: int, entry_id: str) -> dict:
        with self.db() as conn:
            row = conn.execute(
                "SELECT raw FROM explorer_entry WHERE session_id=? AND entry_id=?",
                (session_pk, entry_id),
            ).fetchone()
        return json.loads(row[0])

    def entries(self, session_pk: int) -> list[dict]:
        with self.db() as conn:
            rows = conn.execute(
                "SELECT raw FROM explorer_entry WHERE session_id=? ORDER BY position",
                (session_pk,),
            ).fetchall()
        return [json.loads(r[0]) for r in rows]
