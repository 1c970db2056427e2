from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError

from explorer import files
from explorer.models import Session


class Command(BaseCommand):
    help = "Write a stored session as JSONL (byte-identical to the import plus appended entries)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("session_id", help="the session's header id")
        parser.add_argument("-o", "--output", default="-", help="output file ('-' = stdout)")

    def handle(self, *args, **options) -> None:
        session = Session.objects.filter(session_id=options["session_id"]).first()
        if session is None:
            raise CommandError(f"No session with id {options['session_id']}")
        target = options["output"]
        if target == "-":
            out = sys.stdout.buffer
            for chunk in files.iter_export(session):
                out.write(chunk)
            out.flush()
            return
        with open(target, "wb") as fh:
            for chunk in files.iter_export(session):
                fh.write(chunk)
        self.stderr.write(f"wrote {target}")
