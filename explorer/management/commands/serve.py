from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from explorer.conf import asgi_target
from explorer.models import Session
from explorer.permissions import ADMIN, set_role


class Command(BaseCommand):
    help = (
        "Set up and run the app: migrate, create the first admin (credentials printed once), "
        "load the demo when there are no sessions, collect static files, start daphne."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", default="8000")
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
        call_command("migrate", interactive=False, verbosity=0)
        self._first_admin()
        if not options["no_demo"] and not Session.objects.exists():
            call_command("demo", stdout=self.stdout)
        if not settings.DEBUG:
            call_command("collectstatic", interactive=False, verbosity=0)
        if options["setup_only"]:
            return
        self._run(options)

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
        command = [
            sys.executable,
            "-m",
            "daphne",
            "-b",
            host,
            "-p",
            port,
            asgi_target(),
        ]
        if options["follow"]:
            from django.core.management import get_commands

            if "follow" in get_commands():
                # One process for the follower and daphne, so live updates reach viewers even
                # with the in-memory channel layer.
                command = [
                    sys.executable,
                    manage,
                    "follow",
                    options["follow"],
                    "--serve",
                    "--bind",
                    host,
                    "--port",
                    port,
                ]
            else:
                self.stderr.write("The follow command is not installed; --follow ignored.")
        self.stdout.write(f"Session Explorer on http://{host}:{port}/")
        sys.stdout.flush()
        os.execv(sys.executable, command)
