"""Load: N concurrent viewers browsing random pages of a 50,000-entry session for a while.

The server is what the README's run command starts (``manage.py serve``: daphne, DEBUG off,
the worker count ``serve`` picks: one without Redis), on a temporary SQLite database with a
generated session imported. Each viewer is a thread logged in as an account of its own
(``viewer0`` … ``viewerN``) that asks, as fast as answers come, for a random page of that
session: the tree, the transcript at a random entry (a permalink), raw vs projected,
compactions, the timeline, integrity, search, live, the entry panel of a random entry, the
graph, and Compare of two random leaves. With ``--leaves random`` (the default, issue 28)
every page is asked at a random leaf of the session (``?leaf=``), so most requests are a
first visit to a route; ``--leaves default`` asks at each reader's cursor (the default
route), as issue 12 did. The loop is bounded by ``--seconds``. First one viewer alone (the
baseline), then ``--viewers`` at once, in the same run: errors (anything but 200, including
the server's own 503 after ``SESSIONS_REQUEST_TIMEOUT``), p50 and p99 per page and overall,
the ratio of the two p99s and the slowest requests. Targets: 0 errors and the p99 with many
viewers within 3x of one viewer's (issue 28; issue 12 asked p99 ≤ 2 s, printed too). The
exit status is 1 when a target is missed.

``--shape route4mb`` serves issue 28's session instead: the 50,000 entries with 100 tool
results of about 4 MB on the default route, 441 MB (``bench_pages.session_file``); with
``--cache-dir`` the file and its imported database are made once there and shared with
``bench_pages`` (per app commit), and the server starts on a copy of that database.

``--pause S`` makes each viewer wait a random 0-2·S seconds after each answer, as a person
reading a page does (mean S); the default 0 asks back to back. Back to back, one worker
serves the viewers one request at a time, so the p99 of fifty is about fifty times the mean
request whatever the pages cost: the ratio then measures the queue. With a pause it measures
whether the server keeps up with fifty people reading.

The one viewer of the baseline asks back to back whatever ``--pause`` says
(``--baseline-pause`` to change it): alone, its requests cost the same at any pace, and a
paced 20 s phase held two requests, whose p99 said nothing. The tables give each page's
requests, p50, p99 and mean in both phases, so a tail can be told from a page slow on its
own; ``--py-spy FILE`` samples the server's threads during the many-viewer phase (where the
time goes under load), and the load averages before and after are printed.

    .venv/bin/python -m benchmarks.bench_load [--entries 50000] [--viewers 50] [--seconds 60]
                                              [--leaves random|default] [--pause S]
                                              [--shape default|route4mb] [--cache-dir DIR]
                                              [--baseline-pause S] [--py-spy FILE]
                                              [--write-results]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
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

TARGET_P99_S = 2.0  # issue 12
TARGET_P99_RATIO = 3.0  # issue 28: many viewers' p99 over one viewer's, same run


def pages(pk: int, ids: list[str], leaves: list[str]) -> list[tuple[str, Callable[[], str]]]:
    """The pages a viewer picks from; ``leaves`` non-empty: each at a random one of them."""
    base = f"/sessions/{pk}"

    def at(url: str) -> Callable[[], str]:
        if not leaves:
            return lambda: url
        mark = "&" if "?" in url else "?"
        return lambda: f"{url}{mark}leaf={random.choice(leaves)}"

    def entry(url: str) -> Callable[[], str]:
        return lambda: (
            url + random.choice(ids) + (f"&leaf={random.choice(leaves)}" if leaves else "")
        )

    chosen = [
        ("tree", at(f"{base}/")),
        ("transcript permalink", entry(f"{base}/transcript/?entry=")),
        ("raw vs projected", at(f"{base}/context/")),
        ("compactions", at(f"{base}/compactions/")),
        ("timeline", at(f"{base}/timeline/")),
        ("integrity", at(f"{base}/integrity/")),
        ("search", at(f"{base}/search/?q=fix")),
        ("live", at(f"{base}/live/")),
        ("entry panel", entry(f"{base}/entry/?id=")),
        ("graph", at(f"{base}/graph.svg")),
    ]
    if leaves:
        chosen.append(
            (
                "compare two leaves",
                lambda: f"{base}/compare/?a={random.choice(leaves)}&b={random.choice(leaves)}",
            )
        )
    return chosen


def browse(
    server: LiveServer, cookie: str, choices, until: float, out: list, pause: float = 0.0
) -> None:
    while time.monotonic() < until:
        if pause:
            time.sleep(random.uniform(0, 2 * pause))
        name, make = random.choice(choices)
        url = make()
        request = urllib.request.Request(server.base_url + url, headers={"Cookie": cookie})
        start = time.perf_counter()
        try:
            with urllib.request.urlopen(request, timeout=120) as r:
                r.read()
                status = r.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        except OSError:
            status = 0
        out.append((name, status, time.perf_counter() - start, url))


def run_phase(
    server, cookies: list[str], choices, viewers: int, seconds: float, pause: float = 0.0
) -> list:
    """``viewers`` threads, each with the cookie of an account of its own."""
    results: list = []
    until = time.monotonic() + seconds
    threads = [
        threading.Thread(target=browse, args=(server, cookies[i], choices, until, results, pause))
        for i in range(viewers)
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


def _load() -> str:
    """The machine's 1/5/15-minute load averages (shared machines: say how busy it was)."""
    return " / ".join(f"{v:.2f}" for v in os.getloadavg())


def sample_server(server: LiveServer, out: str, seconds: float) -> subprocess.Popen:
    """py-spy sampling every thread of the daphne process (the views run in executor
    threads, which cProfile in the main thread would not see) for ``seconds``."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    assert server.proc is not None
    cmd = [exe, "record", "--pid", str(server.proc.pid), "--rate", "50", "--format", "raw"]
    cmd += ["--duration", str(int(seconds)), "--nonblocking", "--output", out]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def page_table(one: list, many: list, names: list[str], viewers: int) -> list[str]:
    """Per page and phase: requests, p50, p99 and mean, so a tail can be told apart from a
    page that is slow on its own (one viewer's figures are what a page costs unqueued)."""
    lines = [
        f"| page | 1 viewer: requests | p50 s | p99 s | mean s | {viewers} viewers: requests "
        "| p50 s | p99 s | mean s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        cells = []
        for phase in (one, many):
            s = summary([r for r in phase if r[0] == name])
            cells.append(f"{s['requests']} | {s['p50']:.3f} | {s['p99']:.3f} | {s['mean']:.3f}")
        lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=50_000)
    ap.add_argument("--viewers", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--baseline-seconds", type=float, default=20)
    ap.add_argument(
        "--baseline-pause",
        type=float,
        default=0.0,
        help="the one viewer's mean pause (default 0, back to back: alone, a viewer's "
        "requests cost the same at any pace, and a paced 20 s phase holds two or three)",
    )
    ap.add_argument("--leaves", choices=["random", "default"], default="random")
    ap.add_argument("--pause", type=float, default=0.0, help="mean seconds between pages")
    ap.add_argument("--shape", choices=["default", "route4mb"], default="default")
    ap.add_argument("--target-mb", type=int, default=441, help="route4mb: the file's size")
    ap.add_argument("--cache-dir", help="keep the file and its imported database here")
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument(
        "--py-spy",
        metavar="FILE",
        help="sample the server's threads with py-spy during the many-viewer phase "
        "(collapsed stacks written to FILE; py-spy must be installed)",
    )
    args = ap.parse_args(argv)

    load_before = _load()
    tmp = Path(tempfile.mkdtemp(prefix="bench-load-"))
    sessions: list[str] = []
    if args.cache_dir or args.shape != "default":
        from benchmarks.bench_pages import imported_db, session_file

        folder = Path(args.cache_dir) if args.cache_dir else tmp
        folder.mkdir(parents=True, exist_ok=True)
        path = session_file(
            folder,
            shape=args.shape,
            entries=args.entries,
            branch_points=200,
            seed=7,
            target_mb=args.target_mb if args.shape == "route4mb" else 0,
        )
        # The server starts on a copy of the imported database (migrate finds it current).
        (tmp / "srv").mkdir(parents=True)
        shutil.copy(imported_db(folder, path), tmp / "srv" / "db.sqlite3")
    else:
        path = tmp / "big.jsonl"
        generate_session(str(path), entries=args.entries, branch_points=200, seed=7)
        sessions = [str(path)]
    port = free_port()
    server = LiveServer(
        tmp / "srv",
        users={f"viewer{i}": "viewer" for i in range(max(args.viewers, 1))},
        sessions=sessions,
        manage_args=["serve", "--no-demo", "--host", "127.0.0.1", "--port", str(port)],
        autostart=False,
    )
    with server:
        # What the README's run command serves: no DEBUG in the environment.
        server.env.pop("DEBUG", None)
        server.env.pop("SESSIONS_REQUEST_TIMEOUT", None)  # the shipped default
        server.port = server.ports[0] = port
        server.start()
        if server.session_pks:
            pk = server.session_pks[0]
        else:
            with server.db() as conn:
                pk = conn.execute("SELECT id FROM explorer_session ORDER BY id").fetchone()[0]
        with server.db() as conn:
            rows = conn.execute(
                "SELECT entry_id, child_count FROM explorer_entry WHERE session_id=? "
                "ORDER BY position",
                (pk,),
            ).fetchall()
        ids = [r[0] for r in rows[::97]]
        leaves = [r[0] for r in rows if r[1] == 0] if args.leaves == "random" else []
        cookies = [server.cookie(f"viewer{i}") for i in range(max(args.viewers, 1))]
        choices = pages(pk, ids, leaves)
        # Warm-up: one request of each page (the first after an import is cold).
        for _name, make in choices:
            req = urllib.request.Request(server.base_url + make(), headers={"Cookie": cookies[0]})
            with urllib.request.urlopen(req, timeout=300) as r:
                r.read()
        one = run_phase(server, cookies, choices, 1, args.baseline_seconds, args.baseline_pause)
        spy = sample_server(server, args.py_spy, args.seconds) if args.py_spy else None
        many = run_phase(server, cookies, choices, args.viewers, args.seconds, args.pause)
        if spy is not None:
            spy.wait(timeout=120)
        log_tail = server.log.read_text(errors="replace")[-2000:]

    s1, sn = summary(one), summary(many)
    ratio = sn["p99"] / s1["p99"]
    ok = s1["errors"] == 0 and sn["errors"] == 0 and ratio <= TARGET_P99_RATIO
    where = (
        f"at random leaves (one of {len(leaves):,}; Compare of two random leaves)"
        if leaves
        else "at each reader's cursor (the default route)"
    )
    lines = [
        "## Load: concurrent viewers (`benchmarks/bench_load.py`)",
        "",
        f"`manage.py serve` as the README runs it (daphne, DEBUG off, 1 worker: SQLite and the "
        f"in-memory channel layer), a generated {args.entries:,}-entry session"
        f"{f' of {path.stat().st_size / 2**20:,.0f} MiB (tool results of about 4 MB on its default route)' if args.shape == 'route4mb' else ''}; {os.cpu_count()} "
        f"cores shared by the server and the client threads. Each viewer, logged in as an "
        f"account of its own, asks for random pages {where} (permalinks and entry panels at "
        f"random entries) "
        f"{f'with a random pause of 0-{2 * args.pause:g} s after each answer' if args.pause else 'back to back'}"
        f": {args.baseline_seconds:g} s with 1 viewer "
        f"({f'pause 0-{2 * args.baseline_pause:g} s' if args.baseline_pause else 'back to back'}), "
        f"then {args.seconds:g} s with {args.viewers}. Load average before the run: "
        f"{load_before}, after: {_load()}.",
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
        f"p99 with {args.viewers} viewers / p99 with 1 viewer: × {ratio:.2f} (same run). "
        f"Targets: 0 errors and that ratio ≤ {TARGET_P99_RATIO:g} (issue 28); p99 ≤ "
        f"{TARGET_P99_S:g} s (issue 12): {'met' if sn['p99'] <= TARGET_P99_S else 'missed'}.",
        "",
        *page_table(one, many, [name for name, _ in choices], args.viewers),
        "",
        f"Slowest requests ({args.viewers} viewers):",
        "",
    ]
    for name, status, seconds, url in sorted(many, key=lambda r: -r[2])[:5]:
        lines.append(f"- {seconds:.2f} s, {status}, {name}: `{url}`")
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
