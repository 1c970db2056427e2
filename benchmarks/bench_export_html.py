"""HTML export benchmark: file size, time and memory of the single-file export of a
50,000-entry generated session (one route and the whole tree) against a 500-entry one,
measured in the same run.

The response is streamed, so the process's resident memory is sampled while the file is
written: it should grow with the chunk being rendered, not with the session.

Run:  python benchmarks/bench_export_html.py [--entries 50000] [--small 500] [--write-results]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.gen_session import generate_session  # noqa: E402
from benchmarks.results import write_section  # noqa: E402
from benchmarks.site import setup_site  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=50_000)
    ap.add_argument("--small", type=int, default=500)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench-export-"))
    client = setup_site(tmp, static=False)
    from django.core.cache import cache
    from django.urls import reverse

    from explorer import services, shared_copies

    rows = []
    for label, n, bp, seed in (("small", args.small, 5, 11), ("big", args.entries, 200, 7)):
        path = tmp / f"{label}.jsonl"
        generate_session(str(path), entries=n, branch_points=bp, seed=seed)
        session = services.import_bytes(path.read_bytes(), source_path=str(path)).session
        source = path.stat().st_size
        for scope in ("route", "tree"):
            shared_copies.flush()  # earlier copies land before the clear
            cache.clear()
            url = reverse("explorer:export_html", args=[session.pk])
            base = rss_mb()
            peak = base
            size = 0
            from explorer import export_html, queries

            leaf = queries.default_leaf_id(session)
            expected = export_html.estimate(
                session, export_html.plan(session, leaf=leaf, whole=scope == "tree")
            )
            cache.clear()
            t = time.perf_counter()
            first = None
            r = client.get(url, {"scope": scope} if scope == "tree" else {})
            assert r.status_code == 200, r.status_code
            for k, piece in enumerate(r.streaming_content):
                if first is None:
                    first = time.perf_counter() - t
                size += len(piece)
                if k % 500 == 0:
                    peak = max(peak, rss_mb())
            seconds = time.perf_counter() - t
            peak = max(peak, rss_mb())
            rows.append((label, n, scope, source, size, seconds, peak - base, first or 0, expected))
            print(f"{label} {scope}: {size / 2**20:.1f} MB (source {source / 2**20:.1f} MB) in "
                  f"{seconds:.1f}s, RSS +{peak - base:.0f} MB", flush=True)  # fmt: skip
            if args.write_results:  # written as each export finishes (a long run may be cut)
                write_section("export-html", _table(rows, args))

    text = _table(rows, args)
    print(text)
    if args.write_results:
        write_section("export-html", text)
    return 0


def _table(rows: list[tuple], args: argparse.Namespace) -> str:
    small = {r[2]: r for r in rows if r[0] == "small"}
    lines = [
        "## HTML export (`benchmarks/bench_export_html.py`)",
        "",
        f"SQLite, Django test client, generated sessions of {args.small} and {args.entries} entries "
        "(5 and 200 branch points), cache cleared before each export. Ratios are against the "
        "small session's export of the same scope in the same run.",
        "",
        "| session | scope | source MB | export MB | expected MB | export / source | first piece s | seconds | time ratio | RSS growth MB |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, n, scope, source, size, seconds, grow, first, expected in rows:
        ratio = seconds / small[scope][5] if small[scope][5] else 0
        lines.append(
            f"| {label} ({n}) | {scope} | {source / 2**20:.1f} | {size / 2**20:.1f} | "
            f"{expected / 2**20:.1f} | {size / source:.2f} | {first:.2f} | {seconds:.1f} | "
            f"{ratio:.0f}x | {grow:.0f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
