"""Appends on a small and a big session in one run (issue 28: "appends grow with the session").

A label, a rename, a context edit and a followed line (each with its live broadcast drained)
on a generated session of ``--small`` entries and on the ``--big`` ones (and, with
``--shape-mb``, one with multi-MB tool results on its routes), SQLite, this process. Reported:
the median of ``--repeat`` appends of each kind per session and the big/small ratio (target
at most 2x). These writes read the leaf and their targets only (``DatabaseStorage(lean=True)``),
not the route. Timed: the write itself, as the posting request pays it; the broadcast worker
renders the live frames and the meter after the commit, off the request.

    .venv/bin/python -m benchmarks.bench_appends [--small 500] [--big 50000,150000]
        [--shape-mb 441] [--repeat 5] [--write-results]
"""

from __future__ import annotations

import argparse
import itertools
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


def _followed_line(session, k: int) -> tuple[str, str]:
    """A user message at the session's newest entry, as a followed agent file grows."""
    import json
    import uuid

    tip = session.entries.order_by("-position").values_list("entry_id", flat=True).first()
    eid = uuid.uuid4().hex[:12]
    line = {
        "type": "message",
        "id": eid,
        "parentId": tip,
        "timestamp": "2026-12-07T00:00:00.000Z",
        "message": {"role": "user", "content": f"followed line {k}", "timestamp": 0},
    }
    return json.dumps(line), eid


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=500)
    parser.add_argument(
        "--big", default="50000", help="comma-separated entry counts of the big sessions"
    )
    parser.add_argument(
        "--shape-mb",
        type=int,
        default=0,
        help="also a session of --shape-entries entries with multi-MB tool results, this many MB",
    )
    parser.add_argument("--shape-entries", type=int, default=50_000)
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

    from benchmarks.gen_session import big_shapes_for
    from explorer import broadcast, queries, services

    call_command("migrate", verbosity=0)
    user = get_user_model().objects.create_user("bench", password="-")
    plans: list[tuple[str, int, object]] = [(f"{args.small:,} entries", args.small, None)]
    plans += [(f"{int(n):,} entries", int(n), None) for n in args.big.split(",") if n]
    if args.shape_mb:
        big = big_shapes_for(args.shape_mb * 1024 * 1024, args.shape_entries)
        plans.append((f"{args.shape_mb} MB, multi-MB lines", args.shape_entries, big))
    results: dict[str, dict[str, float]] = {}
    sizes: dict[str, str] = {}
    for k, (name, entries, shapes) in enumerate(plans):
        path = generate_session(
            tmp / f"s{k}.jsonl", entries=entries, branch_points=20, seed=3, big=shapes
        )
        sizes[name] = f"{path.stat().st_size / 1e6:,.0f} MB"
        session = services.import_file(str(path)).session
        assert session is not None
        path.unlink()
        broadcast.drain(120)
        leaf = queries.default_leaf_id(session)
        route = [e for e in queries.light_path(session, leaf) if e.type == "message"]
        target = route[len(route) // 2].entry_id
        # A fresh worker's state: nothing this process read of the session is kept.
        from django.core.cache import cache

        cache.clear()
        numbers = itertools.count()

        def followed(s=session, counter=numbers) -> None:
            line, eid = _followed_line(s, next(counter))
            if services.append_lines_verbatim(s, [line], [eid], source="follow") != 1:
                raise RuntimeError("the followed line was not stored")

        def timed(write) -> float:
            broadcast.drain(120)  # the previous append's frames and meter, outside the timing
            start = time.perf_counter()
            write()
            return time.perf_counter() - start

        kinds = {
            "label": lambda s=session, t=target: services.set_label(s, user, t, "x"),
            "rename": lambda s=session: services.rename_session(s, user, "bench"),
            "context edit": lambda s=session, t=target: services.add_context_edit(s, user, t, None),
            "followed line": followed,
        }
        results[name] = {}
        for kind, write in kinds.items():
            timed(write)  # the first one warms this process
            results[name][kind] = statistics.median(timed(write) for _ in range(args.repeat))
    small_name = plans[0][0]
    bigs = [p[0] for p in plans[1:]]
    lines = [
        "## Appends on a small and a big session (`benchmarks/bench_appends.py`)",
        "",
        "SQLite, this process, generated sessions ("
        + ", ".join(f"{n}: {sizes[n]}" for n, *_ in plans)
        + f"); median of {args.repeat} appends of each kind after one that warms the process "
        "(the shared cache cleared after each import): the write as a request pays it (the "
        "live frames and the meter are sent after the commit, by the broadcast worker). The "
        "context edit targets an entry half way up the default route; the followed line is "
        "a user message at the tip through the follower's path.",
        "",
        "| append | "
        + " | ".join(f"{n} ms" for n, *_ in plans)
        + " | "
        + " | ".join(f"{b} / small" for b in bigs)
        + " |",
        "|---|" + "---:|" * (len(plans) + len(bigs)),
    ]
    worst = 0.0
    for kind in results[small_name]:
        small = results[small_name][kind]
        ratios = [results[b][kind] / small for b in bigs]
        worst = max([worst, *ratios])
        lines.append(
            f"| {kind} | "
            + " | ".join(f"{results[n][kind] * 1000:.0f}" for n, *_ in plans)
            + " | "
            + " | ".join(f"{r:.2f}x" for r in ratios)
            + " |"
        )
    lines += ["", f"Target: at most {TARGET:g}x. Load average {os.getloadavg()[0]:.1f}."]
    text = "\n".join(lines)
    print(text)
    if args.write_results:
        write_section("bench_appends", text)
    return 0 if worst <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
