from __future__ import annotations

from django.core.management.base import BaseCommand

from explorer.demo import load_demo


class Command(BaseCommand):
    help = "Create the demo sessions (written by the engine itself). Safe to run again."

    def handle(self, *args, **options) -> None:
        for result in load_demo():
            session = result.session
            if not result.ok or session is None:
                self.stderr.write(self.style.ERROR(f"demo failed: {result.errors}"))
                continue
            state = "created" if result.created else "already present"
            self.stdout.write(f"{session.display_name}: {session.entry_count} entries ({state})")
