"""Team-server benchmarks: PostgreSQL against SQLite, measured in one run (ratios, not times).

1. Importing one generated session (``--entries``, default 50,000) into PostgreSQL and into
   SQLite, and the main pages of it (overview, context, transcript) on each.
2. Global search latency on PostgreSQL (pg_trgm, migration 0011) and SQLite (FTS5) against
   corpus size (``--corpus 10,100,300`` sessions of ``--corpus-entries`` entries each): a
   sub-linear search grows far less than the corpus does.
3. Label appends per second through 1, 2 and 4 daphne workers sharing PostgreSQL and Redis
   (each worker's editor posts at the leaf it last heard of; refused posts are counted).

Needs DATABASE_URL (PostgreSQL; a fresh database is created and dropped for every part) and
REDIS_URL, e.g. from ``.ci/services.sh start``. Each measurement runs in a fresh child process.

Run:  python benchmarks/bench_team.py [--entries 50000] [--corpus 10,100,300]
                                      [--appends 200] [--write-results]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.gen_session import DEFAULT_SEED, generate_session  # noqa: E402
from benchmarks.results import write_section  # noqa: E402

TARGET_IMPORT = 1.5  # PostgreSQL import at most 1.5x SQLite's


# ---------------------------------------------------------------------------------------------
# Databases


def _pg_admin() -> str:
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        sys.exit("bench_team needs a PostgreSQL DATABASE_URL (.ci/services.sh start)")
    return url


def _pg_exec(sql: str) -> None:
    import psycopg

    parts = urlsplit(_pg_admin())
    with psycopg.connect(
        host=parts.hostname, port=parts.port, user=parts.username, password=parts.password,
        dbname=parts.path.lstrip("/") or "postgres", autocommit=True,
    ) as conn:  # fmt: skip
        conn.execute(sql)


class Database:
    """A fresh database (PostgreSQL or SQLite) and the environment a child process needs."""

    def __init__(self, vendor: str, workdir: Path) -> None:
        self.vendor = vendor
        self.name = f"bench_team_{secrets.token_hex(4)}"
        self.env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
        self.env.update({"DJANGO_SETTINGS_MODULE": "sessions_site.settings",
                         "LOG_LEVEL": "ERROR", "SESSIONS_VAR_DIR": str(workdir),
                         "SESSIONS_CACHE": "locmem", "PYTHONPATH": str(ROOT)})  # fmt: skip
        if vendor == "postgresql":
            parts = urlsplit(_pg_admin())
            self.env["DATABASE_URL"] = urlunsplit(parts._replace(path="/" + self.name))
        else:
            self.env["SQLITE_PATH"] = str(workdir / f"{self.name}.sqlite3")

    def __enter__(self) -> Database:
        if self.vendor == "postgresql":
            _pg_exec(f'CREATE DATABASE "{self.name}"')
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.vendor == "postgresql":
            _pg_exec(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)')

    def child(self, *args: str, timeout: float = 3600) -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, __file__, "--child", *args], cwd=ROOT, env=self.env,
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"child {args} failed:\n{done.stderr[-4000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------------------------------------
# Children (a fresh process each, Django set up from the environment)


def _django() -> None:
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def child_import(path: str) -> dict[str, Any]:
    """Import ``path``, then time the main pages of it (best of three each)."""
    _django()
    from django.test import Client

    from explorer import broadcast, services

    broadcast.entries_appended = lambda *a, **k: None  # the import alone
    start = time.perf_counter()
    result = services.import_file(path)
    seconds = time.perf_counter() - start
    assert result.ok, [str(p) for p in result.problems]
    pk = result.session.pk
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_superuser("bench", "b@example.org", "x")
    client = Client()
    client.force_login(user)
    pages = {}
    for name, url in (("overview", f"/sessions/{pk}/"), ("context", f"/sessions/{pk}/context/"),
                      ("transcript", f"/sessions/{pk}/transcript/")):  # fmt: skip
        times = []
        for _ in range(3):
            t = time.perf_counter()
            status = client.get(url).status_code
            times.append(time.perf_counter() - t)
            assert status == 200, (url, status)
        pages[name] = min(times)
    return {"import": seconds, "pages": pages, "entries": result.session.entry_count}


def child_corpus(directory: str, sessions: str) -> dict[str, Any]:
    """Import ``sessions`` files of ``directory`` (keeping what is there), then time searches."""
    _django()
    from explorer import broadcast, queries, services
    from explorer.models import Session

    broadcast.entries_appended = lambda *a, **k: None
    files = sorted(Path(directory).glob("*.jsonl"))[: int(sessions)]
    have = set(Session.objects.values_list("source_path", flat=True))
    for f in files:
        if str(f) not in have:
            assert services.import_file(str(f)).ok
    needles = ["needle-rare-word", "def ", "traceback", "quick brown"]
    times = {}
    for needle in needles:
        runs = []
        for _ in range(5):
            t = time.perf_counter()
            queries.search_entries(needle)
            runs.append(time.perf_counter() - t)
        times[needle] = statistics.median(runs)
    return {"sessions": Session.objects.count(), "search": times}


# ---------------------------------------------------------------------------------------------
# Parts


def bench_import(entries: int, workdir: Path) -> dict[str, Any]:
    path = workdir / "session.jsonl"
    generate_session(path, entries=entries, seed=DEFAULT_SEED)
    out = {}
    for vendor in ("sqlite", "postgresql"):
        with Database(vendor, workdir) as db:
            out[vendor] = db.child("import", str(path))
    return out


def bench_search(sizes: list[int], per_session: int, workdir: Path) -> dict[str, Any]:
    corpus = workdir / "corpus"
    corpus.mkdir(exist_ok=True)
    for i in range(max(sizes)):
        generate_session(corpus / f"s{i:04d}.jsonl", entries=per_session, branch_points=5,
                         seed=DEFAULT_SEED + i, cwd=f"/home/dev/p{i}")  # fmt: skip
    out: dict[str, Any] = {}
    for vendor in ("sqlite", "postgresql"):
        with Database(vendor, workdir) as db:  # one database, grown size by size
            out[vendor] = [db.child("corpus", str(corpus), str(n)) for n in sizes]
    return out


def _post_label(server: Any, user: str, pk: int, via: int, n: int) -> int:
    """One label post without ``expected_leaf``: appended at the cursor as it is under the
    lock, so every post is accepted (the row lock serialises them)."""
    from tests.team.test_concurrent_writes import post_json

    data = {"target": "a1b2c3d4", "label": f"{user}-{n}"}
    status, _ = post_json(server, user, f"/sessions/{pk}/label/", data, via)
    assert status == 200, status
    return status


def bench_appends(appends: int, workdir: Path) -> dict[int, dict[str, float]]:
    """Per worker count: accepted appends/s to one session (all posts accepted), to one
    session per worker, and the share of posts refused with 409 when every post names the
    leaf its editor last heard of (two posts in flight per editor)."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.conftest import SMALL_SESSION
    from tests.live.server import LiveServer
    from tests.team.test_concurrent_writes import Editor

    header_id = b"0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a2b"
    assert header_id in SMALL_SESSION
    out: dict[int, dict[str, float]] = {}
    for workers in (1, 2, 4):
        paths = []
        for i in range(workers):
            path = workdir / f"small{workers}-{i}.jsonl"
            path.write_bytes(SMALL_SESSION.replace(header_id, header_id[:-4] + b"%04d" % i))
            paths.append(str(path))
        users = {f"ed{i}": "editor" for i in range(workers)}
        env = {"SESSIONS_CACHE": "redis"}
        with LiveServer(workdir / f"site{workers}", users=users, sessions=paths,
                        workers=workers, env=env) as server:  # fmt: skip
            pks = server.session_pks
            per = appends // workers
            result: dict[str, float] = {}
            for mode in ("one session", "a session each"):
                start = time.perf_counter()
                with ThreadPoolExecutor(2 * workers) as pool:
                    jobs = [pool.submit(_post_label, server, f"ed{w}",
                                        pks[0] if mode == "one session" else pks[w], w, n)
                            for n in range(per) for w in range(workers)]  # fmt: skip
                    for job in jobs:
                        job.result()
                result[mode] = per * workers / (time.perf_counter() - start)
            editors = [Editor(server, f"ed{i}", i, pks[0]) for i in range(workers)]
            # Each editor starts at the small session's old tip: its first post learns the
            # current leaf from the 409, as a page that was open during the appends above.
            with ThreadPoolExecutor(2 * workers) as pool:
                for job in [pool.submit(ed.attempt, n) for n in range(per) for ed in editors]:
                    job.result()
            accepted = sum(len(ed.accepted) for ed in editors)
            refused = sum(ed.refused for ed in editors)
            result["refused_share"] = refused / max(1, accepted + refused)
            out[workers] = result
    return out


def report(imp: dict, search: dict, appends: dict, args: argparse.Namespace) -> str:
    sq, pg = imp["sqlite"], imp["postgresql"]
    ratio = pg["import"] / sq["import"]
    lines = [
        f"Machine: {platform.machine()}, Python {platform.python_version()}, shared with other "
        "work (2 cores); ratios measured in one run.",
        "",
        f"Import of a {sq['entries']:,}-entry session: SQLite {sq['import']:.2f} s, "
        f"PostgreSQL {pg['import']:.2f} s: **{ratio:.2f}x** (target ≤ {TARGET_IMPORT}x: "
        f"{'met' if ratio <= TARGET_IMPORT else 'NOT met'}).",
        "",
        "| page | SQLite | PostgreSQL | ratio |",
        "|---|---|---|---|",
    ]
    for name in sq["pages"]:
        a, b = sq["pages"][name], pg["pages"][name]
        lines.append(f"| {name} | {a * 1000:.0f} ms | {b * 1000:.0f} ms | {b / a:.2f}x |")
    lines += ["", f"Global search (median of 5 runs, {args.corpus_entries} entries per session; "
              "'rare': mean of three needles with few hits, 'common': `def `, whose hits grow "
              "with the corpus and are all counted), time against the smallest corpus:", "",
              "| sessions | SQLite rare | ratio | SQLite common | PostgreSQL rare | ratio "
              "| PostgreSQL common |", "|---|---|---|---|---|---|---|"]  # fmt: skip

    def rare(run: dict) -> float:
        return statistics.mean(t for k, t in run["search"].items() if k != "def ")

    base = {v: rare(search[v][0]) for v in search}
    for i, size in enumerate(args.sizes):
        cells = [str(size)]
        for v in ("sqlite", "postgresql"):
            run = search[v][i]
            cells += [f"{rare(run) * 1000:.1f} ms", f"{rare(run) / base[v]:.2f}x",
                      f"{run['search']['def '] * 1000:.0f} ms"]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    growth = args.sizes[-1] / args.sizes[0]
    lines += ["", f"(The corpus grows {growth:.0f}x.)", "",
              f"Label posts through daphne workers on PostgreSQL + Redis ({args.appends} "
              "posts per row, one editor per worker, two posts in flight per editor):", "",
              "| workers | appends/s, one session | appends/s, a session per worker "
              "| posts refused (409) when each names its leaf |", "|---|---|---|---|"]  # fmt: skip
    for w, r in appends.items():
        lines.append(f"| {w} | {r['one session']:.1f} | {r['a session each']:.1f} | "
                     f"{r['refused_share']:.0%} |")  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    if "--child" in sys.argv:
        kind, *rest = sys.argv[sys.argv.index("--child") + 1 :]
        result = child_import(*rest) if kind == "import" else child_corpus(*rest)
        print(json.dumps(result))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--corpus", default="10,100,300")
    parser.add_argument("--corpus-entries", type=int, default=200)
    parser.add_argument("--appends", type=int, default=200)
    parser.add_argument("--skip", default="", help="comma list of parts: import,search,appends")
    parser.add_argument("--write-results", action="store_true")
    parser.add_argument("--report-from", help="a log of an earlier run: report it again")
    args = parser.parse_args()
    args.sizes = [int(x) for x in args.corpus.split(",")]
    if args.report_from:
        parts = [json.loads(line) for line in Path(args.report_from).read_text().splitlines()
                 if line.startswith(("{", "null"))][:3]  # fmt: skip
        parts[2] = {int(k): v for k, v in parts[2].items()}
        body = report(*parts, args)
        print(body)
        if args.write_results:
            write_section("team", "## Team server (bench_team.py)\n\n" + body)
        return
    _pg_admin()
    skip = set(args.skip.split(","))
    with tempfile.TemporaryDirectory(prefix="bench-team-") as tmp:
        work = Path(tmp)
        imp = bench_import(args.entries, work) if "import" not in skip else None
        print(json.dumps(imp), flush=True)
        search = (
            bench_search(args.sizes, args.corpus_entries, work) if "search" not in skip else None
        )
        print(json.dumps(search), flush=True)
        appends = bench_appends(args.appends, work) if "appends" not in skip else None
        print(json.dumps(appends), flush=True)
    if imp and search and appends:
        body = report(imp, search, appends, args)
        print(body)
        if args.write_results:
            write_section("team", "## Team server (bench_team.py)\n\n" + body)


if __name__ == "__main__":
    main()
