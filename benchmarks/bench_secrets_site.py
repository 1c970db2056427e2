"""What finding and masking secrets costs the site, as ratios measured in one run.

1. Import: `files.import_file` of a generated session with the secret scan (every entry is
   scanned inside the import transaction) against the same import with the scan switched
   off, each into an emptied SQLite database.
2. Reads: `queries.load_entries` of the default route (what the route pages parse), masked
   as every page now gets it, against parsing the same rows without masking.

Run:  python benchmarks/bench_secrets_site.py [--entries 20000] [--repeat 3] [--write-results]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.gen_session import generate_session  # noqa: E402
from benchmarks.results import write_section  # noqa: E402


def _setup(db_path: str) -> None:
    os.environ["SQLITE_PATH"] = db_path
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sessions_site.settings")
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-secrets-site-"))
    _setup(str(tmp / "db.sqlite3"))
    from explorer import files, queries
    from explorer.models import Entry, SecretFinding, Session
    from explorer.session import jsonfmt

    path = generate_session(tmp / "session.jsonl", args.entries)
    size_mb = path.stat().st_size / 1e6
    real = files.findings_for

    def run_import(scan: bool) -> float:
        files.findings_for = real if scan else (lambda *a, **k: [])
        Session.objects.all().delete()
        gc.collect()
        start = time.perf_counter()
        result = files.import_file(str(path))
        took = time.perf_counter() - start
        assert result.ok, result.problems
        return took

    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.repeat):  # interleaved, so load on the machine hits both alike
        for scan in (False, True):
            times[scan].append(run_import(scan))
    files.findings_for = real
    session = Session.objects.get()
    findings = SecretFinding.objects.filter(session=session).count()
    route = [e.entry_id for e in queries.light_path(session, queries.default_leaf_id(session))]

    def plain() -> None:
        for k in range(0, len(route), 500):
            rows = Entry.objects.filter(session=session, entry_id__in=route[k : k + 500])
            for raw in rows.values_list("raw", flat=True):
                jsonfmt.loads(raw)

    def masked() -> None:
        for k in range(0, len(route), 500):
            queries.load_entries(session, route[k : k + 500])

    reads: dict[str, list[float]] = {"plain": [], "masked": []}
    for _ in range(args.repeat):
        for name, fn in (("plain", plain), ("masked", masked)):
            gc.collect()
            start = time.perf_counter()
            fn()
            reads[name].append(time.perf_counter() - start)
    imp0, imp1 = min(times[False]), min(times[True])
    rd0, rd1 = min(reads["plain"]), min(reads["masked"])
    body = "\n".join(
        [
            "## Secrets in the site: import scan and masked reads (`benchmarks/bench_secrets_site.py`)",
            "",
            f"Machine: {platform.platform()}, Python {platform.python_version()}, "
            f"{os.cpu_count()} CPUs (shared). Generated session: {args.entries:,} entries, "
            f"{size_mb:.1f} MB, {findings} findings; best of {args.repeat} interleaved rounds.",
            "",
            "| Measure | With secrets | Baseline (same run) | Ratio |",
            "|---|---|---|---|",
            f"| Import into SQLite | {imp1:.2f} s (scan on) | {imp0:.2f} s (scan off) | "
            f"{imp1 / imp0:.2f}x |",
            f"| Parse the default route ({len(route):,} entries) | {rd1 * 1000:.0f} ms masked "
            f"| {rd0 * 1000:.0f} ms parse only | {rd1 / rd0:.2f}x |",
            "",
        ]
    )
    print(body)
    if args.write_results:
        write_section("bench_secrets_site", body)


if __name__ == "__main__":
    main()
