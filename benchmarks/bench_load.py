"""Load: N concurrent viewers browsing random pages of a 50,000-entry session for a while.

The server is what the README's run command starts (``manage.py serve``: daphne, DEBUG off,
the worker count ``serve`` picks: one without Redis), on a temporary SQLite database with a
generated session imported. Each viewer is a thread that logs in with its own cookie and
asks, as fast as answers come, for a random page of that session: the tree, the transcript
at a random entry (a permalink), raw vs projected, compactions, the timeline, integrity,
search, live, the entry panel of a random entry and the graph. The loop is bounded by
``--seconds``. First one viewer alone (the baseline), then ``--viewers`` at once, in the
same run: errors (anything but 200, including the server's own 503 after
``SESSIONS_REQUEST_TIMEOUT``), p50 and p99 per page and overall, and the ratio of the two
p99s. Target (issue 12): 0 errors and p99 ≤ 2 s with 50 viewers.

    .venv/bin/python -m benchmarks.bench_load [--entries 50000] [--viewers 50] [--seconds 60]
                                              [--write-results]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_live import percentile  # noqa: E402
from benchmarks.gen_session import generate_session  # noqa: E402
from benchmarks.results import write_section  # noqa: E402
from tests.live.server import LiveServer, free_port  # noqa: E402

TARGET_P99_S = 2.0


def pages(pk: int, ids: list[str]) -> list[tuple[str, Callable[[], str]]]:
    base = f"/sessions/{pk}"
    return [
        ("tree", lambda: f"{base}/"),
        ("transcript permalink", lambda: f"{base}/transcript/?entry={random.choice(ids)}"),
        ("raw vs projected", lambda: f"{base}/context/"),
        ("compactions", lambda: f"{base}/compactions/"),
        ("timeline", lambda: f"{base}/timeline/"),
        ("integrity", lambda: f"{base}/integrity/"),
        ("search", lambda: f"{base}/search/?q=fix"),
        ("live", lambda: f"{base}/live/"),
        ("entry panel", lambda: f"{base}/entry/?id={random.choice(ids)}"),
        ("graph", lambda: f"{base}/graph.svg"),
    ]


def browse(server: LiveServer, cookie: str, choices, until: float, out: list) -> None:
    while time.monotonic() < until:
        name, make = random.choice(choices)
        request = urllib.request.Request(server.base_url + make(), headers={"Cookie": cookie})
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=120) as r:
                r.read()
                status = r.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except OSError:
            status = 0
        out.append((name, status, time.perf_counter() - start))


def run_phase(server, cookie, choices, viewers: int, seconds: float) -> list:
    results: list = []
    until = time.monotonic() + seconds
    threads = [
        threading.Thread(target=browse, args=(server, cookie, choices, until, results))
        for _ in range(viewers)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def summary(results: list) -> dict:
    times = [r[2] for r in results]
    return {
        "requests": len(results),
        "errors": sum(1 for r in results if r[1] != 200),
        "p50": percentile(times, 50),
        "p99": percentile(times, 99),
        "mean": statistics.fmean(times) if times else float("nan"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=50_000)
    ap.add_argument("--viewers", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--baseline-seconds", type=float, default=20)
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench-load-"))
    path = tmp / "big.jsonl"
    generate_session(str(path), entries=args.entries, branch_points=200, seed=7)
    port = free_port()
    server = LiveServer(
        tmp / "srv",
        users={"vera": "viewer"},
        sessions=[str(path)],
        manage_args=["serve", "--no-demo", "--host", "127.0.0.1", "--port", str(port)],
        autostart=False,
    )
    with server:
        # What the README's run command serves: no DEBUG in the environment.
        server.env.pop("DEBUG", None)
        server.env.pop("SESSIONS_REQUEST_TIMEOUT", None)  # the shipped default
        server.port = server.ports[0] = port
        server.start()
        pk = server.session_pks[0]
        ids = [e["id"] for e in server.entries(pk)[::97]]
        cookie = server.cookie("vera")
        choices = pages(pk, ids)
        # Warm-up: one request of each page (the first after an import is cold).
        for _name, make in choices:
            req = urllib.request.Request(server.base_url + make(), headers={"Cookie": cookie})
            with urllib.request.urlopen(req, timeout=300) as r:
                r.read()
        one = run_phase(server, cookie, choices, 1, args.baseline_seconds)
        many = run_phase(server, cookie, choices, args.viewers, args.seconds)
        log_tail = server.log.read_text(errors="replace")[-2000:]

    s1, sn = summary(one), summary(many)
    per_page = {}
    for name, _ in choices:
        times = [r[2] for r in many if r[0] == name]
        per_page[name] = (len(times), percentile(times, 50), percentile(times, 99))
    ok = sn["errors"] == 0 and sn["p99"] <= TARGET_P99_S
    lines = [
        "## Load: concurrent viewers (`benchmarks/bench_load.py`)",
        "",
        f"`manage.py serve` as the README runs it (daphne, DEBUG off, 1 worker: SQLite and the "
        f"in-memory channel layer), a generated {args.entries:,}-entry session; {os.cpu_count()} "
        f"cores shared by the server and the client threads. Each viewer asks for random pages "
        f"(permalinks and entry panels at random entries) back to back: {args.baseline_seconds:g} s "
        f"with 1 viewer, then {args.seconds:g} s with {args.viewers}.",
        "",
        "| viewers | requests | errors | p50 s | p99 s | mean s |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n, s in ((1, s1), (args.viewers, sn)):
        lines.append(
            f"| {n} | {s['requests']} | {s['errors']} | {s['p50']:.3f} | {s['p99']:.3f} | {s['mean']:.3f} |"
        )
    lines += [
        "",
        f"p99 with {args.viewers} viewers / p99 with 1 viewer: × {sn['p99'] / s1['p99']:.2f} "
        f"(same run). Target: 0 errors and p99 ≤ {TARGET_P99_S:g} s.",
        "",
        f"| page ({args.viewers} viewers) | requests | p50 s | p99 s |",
        "|---|---:|---:|---:|",
    ]
    for name, (n, p50, p99) in per_page.items():
        lines.append(f"| {name} | {n} | {p50:.3f} | {p99:.3f} |")
    lines += ["", f"Result: {'PASS' if ok else 'FAIL'}"]
    text = "\n".join(lines)
    print(text)
    if sn["errors"]:
        print("server log tail:\n" + log_tail)
    if args.write_results:
        write_section("bench_load", text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
