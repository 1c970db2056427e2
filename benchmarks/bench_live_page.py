"""Live tab page benchmark: a 50,000-entry session against a 500-entry one, in one run.

The Live tab shows the Transcript tab's window of the newest route and the Tree tab's paged
text tree, so its HTML and its time must not grow with the session (issue 10: the 89 MB
session's Live page was 1.1 MB of HTML and took 7-9 s). Each page is requested once cold
(cache cleared) and then ``--repeat`` times; the ratio uses the medians.

Run:  python benchmarks/bench_live_page.py [--entries 50000] [--small 500] [--repeat 5] [--write-results]
"""

from __future__ import annotations

import argparse
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
from benchmarks.site import setup_site  # noqa: E402

TARGET = 2.0


def main(argv: list[str] | None = None) -> int:
    """Import both sessions, time the Live tab of each, print (and optionally record) ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=50_000)
    ap.add_argument("--small", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench-live-page-"))
    client = setup_site(tmp)
    from django.core.cache import cache
    from django.urls import reverse

    from explorer import services, shared_copies

    figures = {}
    for label, n, bp, seed in (("small", args.small, 5, 11), ("big", args.entries, 200, 7)):
        path = tmp / f"{label}.jsonl"
        generate_session(str(path), entries=n, branch_points=bp, seed=seed)
        session = services.import_bytes(path.read_bytes(), source_path=str(path), user=None).session
        url = reverse("explorer:live", args=[session.pk])
        shared_copies.flush()  # earlier copies land before the clear
        cache.clear()
        t = time.perf_counter()
        r = client.get(url)
        cold = time.perf_counter() - t
        assert r.status_code == 200, r.status_code
        warm = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            r = client.get(url)
            warm.append(time.perf_counter() - t)
        figures[label] = (n, len(r.content), cold, statistics.median(warm))
        print(label, figures[label], flush=True)

    (sn, sb, sc, sw), (bn, bb, bc, bw) = figures["small"], figures["big"]
    ok = bw / sw <= TARGET and bb / sb <= TARGET
    text = "\n".join([
        "## Live tab page (`benchmarks/bench_live_page.py`)",
        "",
        f"SQLite, Django test client, local-memory cache; generated sessions of {sn} and {bn} entries. "
        f"Median of {args.repeat} requests after one cold request (cache cleared).",
        "",
        "| session | HTML bytes | cold ms | median ms |",
        "|---|---:|---:|---:|",
        f"| {sn} entries | {sb:,} | {sc * 1000:.0f} | {sw * 1000:.1f} |",
        f"| {bn} entries | {bb:,} | {bc * 1000:.0f} | {bw * 1000:.1f} |",
        "",
        f"Ratio big/small: HTML × {bb / sb:.2f}, median time × {bw / sw:.2f}, cold time × {bc / sc:.2f} "
        f"(target ≤ {TARGET:g} for HTML and median). The page is the newest route's last 60 entries "
        "and one page of the text tree; earlier entries load on scroll. A cold request (the first "
        "after an append) builds the route map, the folded tree and its graph layout, which the "
        "Tree and Transcript tabs share; it is not bounded by the ratio.",
        f"Result: {'PASS' if ok else 'FAIL'}",
    ])  # fmt: skip
    print(text)
    if args.write_results:
        write_section("bench_live_page", text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
