"""Rescan stored sessions for secrets after the scanner's rules changed."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser

from explorer import services
from explorer.models import Session
from explorer.secrets import RULES_VERSION


class Command(BaseCommand):
    help = (
        "Scan every session whose findings were made with older secret rules again "
        "(all sessions with --all). Decisions (false positive, rotated) are kept."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--all", action="store_true", help="rescan every session")

    def handle(self, *args, **options) -> None:
        sessions = Session.objects.order_by("pk")
        if not options["all"]:
            sessions = sessions.exclude(secrets_rules=RULES_VERSION)
        done = 0
        for session in sessions.iterator():
            count = services.rescan_secrets(session, force=options["all"])
            if count is not None:
                done += 1
                self.stdout.write(f"{session.display_name}: {count} findings")
        self.stdout.write(f"{done} sessions rescanned with rules {RULES_VERSION}")
