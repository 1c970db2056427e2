"""Appends on a small and a big session in one run (issue 28: "appends grow with the session").

A label, a rename and a context edit (each with its live broadcast drained) on a generated
session of ``--small`` entries and one of ``--big`` entries, SQLite, this process. Reported:
the median of ``--repeat`` appends of each kind per session and the big/small ratio (target
at most 2x). These writes read the leaf and their targets only (``DatabaseStorage(lean=True)``),
not the route. Timed: the write itself, as the posting request pays it; the broadcast worker
renders the live frames and the meter after the commit, off the request.

    .venv/bin/python -m benchmarks.bench_appends [--small 500] [--big 50000] [--repeat 5]
        [--write-results]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.gen_session import generate_session  # noqa: E402
from benchmarks.results import write_section  # noqa: E402

TARGET = 2.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=500)
    parser.add_argument("--big", type=int, default=50000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="bench-appends-"))
    os.environ["SQLITE_PATH"] = str(tmp / "db.sqlite3")
    os.environ["SESSIONS_VAR_DIR"] = str(tmp)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sessions_site.settings")
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from explorer import broadcast, queries, services

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="-")
    results: dict[str, dict[str, float]] = {}
    for name, entries in (("small", args.small), ("big", args.big)):
        path = generate_session(tmp / f"{name}.jsonl", entries=entries, branch_points=20, seed=3)
        session = services.import_file(str(path)).session
        assert session is not None
        broadcast.drain(120)
        leaf = queries.default_leaf_id(session)
        route = [e for e in queries.light_path(session, leaf) if e.type == "message"]
        target = route[len(route) // 2].entry_id

        def timed(write) -> float:
            broadcast.drain(120)  # the previous append's frames and meter, outside the timing
            start = time.perf_counter()
            write()
            return time.perf_counter() - start

        kinds = {
            "label": lambda s=session, t=target: services.set_label(s, user, t, "x"),
            "rename": lambda s=session: services.rename_session(s, user, "bench"),
            "context edit": lambda s=session, t=target: services.add_context_edit(s, user, t, None),
        }
        results[name] = {}
        for kind, write in kinds.items():
            timed(write)  # the first one warms this process
            results[name][kind] = statistics.median(timed(write) for _ in range(args.repeat))
    lines = [
        "## Appends on a small and a big session (`benchmarks/bench_appends.py`)",
        "",
        f"SQLite, this process, generated sessions of {args.small:,} and {args.big:,} entries; "
        f"median of {args.repeat} appends of each kind: the write as a request pays it (the live "
        "frames and the meter are sent after the commit, by the broadcast worker).",
        "",
        "| append | small ms | big ms | big / small |",
        "|---|---:|---:|---:|",
    ]
    worst = 0.0
    for kind in results["small"]:
        small, big = results["small"][kind], results["big"][kind]
        worst = max(worst, big / small)
        lines.append(f"| {kind} | {small * 1000:.0f} | {big * 1000:.0f} | {big / small:.2f}x |")
    lines += ["", f"Target: at most {TARGET:g}x. Load average {os.getloadavg()[0]:.1f}."]
    text = "\n".join(lines)
    print(text)
    if args.write_results:
        write_section("bench_appends", text)
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
