"""``manage.py follow DIR``: ingest a Pi sessions directory as Pi writes it.

New files become sessions; appended lines are stored as soon as they are complete; a file
that was truncated or replaced is reported and not merged. ``--serve`` also runs the web
server (daphne) in the same process, so viewers see the entries live without a shared
channel layer.
"""

from __future__ import annotations

import os
import threading

from django.core.management.base import BaseCommand, CommandError

from explorer.conf import asgi_target
from explorer.follow import DirectoryFollower, follow_forever
from explorer.follow_db import FollowIngestor, start_follow_thread


class Command(BaseCommand):
    help = (
        "Follow a Pi sessions directory (one --<cwd>-- folder per project), Claude Code "
        "projects or Codex sessions (see --depth) and ingest it live."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("directory", help="Pi sessions directory, e.g. ~/.pi/agent/sessions")
        parser.add_argument(
            "--interval", type=float, default=0.25, help="Seconds between polls (default 0.25)"
        )
        parser.add_argument("--once", action="store_true", help="Ingest what is there now and exit")
        parser.add_argument(
            "--depth",
            type=int,
            default=1,
            help="Folder levels below DIR to look in (default 1: a Pi sessions root or "
            "~/.claude/projects; 3 for ~/.codex/sessions, whose files sit in YYYY/MM/DD, "
            "or for Claude Code sub-agent folders)",
        )
        parser.add_argument(
            "--serve", action="store_true", help="Also run the web server (daphne) in this process"
        )
        parser.add_argument("--bind", default="127.0.0.1", help="Address for --serve")
        parser.add_argument("--port", type=int, default=8000, help="Port for --serve")

    def handle(
        self,
        *args,
        directory: str,
        interval: float,
        once: bool,
        serve: bool,
        bind: str,
        port: int,
        depth: int = 1,
        **options,
    ) -> None:
        directory = os.path.abspath(os.path.expanduser(directory))
        if not os.path.isdir(directory):
            raise CommandError(f"Not a directory: {directory}")
        if interval <= 0:
            raise CommandError("--interval must be positive")
        if depth < 0:
            raise CommandError("--depth must be 0 or more")

        def report(level: str, message: str) -> None:
            if level == "warning":
                self.stderr.write(self.style.WARNING(message))
            else:
                self.stdout.write(message)
            self.stdout.flush()

        if serve:
            start_follow_thread(directory, interval=interval, report=report, depth=depth)
            self.stdout.write(f"Following {directory}; serving on http://{bind}:{port}/")
            self.stdout.flush()
            from daphne.cli import CommandLineInterface

            CommandLineInterface().run(["-b", bind, "-p", str(port), asgi_target()])
            return
        follower = DirectoryFollower(directory, recursive_depth=depth)
        ingestor = FollowIngestor(follower, report=report)
        if once:
            follow_forever(follower, ingestor.handle, interval=0, max_polls=1)
            return
        self.stdout.write(f"Following {directory} (Ctrl-C to stop)")
        self.stdout.flush()
        stop = threading.Event()
        try:
            follow_forever(follower, ingestor.handle, interval=interval, stop=stop)
        except KeyboardInterrupt:
            stop.set()
