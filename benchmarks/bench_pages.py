"""Explorer page benchmark: every tab and its ``?format=json`` on a big session against a
500-entry one, in one run.

Targets (issues 12 and 27): every tab of the big session (tree, graph, transcript, raw vs
projected, compactions, compare, timeline, integrity, search and its count, live), and the
``?format=json`` answer of each tab that has one, costs at most 2x the same request on the
small session, cold (every cache cleared, see below), warm, and after an entry is appended
(the caches as the earlier requests left them: what a reader meets after every write); the
HTML and JSON bytes do not grow with the session; the folded graph keeps a few hundred nodes.

"Every cache cleared" (:func:`clear_every_cache`): the copies queued for the shared cache are
written first (``shared_copies.flush``), then the shared cache is cleared (``cache.clear()``),
every module-level ``OrderedDict`` and ``lru_cache`` of
an ``explorer`` module is emptied (the routes, alignments and grown copies of
``explorer.queries``, the Codex recorded contexts, the live broadcast's routes, the rendered
Markdown ...: the run prints their names) and the database connection is closed (SQLite's
page cache goes with it). What stays: the rows written with each entry (route figures,
segments: the stored figures of issue 27, not a cache), the whole-session figures the import
and the appends store (``StoredFigure``: written on the write paths only, never by a read;
``--drop-stored`` deletes them too, what a reader meets on a session stored before they
existed, until its next append), the operating system's file cache and the interpreter's
imported modules and compiled templates.

Shapes of the big session (``--shape``):

- ``default``: the generator's default shapes (a 50,000-entry session is about 90 MB).
- ``route4mb``: the default shapes, then ``--route-lines`` (100) tool results on the default
  route grown so that the file is ``--target-mb`` (441) MB: issue 27's "441 MB session with
  4 MB lines on its route".
- ``big``: the generator's big shapes (1-5 MB tool and image lines anywhere in the tree,
  sparse compactions) sized to ``--target-mb`` (2048); with ``--entries 150000``, issue 27's
  2 GB session.

The small session is generated with compactions considered after fewer characters of path
(``--small-compact-after``) than the big one's default: at the default it has none on its
default route, and its Compactions tab would be an empty state compared with a full one. With
200,000 its default route (212 entries) has one compaction, as the big one's has.

Files are generated once into ``--cache-dir`` (default: a temporary folder, removed after)
and reused; the big session is imported in a child process into a database kept there too
(one per file and commit: ``git rev-parse --short HEAD``), which the run copies, so a
second run on the same commit skips the import (20+ minutes at 2 GB).

Run:  python benchmarks/bench_pages.py [--entries 50000] [--shape default|route4mb|big]
          [--target-mb N] [--cache-dir DIR [--prepare]] [--repeat 7] [--cold-repeat 3]
          [--only 'tree page,tree JSON'] [--no-json] [--profile-dir DIR]
          [--write-results [--part NAME]] [--note FILE]

``--write-results`` replaces this run's block (``SHAPE-ENTRIES``) inside the ``bench_pages``
section of RESULTS.md and leaves the text around the blocks alone. ``--prepare`` only
generates and imports into ``--cache-dir`` (to start a 2 GB import early).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import io
import json
import os
import pstats
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections import OrderedDict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.gen_session import big_shapes_for, generate_session  # noqa: E402
from benchmarks.results import RESULTS, write_section  # noqa: E402
from benchmarks.site import setup_site  # noqa: E402

TARGET = 2.0
# The small session's compaction spacing (characters of path): its default route then holds a
# compaction like the big session's (generated at the default spacing) does.
SMALL_COMPACT_AFTER = 200_000
MAX_NODES = 400
SHAPES = ("default", "route4mb", "big")
TARGET_MB = {"route4mb": 441, "big": 2048}
# (title, url name, query string, has ?format=json); "{a}"/"{b}" are two leaves of the
# session, "{word}" a word the generator writes into user messages.
PAGES = (
    ("tree page", "explorer:session_detail", "", True),
    ("graph SVG", "explorer:graph_svg", "", False),
    ("transcript", "explorer:transcript", "", True),
    ("raw vs projected", "explorer:context", "", True),
    ("compactions", "explorer:compactions", "", True),
    ("compare", "explorer:compare", "a={a}&b={b}", True),
    ("timeline", "explorer:timeline", "", True),
    ("integrity", "explorer:integrity", "", True),
    ("search", "explorer:session_search", "q={word}", True),
    # What the search page asks for after it listed a big session's first hits uncounted.
    ("search count", "explorer:session_search_count", "q={word}&type=&offset=0", False),
    ("live", "explorer:live", "", True),
)


# -- the sessions --------------------------------------------------------------------------


def _grow_route_lines(path: Path, lines: int, target_bytes: int) -> None:
    """Grow ``lines`` tool results on the default route (the file's last entry's) so that
    the file is about ``target_bytes``: the big lines are where every route page reads."""
    rows = path.read_bytes().splitlines()
    entries = [json.loads(r) for r in rows]
    by_id = {e["id"]: i for i, e in enumerate(entries) if "id" in e}
    route: list[int] = []
    at: str | None = entries[-1].get("id")
    while at is not None and at in by_id:
        route.append(by_id[at])
        at = entries[by_id[at]].get("parentId")
    route.reverse()

    def grows(i: int) -> bool:
        m = entries[i].get("message") or {}
        content = m.get("content")
        return (
            m.get("role") == "toolResult"
            and isinstance(content, list)
            and any(b.get("type") == "text" for b in content)
        )

    candidates = [i for i in route if grows(i)]
    step = max(1, len(candidates) // lines)
    chosen = candidates[::step][:lines]
    size = max(1, (target_bytes - sum(len(r) + 1 for r in rows)) // max(1, len(chosen)))
    block = "".join(
        f"{n:06d} INFO worker-{n % 7} handled request /api/v1/items/{n * 37 % 9973} in {n % 97} ms\n"
        for n in range(1000)
    )
    filler = (block * (size // len(block) + 1))[:size]
    for i in chosen:
        for b in entries[i]["message"]["content"]:
            if b.get("type") == "text":
                b["text"] = filler
                break
        rows[i] = json.dumps(entries[i], separators=(",", ":"), ensure_ascii=False).encode()
    part = path.with_suffix(".grow")
    part.write_bytes(b"\n".join(rows) + b"\n")
    part.replace(path)
    print(f"grew {len(chosen)} tool results on the route ({len(route)} entries) to {size:,} bytes")


def session_file(
    folder: Path,
    *,
    shape: str,
    entries: int,
    branch_points: int,
    seed: int,
    compact_after: int | None = None,
    target_mb: int = 0,
    route_lines: int = 100,
) -> Path:
    """The generated session file for these arguments, made once in ``folder``."""
    name = f"{shape}-{entries}-bp{branch_points}-s{seed}"
    if compact_after is not None:
        name += f"-c{compact_after}"
    if shape != "default":
        name += f"-{target_mb}mb"
    if shape == "route4mb":
        name += f"-{route_lines}lines"
    path = folder / f"{name}.jsonl"
    if path.exists():
        return path
    t = time.perf_counter()
    part = folder / f"{name}.jsonl.part"
    big = big_shapes_for(target_mb * 1024 * 1024, entries) if shape == "big" else None
    generate_session(
        str(part),
        entries=entries,
        branch_points=branch_points,
        seed=seed,
        compact_after=compact_after,
        big=big,
    )
    if shape == "route4mb":
        _grow_route_lines(part, route_lines, target_mb * 1024 * 1024)
    part.replace(path)
    print(
        f"generated {path.name}: {path.stat().st_size / 2**20:,.0f} MiB in {time.perf_counter() - t:.0f} s"
    )
    return path


def _commit(*paths: str) -> str:
    """The short commit of HEAD, or of the last commit that changed ``paths``."""
    cmd = ["git", "log", "-1", "--format=%h", "HEAD", "--", *paths]
    try:
        out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def imported_db(folder: Path, path: Path) -> Path:
    """A migrated database holding only the session at ``path``, imported in a child
    process as ``import_sessions`` does (from the file), kept in ``folder`` per commit of
    the app (the last one that changed ``explorer/`` or ``sessions_site/``)."""
    db = folder / f"{path.stem}.{_commit('explorer', 'sessions_site')}.sqlite3"
    if db.exists():
        return db
    work = Path(tempfile.mkdtemp(prefix="bench-pages-import-", dir=folder))
    t = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--child-import", str(path), str(work)], check=True)
    (work / "db.sqlite3").replace(db)
    shutil.rmtree(work, ignore_errors=True)
    print(f"imported {path.name} in a child process: {time.perf_counter() - t:.0f} s", flush=True)
    return db


def _child_import(path: str, work: str) -> None:
    setup_site(Path(work), static=False, user=False)
    from django.db import connection

    from explorer import services

    t = time.perf_counter()
    services.import_file(path, source_path=path)
    print(f"child import of {os.path.basename(path)}: {time.perf_counter() - t:.0f} s", flush=True)
    from explorer import broadcast, shared_copies

    broadcast.drain(60)
    shared_copies.flush()
    connection.close()


def write_part(part: str, body: str, path: Path = RESULTS) -> None:
    """Replace one run's block (``bench_pages.PART``) inside the ``bench_pages`` section,
    or add it at the section's end: each shape and size keeps its own table, and the text
    written by hand around them (the profiles' reading) stays where it is."""
    outer_end = "<!-- bench_pages:end -->"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if outer_end not in text:
        write_section("bench_pages", "## Explorer pages (`benchmarks/bench_pages.py`)", path)
        text = path.read_text(encoding="utf-8")
    start, end = f"<!-- bench_pages.{part}:start -->", f"<!-- bench_pages.{part}:end -->"
    block = f"{start}\n{body.rstrip(chr(10))}\n{end}"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        text = before + block + rest.split(end, 1)[1]
    else:
        before, after = text.split(outer_end, 1)
        text = before.rstrip("\n") + "\n\n" + block + "\n" + outer_end + after
    path.write_text(text, encoding="utf-8")


# -- every cache cleared ---------------------------------------------------------------------


# Whether a cold request also finds no stored whole-session figures (``--drop-stored``).
DROP_STORED = False


def clear_every_cache() -> list[str]:
    """Empty every cache the app keeps (see the module's docstring); the names cleared."""
    from django.core.cache import cache
    from django.db import connection

    from explorer import shared_copies
    from explorer.models import StoredFigure

    shared_copies.flush()
    cache.clear()
    cleared = ["cache.clear()"]
    if DROP_STORED:
        StoredFigure.objects.all().delete()
        cleared.append("StoredFigure rows")
    seen: set[int] = set()  # a package re-exports its modules' stores: each named once
    for name, module in sorted(sys.modules.items(), key=lambda kv: (-kv[0].count("."), kv[0])):
        if not name.startswith("explorer") or module is None:
            continue
        for attr, value in sorted(vars(module).items()):
            if id(value) in seen:
                continue
            if isinstance(value, functools._lru_cache_wrapper) and str(
                getattr(value, "__module__", "")
            ).startswith("explorer"):  # not a standard library's (urlsplit) imported here
                value.cache_clear()
                cleared.append(f"{name}.{attr}()")
            elif type(value) is OrderedDict:
                value.clear()
                cleared.append(f"{name}.{attr}")
            else:
                continue
            seen.add(id(value))
    connection.close()
    return cleared


# -- measuring --------------------------------------------------------------------------------


class PageError(Exception):
    """A request that did not answer 200: the status and the traceback, for the results."""


def _timed(client: Any, url: str) -> tuple[float, bytes]:
    t = time.perf_counter()
    try:
        r = client.get(url)
    except Exception as exc:  # the test client re-raises the view's exception
        raise PageError(f"{url}: {exc!r}\n{traceback.format_exc()}") from exc
    took = time.perf_counter() - t
    if r.status_code != 200:
        raise PageError(
            f"{url}: status {r.status_code}\n{r.content[:2000].decode(errors='replace')}"
        )
    return took, r.content


def _profile(client: Any, url: str, out: Path) -> str:
    """cProfile of one cold request of ``url``: the top of the cumulative and own times."""
    clear_every_cache()
    prof = cProfile.Profile()
    prof.enable()
    try:
        client.get(url)
    finally:
        prof.disable()
    prof.dump_stats(str(out.with_suffix(".prof")))
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text).strip_dirs()
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(25)
    out.write_text(f"{url}\n{text.getvalue()}", encoding="utf-8")
    return text.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--entries", type=int, default=50_000)
    ap.add_argument("--shape", choices=SHAPES, default="default")
    ap.add_argument("--target-mb", type=int, default=0, help="file size of route4mb/big (441/2048)")
    ap.add_argument("--route-lines", type=int, default=100, help="route4mb: big tool results")
    ap.add_argument("--branch-points", type=int, default=200)
    ap.add_argument("--small", type=int, default=500)
    ap.add_argument(
        "--small-compact-after",
        type=int,
        default=SMALL_COMPACT_AFTER,
        help="characters of path before the small session's generator considers a compaction",
    )
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--cold-repeat", type=int, default=3, help="cold requests (median kept)")
    ap.add_argument("--only", default="", help="comma-separated row titles to run")
    ap.add_argument("--no-json", action="store_true", help="the HTML pages only")
    ap.add_argument(
        "--cache-dir", default="", help="keep generated files and imported databases here"
    )
    ap.add_argument("--profile-dir", default="", help="cProfile every cold request over 2x here")
    ap.add_argument(
        "--prepare", action="store_true", help="only generate and import into --cache-dir"
    )
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument(
        "--part", default="", help="the block of the bench_pages section written (SHAPE-ENTRIES)"
    )
    ap.add_argument("--note", default="", help="a Markdown file whose text ends the section")
    ap.add_argument("--child-import", nargs=2, metavar=("FILE", "DIR"), help=argparse.SUPPRESS)
    ap.add_argument(
        "--drop-stored",
        action="store_true",
        help="cold requests also find no StoredFigure rows (written by imports and appends)",
    )
    args = ap.parse_args(argv)
    global DROP_STORED
    DROP_STORED = args.drop_stored
    if args.child_import:
        _child_import(*args.child_import)
        return 0
    target_mb = args.target_mb or TARGET_MB.get(args.shape, 0)
    started = time.perf_counter()

    tmp = Path(tempfile.mkdtemp(prefix="bench-pages-"))
    folder = Path(args.cache_dir) if args.cache_dir else tmp
    folder.mkdir(parents=True, exist_ok=True)
    small_path = session_file(
        folder, shape="default", entries=args.small, branch_points=5, seed=11,
        compact_after=args.small_compact_after,
    )  # fmt: skip
    big_path = session_file(
        folder, shape=args.shape, entries=args.entries, branch_points=args.branch_points,
        seed=7, target_mb=target_mb, route_lines=args.route_lines,
    )  # fmt: skip
    # The big session arrives in a database imported by a child (kept per commit when
    # --cache-dir is given); the small one is imported here.
    db = imported_db(folder, big_path)
    if args.prepare:
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"prepared {big_path} and {db} in {time.perf_counter() - started:.0f} s")
        return 0
    if args.cache_dir:
        shutil.copyfile(db, tmp / "db.sqlite3")  # the kept one stays as imported
    else:
        db.replace(tmp / "db.sqlite3")
    client = setup_site(tmp)
    from django.urls import reverse

    from explorer import broadcast, queries, rendering, services
    from explorer.models import Session

    sessions: dict[str, Session] = {"big": Session.objects.get()}
    t = time.perf_counter()
    small = services.import_file(str(small_path), source_path=str(small_path)).session
    assert small is not None, f"{small_path} did not import"
    sessions["small"] = small
    print(f"imported small: {args.small} entries in {time.perf_counter() - t:.1f}s", flush=True)
    leaves: dict[str, tuple[str, str]] = {}
    for label, s in sessions.items():
        choices = [c["id"] for c in queries.leaf_choices(s)]
        leaves[label] = (choices[0], choices[len(choices) // 2])
    file_bytes = {"small": small_path.stat().st_size, "big": big_path.stat().st_size}

    original = rendering._layout
    rendering._layout = lambda dot: original(dot)  # noqa: E731 (kept for the profile's names)
    # One request of an unrelated page first: the process's warm-up (imports, the first
    # graphviz call) must not land on whichever page is measured cold first.
    client.get(reverse("explorer:session_list"))
    client.get(reverse("explorer:graph_svg", args=[sessions["small"].pk]))
    cleared = clear_every_cache()
    print("cleared before every cold request:", ", ".join(cleared), flush=True)
    wanted = {t.strip() for t in args.only.split(",") if t.strip()}
    requests = []
    for title, name, query, has_json in PAGES:
        requests.append((title, name, query, False))
        if has_json and not args.no_json:
            requests.append((title.replace(" page", "") + " JSON", name, query, True))
    rows: list[tuple[str, dict[str, dict[str, float]], dict[str, float]]] = []
    errors: list[tuple[str, str]] = []
    urls: dict[str, str] = {}
    nodes: dict[str, int] = {}
    for title, name, query, as_json in requests:
        if wanted and title not in wanted:
            continue
        timing: dict[str, dict[str, float]] = {}
        try:
            for label in ("small", "big"):
                s = Session.objects.get(pk=sessions[label].pk)
                a, b = leaves[label]
                url = reverse(name, args=[s.pk])
                params = query.format(a=a, b=b, word="fix")
                if as_json:
                    params = (params + "&" if params else "") + "format=json"
                if params:
                    url += "?" + params
                urls[f"{title}|{label}"] = url
                colds = []
                for _ in range(args.cold_repeat):
                    clear_every_cache()
                    colds.append(_timed(client, url)[0])
                cold = statistics.median(colds)
                if len(colds) > 1:
                    print(
                        f"  {title} {label} cold: {', '.join(f'{c * 1000:.0f}' for c in colds)} ms"
                    )
                warm = [_timed(client, url) for _ in range(args.repeat)]
                body = warm[-1][1]
                # After an append: the session gains one entry at its tip, then the page is
                # asked for again with the caches as the earlier requests left them.
                services.rename_session(
                    s, None, f"bench {title}", leaf_id=queries.default_leaf_id(s)
                )
                # The append's own live broadcast (its frames, the meter) runs in a worker
                # thread of this process; measured beside the page, it would hold the
                # interpreter lock through part of the request. Its cost is bench_live's.
                broadcast.drain(120)
                appended, _ = _timed(client, url)
                timing[label] = {
                    "cold": cold,
                    "warm": statistics.median(w[0] for w in warm),
                    "append": appended,
                    "bytes": len(body),
                }
                if name == "explorer:graph_svg":
                    nodes[label] = len(re.findall(r"class=\"node ge ", body.decode()))
        except PageError as exc:
            errors.append((title, str(exc)))
            print(f"{title}: FAILED\n{exc}", flush=True)
            continue
        ratios = {
            k: timing["big"][k] / max(timing["small"][k], 1e-9)
            for k in ("cold", "warm", "append", "bytes")
        }
        rows.append((title, timing, ratios))
        print(
            f"{title}: warm {timing['small']['warm'] * 1000:.1f}/{timing['big']['warm'] * 1000:.1f} ms (x{ratios['warm']:.2f}), "
            f"cold {timing['small']['cold'] * 1000:.0f}/{timing['big']['cold'] * 1000:.0f} ms (x{ratios['cold']:.2f}), "
            f"after append {timing['small']['append'] * 1000:.0f}/{timing['big']['append'] * 1000:.0f} ms (x{ratios['append']:.2f}), "
            f"bytes {timing['small']['bytes']}/{timing['big']['bytes']} (x{ratios['bytes']:.2f})",
            flush=True,
        )
    if nodes:
        print(f"graph nodes: small {nodes.get('small')}, big {nodes.get('big')}")
    profiled = []
    if args.profile_dir:
        pdir = Path(args.profile_dir)
        pdir.mkdir(parents=True, exist_ok=True)
        for title, _t, r in rows:
            if r["cold"] > TARGET:
                slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
                out = pdir / f"{args.shape}-{args.entries}-{slug}.txt"
                text = _profile(client, urls[f"{title}|big"], out)
                profiled.append(title)
                print(
                    f"== profile of the cold {title} (big): {out}\n"
                    + "\n".join(text.splitlines()[:60]),
                    flush=True,
                )

    from django.conf import settings

    backend = settings.CACHES["default"]["BACKEND"].rsplit(".", 1)[-1]
    ok = not errors and all(max(r[2]["warm"], r[2]["cold"], r[2]["append"]) <= TARGET for r in rows)
    ok = ok and (nodes.get("big") or 0) <= MAX_NODES
    shape = {
        "default": "default shapes",
        "route4mb": f"default shapes plus {args.route_lines} tool results on the default route grown to fill {target_mb} MiB",
        "big": f"big shapes (1-5 MB tool and image lines anywhere in the tree) sized for {target_mb} MiB",
    }[args.shape]
    took = time.perf_counter() - started
    lines = [
        f"### {args.entries:,} entries, {file_bytes['big'] / 2**20:,.0f} MiB (`--shape {args.shape}`), against {args.small} entries",
        "",
        f"Commit `{_commit()}` (app code as of `{_commit('explorer', 'sessions_site')}`); SQLite, Django test client, {backend} cache; big session: {shape}, "
        f"{args.branch_points} branch points, {file_bytes['big']:,} bytes; small: {args.small} entries, 5 branch points, "
        f"compactions considered after {args.small_compact_after:,} characters of path, {file_bytes['small']:,} bytes. "
        f"Per request: the median of {args.cold_repeat} cold (every cache cleared before each), the median of {args.repeat} warm, then one after an entry "
        "was appended at the tip (caches as the earlier requests left them; its live broadcast finished first). "
        f"Ratios are big / small in the same run; target ≤ 2. Run took {took / 60:.0f} min (generation and import excluded when cached).",
        "",
        "| request | cold small / big ms | × | warm small / big ms | × | after append small / big ms | × | bytes small / big | × |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for title, tm, r in rows:

        def mark(x: float) -> str:
            return f"**{x:.2f}**" if x > TARGET else f"{x:.2f}"

        lines.append(
            f"| {title} | {tm['small']['cold'] * 1000:.0f} / {tm['big']['cold'] * 1000:.0f} | {mark(r['cold'])} | "
            f"{tm['small']['warm'] * 1000:.1f} / {tm['big']['warm'] * 1000:.1f} | {mark(r['warm'])} | "
            f"{tm['small']['append'] * 1000:.0f} / {tm['big']['append'] * 1000:.0f} | {mark(r['append'])} | "
            f"{tm['small']['bytes']:,} / {tm['big']['bytes']:,} | {r['bytes']:.2f} |"
        )
    for title, text in errors:
        lines += ["", f"**{title} failed:**", "", "```", text.strip()[-4000:], "```"]
    if nodes:
        lines += [
            "",
            f"Folded graph: {nodes.get('small')} nodes for {args.small} entries, {nodes.get('big')} nodes for "
            f"{args.entries} entries (limit {MAX_NODES}).",
        ]
    lines += [
        "",
        "Cleared before every cold request: " + ", ".join(f"`{c}`" for c in cleared) + ".",
        "",
        f"Result: {'PASS' if ok else 'FAIL'}",
    ]
    if profiled:
        lines += ["", f"Profiled cold (`--profile-dir`): {', '.join(profiled)}."]
    if args.note:
        lines += ["", Path(args.note).read_text(encoding="utf-8").strip()]
    text = "\n".join(lines)
    print(text)
    print(f"wall time {took:.0f} s")
    if args.write_results:
        write_part(args.part or f"{args.shape}-{args.entries}", text)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
