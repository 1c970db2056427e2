"""``manage.py serve``: set up and run the app, with one daphne or N behind one address.

Several workers use the pre-fork model daphne documents for process managers (``daphne
--fd``): this command binds the listening socket once and starts N daphne processes that all
accept connections from it, so the kernel spreads connections over them and a restart of one
worker never closes the port. They share the database and the channel layer, which must
therefore be Redis (``REDIS_URL``): with the in-memory layer a viewer on one worker would
never hear of an entry written through another. A worker that dies is started again.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from explorer.conf import asgi_target
from explorer.models import Session
from explorer.permissions import ADMIN, set_role

# A worker that dies this many times within RESTART_WINDOW seconds is a broken deployment,
# not bad luck: give up loudly instead of restarting it forever.
MAX_RESTARTS = 5
RESTART_WINDOW = 60.0


def cores() -> int:
    """Cores this process may run on (a container's CPU set, not the host's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def shared_channel_layer() -> bool:
    return settings.CHANNEL_LAYERS["default"]["BACKEND"] != "channels.layers.InMemoryChannelLayer"


class Command(BaseCommand):
    help = (
        "Set up and run the app: migrate, create the first admin (credentials printed once), "
        "load the demo when there are no sessions, collect static files, start daphne "
        "(--workers N: N daphne processes behind one address)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", default="8000")
        parser.add_argument(
            "--workers",
            type=int,
            default=None,
            help="daphne processes sharing the address (default: one per core when REDIS_URL "
            "is set, else 1; more than 1 needs REDIS_URL)",
        )
        parser.add_argument(
            "--proxy-headers",
            action="store_true",
            help="take the client address and scheme from X-Forwarded-For / X-Forwarded-Proto "
            "(only behind a reverse proxy that sets them)",
        )
        parser.add_argument(
            "--follow",
            metavar="DIR",
            default=None,
            help="also follow a Pi sessions directory (live import)",
        )
        parser.add_argument("--no-demo", action="store_true", help="do not load demo sessions")
        parser.add_argument(
            "--setup-only", action="store_true", help="do everything except starting the server"
        )

    def handle(self, *args, **options) -> None:
        workers = options["workers"]
        if workers is None:
            workers = cores() if shared_channel_layer() else 1
        if workers < 1:
            raise CommandError("--workers must be at least 1")
        if workers > 1 and not shared_channel_layer():
            raise CommandError(
                f"--workers {workers} needs REDIS_URL: with the in-memory channel layer a "
                "viewer on one worker would miss the entries written through another."
            )
        if workers > 1 and ":" in options["host"]:
            raise CommandError("--workers > 1 listens on IPv4 only; use an IPv4 --host")
        options["workers"] = workers
        local = "DEBUG" not in os.environ
        if local:
            # The served processes run without debug pages (see settings.LOCAL_SERVE); this
            # process keeps its own settings for the set-up steps.
            os.environ["SESSIONS_LOCAL_SERVE"] = "1"
            os.environ["DEBUG"] = "false"
        call_command("migrate", interactive=False, verbosity=0)
        from explorer.files.progress import clear_abandoned

        if gone := clear_abandoned():  # imports a killed process left unfinished
            self.stdout.write(f"Removed {gone} unfinished import(s) of a stopped process.")
        self._first_admin()
        if not options["no_demo"] and not Session.objects.exists():
            call_command("demo", stdout=self.stdout)
        if local:
            # Collected with the served processes' storage (hashed names, compressed).
            manage = str(Path(settings.BASE_DIR) / "manage.py")
            subprocess.run(
                [sys.executable, manage, "collectstatic", "--noinput", "-v0"],
                env=os.environ,
                check=True,
            )
        elif not settings.DEBUG:
            call_command("collectstatic", interactive=False, verbosity=0)
        if options["setup_only"]:
            return
        if workers == 1:
            self._run(options)
        else:
            self._run_workers(options)

    def _first_admin(self) -> None:
        User = get_user_model()
        if (
            User.objects.filter(is_superuser=True).exists()
            or User.objects.filter(groups__name=ADMIN).exists()
        ):
            return
        username = os.environ.get("SESSIONS_ADMIN_USERNAME", "admin")
        password = secrets.token_urlsafe(12)
        user = User.objects.create_superuser(username=username, email="", password=password)
        set_role(user, ADMIN)
        bar = "=" * 64
        self.stdout.write(
            self.style.SUCCESS(
                f"\n{bar}\nFirst admin account created (shown only this once):\n"
                f"  username: {username}\n  password: {password}\n"
                f"Change it under Users once logged in.\n{bar}\n"
            )
        )

    def _run(self, options) -> None:
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        host, port = options["host"], str(options["port"])
        proxy = ["--proxy-headers"] if options["proxy_headers"] else []
        command = [sys.executable, "-m", "daphne", "-b", host, "-p", port, *proxy, asgi_target()]
        if options["follow"]:
            # One process for the follower and daphne, so live updates reach viewers even
            # with the in-memory channel layer.
            command = [sys.executable, manage, "follow", options["follow"], "--serve",
                       "--bind", host, "--port", port]  # fmt: skip
        self.stdout.write(f"Session Explorer on http://{host}:{port}/")
        sys.stdout.flush()
        os.execv(sys.executable, command)

    def _run_workers(self, options) -> None:
        host, port, count = options["host"], int(options["port"]), options["workers"]
        try:
            listener = socket.create_server((host, port), backlog=1024)
        except OSError as exc:
            raise CommandError(f"cannot listen on {host}:{port}: {exc}") from None
        listener.set_inheritable(True)
        fd = listener.fileno()
        proxy = ["--proxy-headers"] if options["proxy_headers"] else []
        commands = {
            f"worker {i + 1}": [
                sys.executable,
                "-m",
                "daphne",
                "--fd",
                str(fd),
                *proxy,
                asgi_target(),
            ]
            for i in range(count)
        }
        if options["follow"]:
            # The follower is one process of its own; Redis carries its entries to every worker.
            manage = str(Path(settings.BASE_DIR) / "manage.py")
            commands["follower"] = [sys.executable, manage, "follow", options["follow"]]
        # The workers open their own connections; this supervisor needs none.
        for conn in connections.all():
            conn.close()
            if hasattr(conn, "close_pool"):
                conn.close_pool()
        self.stdout.write(f"Session Explorer on http://{host}:{port}/ ({count} daphne workers)")
        sys.stdout.flush()
        code = Supervisor(commands, pass_fds=(fd,), report=self._report).run()
        listener.close()
        if code:
            raise CommandError("a worker kept failing; stopped (see its output above)")

    def _report(self, message: str) -> None:
        self.stdout.write(message)
        self.stdout.flush()


class Supervisor:
    """Keeps named child processes running until SIGTERM/SIGINT, then stops them all."""

    def __init__(
        self, commands: dict[str, list[str]], *, pass_fds: tuple[int, ...], report
    ) -> None:
        self.commands = commands
        self.pass_fds = pass_fds
        self.report = report
        self.procs: dict[str, subprocess.Popen] = {}
        self.deaths: list[float] = []
        self.stopping = False

    def _spawn(self, name: str) -> None:
        proc = subprocess.Popen(self.commands[name], pass_fds=self.pass_fds)
        self.procs[name] = proc
        self.report(f"{name}: pid {proc.pid}")

    def _stop(self, signum: int, frame) -> None:
        self.stopping = True

    def run(self) -> int:
        """0 after a requested stop, 1 when a child died too often."""
        previous = {sig: signal.signal(sig, self._stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        failed = False
        try:
            for name in self.commands:
                self._spawn(name)
            while not self.stopping:
                time.sleep(0.2)
                for name, proc in list(self.procs.items()):
                    code = proc.poll()
                    if code is None or self.stopping:
                        continue
                    now = time.monotonic()
                    self.deaths = [t for t in self.deaths if now - t < RESTART_WINDOW] + [now]
                    if len(self.deaths) > MAX_RESTARTS:
                        self.report(f"{name} exited with {code}; too many restarts, stopping")
                        failed = True
                        self.stopping = True
                        break
                    self.report(f"{name} exited with {code}; starting it again")
                    self._spawn(name)
        finally:
            self._terminate()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 1 if failed else 0

    def _terminate(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 15  # daphne closes its websockets gracefully
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
