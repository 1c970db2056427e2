"""Real daphne processes on free 127.0.0.1 ports with a database of their own.

Used by the end-to-end, browser and team tests and by ``benchmarks/bench_live.py``. The
database is prepared in a separate process (migrations, users, a session, logged-in cookies),
then daphne (or ``manage.py follow --serve``, or ``manage.py serve --workers N``) serves it.

The database is never the configured one: the helper creates users with known passwords. On
PostgreSQL (``DATABASE_URL``) it is a fresh database on the same server, named after the
configured one and dropped at the end; otherwise a SQLite file in the work directory.
``REDIS_URL`` is kept, under a key prefix of the server's own, so several daphne processes
share the channel layer exactly as a deployment's workers do.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

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


def postgres_url() -> str | None:
    """The configured ``DATABASE_URL`` when it names PostgreSQL, else None."""
    url = os.environ.get("DATABASE_URL", "")
    return url if urlsplit(url).scheme in ("postgres", "postgresql", "pgsql") else None


def _pg_connect(url: str):
    import psycopg

    parts = urlsplit(url)
    return psycopg.connect(
        host=unquote(parts.hostname or "") or None,
        port=parts.port or None,
        user=unquote(parts.username or "") or None,
        password=unquote(parts.password or "") or None,
        dbname=unquote(parts.path.lstrip("/")) or None,
        autocommit=True,
        connect_timeout=10,
    )


class _PgDb:
    """A PostgreSQL connection answering the helper's queries written with ``?`` marks,
    used like ``sqlite3.connect`` (``with server.db() as conn: conn.execute(...)``)."""

    def __init__(self, url: str) -> None:
        self._conn = _pg_connect(url)

    def execute(self, sql: str, params: tuple = ()) -> Any:
        return self._conn.execute(sql.replace("?", "%s"), params)

    def __enter__(self) -> _PgDb:
        return self

    def __exit__(self, *exc) -> None:
        self._conn.close()


class LiveServer:
    """``with LiveServer(tmp, users={...}, sessions=[path]) as server: ...``

    ``workers=N`` starts N separate daphne processes (ports ``ports[0..N-1]``) on the same
    database and channel layer; ``serve_workers=N`` runs ``manage.py serve --workers N``
    instead, N daphne processes behind the one port; ``manage_args`` runs any other
    ``manage.py`` command line that serves on ``port``. ``autostart=False`` prepares the
    database only; ``start()`` serves."""

    def __init__(
        self,
        workdir: Path,
        *,
        users: dict[str, str] | None = None,
        sessions: list[str] | None = None,
        env: dict[str, str] | None = None,
        follow_dir: str | None = None,
        follow_interval: float = 0.05,
        workers: int = 1,
        serve_workers: int | None = None,
        manage_args: list[str] | None = None,
        autostart: bool = True,
    ) -> None:
        self.workdir = Path(workdir)
        self.users = users or {"eddie": "editor", "vera": "viewer"}
        self.session_paths = sessions or []
        self.ports = [free_port() for _ in range(workers)]
        self.port = self.ports[0]
        self.follow_dir = follow_dir
        self.follow_interval = follow_interval
        self.serve_workers = serve_workers
        self.manage_args = manage_args
        self.autostart = autostart
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "sessions_site.settings",
            "SQLITE_PATH": str(self.workdir / "db.sqlite3"),
            "SESSIONS_VAR_DIR": str(self.workdir),
            "ALLOWED_HOSTS": "127.0.0.1,localhost",
            "DEBUG": "true",
            "PYTHONPATH": str(ROOT),
            # This server's channel groups and cache keys never meet another's on a shared Redis.
            "REDIS_PREFIX": f"live-{secrets.token_hex(4)}",
            # Tests are not timed: a page slowed by a loaded CI machine must still answer.
            "SESSIONS_REQUEST_TIMEOUT": "600",
            **(env or {}),
        }
        self.pg_admin_url = postgres_url()
        self.database_name: str | None = None
        if self.pg_admin_url:
            base = urlsplit(self.pg_admin_url).path.lstrip("/") or "explorer"
            # PostgreSQL names are at most 63 bytes; keep the configured name recognisable.
            self.database_name = (
                f"test_{re.sub(r'[^a-z0-9_]', '_', base.lower())[:30]}_live_{secrets.token_hex(4)}"
            )
            parts = urlsplit(self.pg_admin_url)
            self.env["DATABASE_URL"] = urlunsplit(parts._replace(path="/" + self.database_name))
        else:
            self.env.pop("DATABASE_URL", None)
        self.procs: list[subprocess.Popen] = []
        self.cookies: dict[str, str] = {}
        self.session_pks: list[int] = []
        self.log = self.workdir / "server.log"

    @property
    def proc(self) -> subprocess.Popen | None:
        return self.procs[0] if self.procs else None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_base(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def worker_url(self, index: int) -> str:
        return f"http://127.0.0.1:{self.ports[index]}"

    def worker_ws(self, index: int) -> str:
        return f"ws://127.0.0.1:{self.ports[index]}"

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
        if self.database_name:
            with _pg_connect(self.pg_admin_url) as conn:
                conn.execute(f'CREATE DATABASE "{self.database_name}"')
        try:
            self._run("manage.py", "migrate", "--noinput", "-v", "0")
            spec = json.dumps({"users": self.users, "sessions": self.session_paths})
            out = json.loads(self._run("-c", PREPARE, spec).strip().splitlines()[-1])
            self.cookies = out["cookies"]
            self.session_pks = out["sessions"]
            if self.autostart:
                self._start()
        except BaseException:
            self.close()
            raise
        return self

    def _commands(self) -> list[list[str]]:
        if self.follow_dir:
            return [
                [
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
            ]
        if self.manage_args is not None:
            return [[sys.executable, "manage.py", *self.manage_args]]
        if self.serve_workers is not None:
            return [
                [
                    sys.executable,
                    "manage.py",
                    "serve",
                    "--no-demo",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.port),
                    "--workers",
                    str(self.serve_workers),
                ]
            ]
        return [
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "sessions_site.asgi:application",
            ]
            for port in self.ports
        ]

    def _start(self) -> None:
        self._logfh = open(self.log, "ab")  # noqa: SIM115 - closed in stop()
        commands = self._commands()
        self.procs = [
            subprocess.Popen(
                cmd, cwd=ROOT, env=self.env, stdout=self._logfh, stderr=subprocess.STDOUT
            )
            for cmd in commands
        ]
        urls = (
            [self.base_url]
            if len(commands) == 1
            else [self.worker_url(i) for i in range(len(commands))]
        )
        deadline = time.monotonic() + 120
        for proc, url in zip(self.procs, urls, strict=True):
            while True:
                if proc.poll() is not None:
                    self.stop()
                    raise RuntimeError("server exited:\n" + self.log.read_text(errors="replace"))
                try:
                    with urllib.request.urlopen(url + "/healthz", timeout=2) as r:
                        if r.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        "server did not start:\n" + self.log.read_text(errors="replace")
                    )
                time.sleep(0.1)

    def stop(self) -> None:
        """Stop the server processes (as a deploy would) but keep the database."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        self.procs = []
        if getattr(self, "_logfh", None):
            self._logfh.close()
            self._logfh = None

    def start(self) -> None:
        self._start()

    def run_django(self, code: str) -> str:
        """Run Python code with Django set up against this server's database."""
        return self._run("-c", "import django\ndjango.setup()\n" + code)

    def close(self) -> None:
        """Stop the processes and drop the PostgreSQL database this helper created."""
        self.stop()
        if self.database_name:
            _drop_database(self.pg_admin_url, self.database_name)
            self.database_name = None

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers ---------------------------------------------------------------------------

    def cookie(self, user: str) -> str:
        return f"sessionid={self.cookies[user]}"

    def opener(self, user: str) -> tuple[urllib.request.OpenerDirector, CookieJar]:
        jar = CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.addheaders = [("Cookie", self.cookie(user))]
        return opener, jar

    def post(
        self, user: str, path: str, data: dict[str, str], *, htmx: bool = True, via: int = 0
    ) -> tuple[int, str]:
        """POST like the page does: CSRF cookie from a GET, token in the header.

        ``via`` picks the worker (``workers=N``) that receives the request."""
        import urllib.parse

        token = self.csrf_token(user)
        body = urllib.parse.urlencode(data).encode()
        req = urllib.request.Request(self.worker_url(via) + path, data=body, method="POST")
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

    def db(self) -> sqlite3.Connection | _PgDb:
        """A direct connection to this server's database (queries use ``?`` marks)."""
        if self.pg_admin_url:
            return _PgDb(self.env["DATABASE_URL"])
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


def _drop_database(admin_url: str, name: str, wait: float = 30.0) -> None:
    """Drop the helper's database once its own connections are ended.

    Not ``WITH (FORCE)``: that also tries to end an autovacuum worker busy on the database,
    which runs as the bootstrap superuser, and the test role may not end it ("must be a
    member of the role whose process is being terminated"). A plain drop cancels
    autovacuum itself; the role's own sessions are ended first, and a drop that still finds
    the database in use (a session ending meanwhile) is tried again."""
    import psycopg

    deadline = time.monotonic() + wait
    while True:
        with _pg_connect(admin_url) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND usename = current_user AND pid <> pg_backend_pid()",
                [name],
            )
            try:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
                return
            except psycopg.errors.ObjectInUse:
                if time.monotonic() > deadline:
                    raise
        time.sleep(0.2)
