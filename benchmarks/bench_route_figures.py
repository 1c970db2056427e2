"""What storing route figures costs an import, and what filling them costs migration 0021.

Imports the same generated session twice into a fresh SQLite database, once with the route
figure writer and once with it switched off, and fills the figures of the stored session
as migration 0021 does. Reported as ratios of this process's CPU time (the database is in
process; wall time on a shared machine mostly measures the neighbours), one run each.

Run:  python benchmarks/bench_route_figures.py [--entries 20000] [--big-mb 0]
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.gen_session import big_shapes_for, generate_session  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--big-mb", type=int, default=0, help="big shapes of about this size")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-route-figures-")
    os.environ["SQLITE_PATH"] = os.path.join(tmp, "db.sqlite3")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sessions_site.settings")
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    os.environ["SESSIONS_CACHE"] = "locmem"
    import django

    django.setup()
    from django.apps import apps
    from django.core.management import call_command
    from django.db import transaction

    from explorer import files, route_store
    from explorer.models import RouteFigure, Session

    call_command("migrate", verbosity=0)
    path = os.path.join(tmp, "session.jsonl")
    big = big_shapes_for(args.big_mb * 1_000_000, args.entries) if args.big_mb else None
    generate_session(path, entries=args.entries, branch_points=100, seed=7, big=big)
    print(f"{args.entries} entries, {os.path.getsize(path) / 1e6:.1f} MB")

    writer = route_store.FigureWriter
    kept = (writer.add, writer.write, writer.finish)

    def imported(with_figures: bool) -> float:
        Session.every.all().delete()
        writer.add, writer.write, writer.finish = (
            kept if with_figures else (lambda *a, **k: None,) * 3  # type: ignore[assignment]
        )
        start = time.process_time()
        files.import_file(path)
        spent = time.process_time() - start
        writer.add, writer.write, writer.finish = kept  # type: ignore[method-assign]
        rows = RouteFigure.objects.count()
        print(
            f"import {'with' if with_figures else 'without'} figures: {spent:.2f} s CPU, {rows} rows"
        )
        return spent

    after = imported(True)
    before = imported(False)
    print(f"import with figures / without: {after / before:.2f}")
    migration = importlib.import_module("explorer.migrations.0021_route_figures")
    start = time.process_time()
    with transaction.atomic():
        migration.fill_figures(apps, None)
    filled = time.process_time() - start
    print(f"migration 0021 fill: {filled:.2f} s CPU, {filled / before:.2f} x the import without")


if __name__ == "__main__":
    main()
