"""Import benchmarks of the site core (ratios measured in one run, results in RESULTS.md).

Targets (from the issue):

1. Importing the engine benchmark's 50,000-entry session into SQLite takes at most 4x the
   engine's own `SessionManager.open` of that file.
2. The session overview page of that session costs at most 2x the same page for a 500-entry
   session (pages never load a whole session).
3. Importing a 200 MB file made of single lines of 5 MB keeps peak memory under 2x the file
   size. Measured in a fresh child process as the growth of peak RSS (``VmHWM``) over the
   process's RSS just before the import (Django set up, database migrated); the import
   reads the file from its path as `import_sessions` and uploads do.

4. (``--stream-mb N``, alone) Issue 12's file: a generated session of about N MB with the
   big shapes (1-5 MB tool results, images), 100,000+ entries and 300+ branch points, imported
   from its path in a fresh process. Reported: peak RSS growth over the file size (target
   ≤ 0.25x) and the import's throughput over reading the same file once with ``orjson`` line
   by line in the same process (target ≥ 1/4).

Run:  python benchmarks/bench_import.py [--entries 50000] [--small 500] [--big-mb 200]
                                        [--write-results]
      python benchmarks/bench_import.py --stream-mb 2048 [--write-results]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.gen_session import DEFAULT_SEED, generate_session  # noqa: E402
from benchmarks.results import write_section  # noqa: E402

TARGET_IMPORT = 4.0
TARGET_PAGE = 2.0
TARGET_MEMORY = 2.0


def _setup_django(db_path: str) -> None:
    os.environ["SQLITE_PATH"] = db_path
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sessions_site.settings")
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", interactive=False, verbosity=0)


def _best(fn: Any, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _status_kb(key: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def _rss_kb() -> int:
    return _status_kb("VmRSS")


def _peak_kb() -> int:
    """Peak RSS of this process image (VmHWM). Unlike ``ru_maxrss`` it does not inherit the
    parent's size across fork + exec."""
    return _status_kb("VmHWM")


def make_big_file(path: str, total_mb: int, line_mb: int = 5) -> int:
    """A valid version-3 session whose entries are single lines of ``line_mb`` MB each."""
    header = {
        "type": "session",
        "version": 3,
        "id": "bench-big-lines",
        "timestamp": "2025-01-01T00:00:00.000Z",
        "cwd": "/bench",
    }
    chunk = ("The quick brown fox jumps over the lazy dog. 0123456789 " * 20)[:1000]
    filler = (chunk * (line_mb * 1024 * 1024 // len(chunk) + 1))[: line_mb * 1024 * 1024]
    count = max(1, total_mb // line_mb)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(header, separators=(",", ":")) + "\n")
        parent = None
        for i in range(count):
            entry_id = f"{i:08x}"
            role = "user" if i % 2 == 0 else "toolResult"
            message: dict[str, Any] = {"role": role}
            if role == "user":
                message["content"] = filler
            else:
                message.update(
                    {
                        "toolCallId": f"c{i}",
                        "toolName": "read",
                        "content": [{"type": "text", "text": filler}],
                        "isError": False,
                    }
                )
            message["timestamp"] = 1735689600000 + i
            entry = {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": "2025-01-01T00:00:00.000Z",
                "message": message,
            }
            fh.write(json.dumps(entry, separators=(",", ":")) + "\n")
            parent = entry_id
    return os.path.getsize(path)


def child_memory(path: str, db_path: str, live: str) -> dict[str, Any]:
    """Runs in a fresh process: peak RSS growth while importing ``path``. With ``live`` off,
    the live broadcast of the new entries is switched off, so the import is measured alone."""
    _setup_django(db_path)
    from explorer import broadcast, services

    if live == "off":
        broadcast.entries_appended = lambda *args, **kwargs: None

    gc.collect()
    before = _rss_kb()
    start = time.perf_counter()
    # The way files arrive: a path (manage.py import_sessions, or the temporary file of an
    # upload), read line by line.
    result = services.import_file(path, source_path=path)
    elapsed = time.perf_counter() - start
    peak = _peak_kb()
    assert result.ok, [str(p) for p in result.errors]
    size = os.path.getsize(path)
    growth = (peak - before) * 1024
    return {
        "file_bytes": size,
        "peak_growth_bytes": growth,
        "ratio": growth / size,
        "seconds": elapsed,
        "entries": result.added,
    }


TARGET_STREAM_MEMORY = 0.25
TARGET_STREAM_SPEED = 0.25


def child_stream(path: str, db_path: str) -> dict[str, Any]:
    """Runs in a fresh process: the orjson line-by-line read of ``path`` (the baseline), then
    its import from the path, with the peak RSS growth of the import alone."""
    import orjson

    _setup_django(db_path)
    from explorer import broadcast, services

    broadcast.entries_appended = lambda *args, **kwargs: None  # the import alone
    gc.collect()
    start = time.perf_counter()
    lines = 0
    with open(path, "rb") as fh:
        for line in fh:
            if line.strip():
                orjson.loads(line)
                lines += 1
    read_s = time.perf_counter() - start
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")  # peak counts from here
    before = _rss_kb()
    start = time.perf_counter()
    result = services.import_file(path, source_path=path)
    import_s = time.perf_counter() - start
    peak = _peak_kb()
    assert result.ok, [str(p) for p in result.errors]
    size = os.path.getsize(path)
    text_rows, text_chars, index_s = _index_floor()
    return {
        "file_bytes": size,
        "lines": lines,
        "entries": result.added,
        "read_s": read_s,
        "import_s": import_s,
        "peak_growth_bytes": (peak - before) * 1024,
        "text_rows": text_rows,
        "text_chars": text_chars,
        "index_s": index_s,
    }


def _index_floor() -> tuple[int, int, float]:
    """What the search index alone costs: the stored visible text put into a scratch FTS5
    table made like the site's (trigram, no detail) with one statement, after the import.
    No import that keeps search complete at its commit can be faster than this."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), COALESCE(sum(length(text)), 0) FROM explorer_entrytext")
        rows, chars = cursor.fetchone()
        cursor.execute(
            "CREATE VIRTUAL TABLE bench_index_floor USING fts5(text, content='',"
            " tokenize='trigram', detail='none')"
        )
        start = time.perf_counter()
        cursor.execute(
            "INSERT INTO bench_index_floor(rowid, text) SELECT id, text FROM explorer_entrytext"
        )
        index_s = time.perf_counter() - start
        cursor.execute("DROP TABLE bench_index_floor")
    return rows, chars, index_s


def run_stream(size_mb: int) -> str:
    """Generate the file, import it in a child process, and report the two ratios."""
    from benchmarks.gen_session import big_shapes_for

    work = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    try:
        path = work / "stream.jsonl"
        entries, branch_points = 100_000, 300
        big = big_shapes_for(size_mb * 1024 * 1024, entries)
        generate_session(str(path), entries=entries, branch_points=branch_points, big=big)
        out = subprocess.run(
            [sys.executable, __file__, "--child-stream", str(path), str(work / "s.sqlite3")],
            capture_output=True,
            text=True,
            check=True,
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    memory = r["peak_growth_bytes"] / r["file_bytes"]
    speed = r["read_s"] / r["import_s"]  # import throughput over orjson's

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    mb = r["file_bytes"] / 2**20
    return "\n".join(
        [
            f"Generated file: {mb:,.0f} MiB, {r['entries']:,} entries, {branch_points} branch "
            "points, big shapes (1-5 MB tool results, images); imported from its path "
            "(as `import_sessions` and uploads do) into SQLite in a fresh process.",
            "",
            "| Measure | Value | Baseline | Ratio | Target | Result |",
            "|---|---|---|---|---|---|",
            f"| Peak RSS growth of the import | +{r['peak_growth_bytes'] / 2**20:,.0f} MiB | "
            f"file {mb:,.0f} MiB | {memory:.2f}x | ≤ {TARGET_STREAM_MEMORY}x | "
            f"{verdict(memory <= TARGET_STREAM_MEMORY)} |",
            f"| Import throughput | {mb / r['import_s']:,.1f} MiB/s ({r['import_s']:.1f} s) | "
            f"orjson line by line {mb / r['read_s']:,.1f} MiB/s ({r['read_s']:.1f} s) | "
            f"{speed:.3f}x | ≥ {TARGET_STREAM_SPEED}x | {verdict(speed >= TARGET_STREAM_SPEED)} |",
            f"| Search index alone ({r['text_rows']:,} text rows, "
            f"{r['text_chars'] / 2**20:,.0f} Mi characters into a scratch trigram FTS5 table) | "
            f"{r['index_s']:.1f} s | orjson line by line {r['read_s']:.1f} s | "
            f"{r['read_s'] / r['index_s']:.3f}x | (the best any import that indexes its text "
            "at its commit can reach) | - |",
            "",
            STREAM_NOTE,
        ]
    )


# What a profile of this import shows (written with the figures; update it with the code).
STREAM_NOTE = """\
Profile (cProfile of a 277 MiB import of the same shapes, 2026-12-01, shared 2-core machine): the
search index is about a third of the import: the FTS5 trigram table is filled by one
`INSERT … SELECT` per batch of text rows since migration 0012 (the per-row trigger it
replaced cost three to four times as much for the same rows), and the row above shows
that filling it even in one statement after the import takes more than 4 times the orjson
read on its own, so the 0.25x throughput target cannot be met while search is complete at
the import's commit (the trigram tokenizer reads and case-folds every visible character).
The rest: the secret scan about 22 % (its walk over each parsed entry, the keyword
automaton, the rules' patterns), the visible search text about 14 % (its own secret
masking pass, and `jsonfmt.dumps` of tool-call arguments in pure Python), writing the
entry and text rows about 11 %, the commit's WAL checkpoint about 5 %, reading and
parsing the lines about 9 %. Memory: the peak was the secret scan lower-casing a
multi-MB non-ASCII tool result whole (`str.lower` works in a buffer of 12 bytes per
character); it now lower-cases 64K characters at a time, batches hold 4 MB of lines and
text, and a line that would overflow a batch starts the next one. What remains is mostly
the importer's per-entry id maps and the lines in flight. The 2 GB run (`--stream-mb 2048`,
2026-12-01): peak +76 MiB (0.04x the file), at 1.1 MiB/s; it ran under `nice` beside three
other engineers' test runs (load average 6-7 on 2 cores), so its throughput says less than
the 277 MiB run's (3.6 MiB/s, 0.036x, on a quieter machine); the search index alone took
355 s of it for 1.8 G characters of text, 19 times the orjson read.
"""


def run(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-import-"))
    try:
        return _run(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    results: dict[str, Any] = {}
    big = work / "big.jsonl"
    small = work / "small.jsonl"
    generate_session(str(big), entries=args.entries, branch_points=200, seed=DEFAULT_SEED)
    generate_session(str(small), entries=args.small, branch_points=5, seed=DEFAULT_SEED + 1)
    _setup_django(str(work / "db.sqlite3"))
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from explorer import services
    from explorer.models import Session
    from explorer.session.manager import SessionManager

    data = big.read_bytes()

    # 1. import vs engine open ------------------------------------------------------------
    def engine_open() -> None:
        copy = work / "open-copy.jsonl"
        copy.write_bytes(data)
        SessionManager.open(str(copy))

    def do_import() -> None:
        result = services.import_bytes(data, source_path=str(big))
        assert result.ok and result.added > 0

    def fresh_db() -> None:
        # Untimed: drop the previous copy so every import starts from the same state.
        from django.db import connection

        Session.objects.filter(session_id=_header_id(data)).delete()
        with connection.cursor() as cursor:
            cursor.execute("VACUUM")

    # Interleaved, best of N each: other load on the machine hits both sides alike.
    opens, imports = [], []
    for _ in range(args.repeat):
        opens.append(_best(engine_open, 1))
        fresh_db()
        imports.append(_best(do_import, 1))
    t_open, t_import = min(opens), min(imports)
    results["import"] = {
        "entries": args.entries,
        "file_bytes": len(data),
        "engine_open_s": t_open,
        "import_s": t_import,
        "ratio": t_import / t_open,
        "target": TARGET_IMPORT,
    }

    # 2. overview page, 50,000 vs 500 entries -------------------------------------------
    services.import_bytes(small.read_bytes(), source_path=str(small))
    big_session = Session.objects.get(session_id=_header_id(data))
    small_session = Session.objects.get(session_id=_header_id(small.read_bytes()))
    user = get_user_model().objects.create_superuser("bench", "", "bench-pw")
    client = Client()
    client.force_login(user)

    def page(session) -> float:
        url = reverse("explorer:session_detail", args=[session.pk])
        response = client.get(url)
        assert response.status_code == 200, response.status_code
        return _best(lambda: client.get(url), args.repeat * 3)

    t_small = page(small_session)
    t_big = page(big_session)
    results["page"] = {
        "big_entries": big_session.entry_count,
        "small_entries": small_session.entry_count,
        "big_s": t_big,
        "small_s": t_small,
        "ratio": t_big / t_small,
        "target": TARGET_PAGE,
    }

    # 3. memory of a 200 MB file with 5 MB lines (fresh child process) -------------------
    big_lines = work / "big-lines.jsonl"
    make_big_file(str(big_lines), args.big_mb)
    for live in ("off", "on"):
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child-memory",
                str(big_lines),
                str(work / f"mem-{live}.sqlite3"),
                live,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        memory = json.loads(out.stdout.strip().splitlines()[-1])
        memory["target"] = TARGET_MEMORY
        results["memory" if live == "off" else "memory_live"] = memory
    return results


def _header_id(data: bytes) -> str:
    return json.loads(data.split(b"\n", 1)[0])["id"]


def report(results: dict[str, Any]) -> str:
    imp, page, mem = results["import"], results["page"], results["memory"]
    live = results["memory_live"]

    def verdict(ratio: float, target: float) -> str:
        return "PASS" if ratio <= target else "FAIL"

    lines = [
        "## Site core: import, overview page, import memory (`benchmarks/bench_import.py`)",
        "",
        f"Machine: {platform.platform()}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs. SQLite file database.",
        "",
        "| Measure | Value | Baseline | Ratio | Target | Result |",
        "|---|---|---|---|---|---|",
        f"| Import of {imp['entries']:,}-entry session ({imp['file_bytes'] / 1e6:.1f} MB) "
        f"into SQLite | {imp['import_s']:.2f} s | engine `open` {imp['engine_open_s']:.2f} s | "
        f"{imp['ratio']:.2f}x | ≤ {imp['target']:.0f}x | {verdict(imp['ratio'], imp['target'])} |",
        f"| Session overview page, {page['big_entries']:,} entries | {page['big_s'] * 1000:.1f} ms "
        f"| {page['small_entries']:,} entries: {page['small_s'] * 1000:.1f} ms | "
        f"{page['ratio']:.2f}x | ≤ {page['target']:.0f}x | {verdict(page['ratio'], page['target'])} |",
        f"| Peak memory importing {mem['file_bytes'] / 1e6:.0f} MB of 5 MB lines | "
        f"+{mem['peak_growth_bytes'] / 1e6:.0f} MB RSS | file {mem['file_bytes'] / 1e6:.0f} MB | "
        f"{mem['ratio']:.2f}x | < {mem['target']:.0f}x | {verdict(mem['ratio'], mem['target'])} |",
        "",
        f"The 200 MB import took {mem['seconds']:.1f} s for {mem['entries']} entries. Peak RSS "
        "growth includes allocator slack (glibc keeps freed multi-MB blocks). With the live "
        "broadcasting receivers connected (they compute the projection of the newest entry "
        "after the commit, which here is the whole 200 MB path), the same import peaks at "
        f"+{live['peak_growth_bytes'] / 1e6:.0f} MB ({live['ratio']:.2f}x).",
        "",
        "Since 2026-12-01 an import also scans every entry for secrets and fills the search "
        "index (FTS5 trigram on SQLite) in the same transaction; the figures written before "
        "that date (import 2.92x) had neither, and the stream section below says where the "
        "time goes.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--small", type=int, default=500)
    parser.add_argument("--big-mb", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--write-results",
        action="store_true",
        help="replace this benchmark's section of benchmarks/RESULTS.md",
    )
    parser.add_argument(
        "--stream-mb", type=int, default=0, help="only the streaming import of an N MB file"
    )
    parser.add_argument(
        "--child-memory", nargs=3, metavar=("FILE", "DB", "LIVE"), help=argparse.SUPPRESS
    )
    parser.add_argument("--child-stream", nargs=2, metavar=("FILE", "DB"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_memory:
        print(json.dumps(child_memory(*args.child_memory)))
        return
    if args.child_stream:
        print(json.dumps(child_stream(*args.child_stream)))
        return
    if args.stream_mb:
        text = run_stream(args.stream_mb)
        print(text)
        if args.write_results:
            write_section(
                "bench_import_stream",
                "## Streaming import of a big file (`bench_import.py --stream-mb`)\n\n" + text,
            )
        return
    results = run(args)
    text = report(results)
    print(text)
    if args.write_results:
        write_section("bench_import", text)


if __name__ == "__main__":
    main()
