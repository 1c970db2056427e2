"""Search index benchmarks (ratios measured in one run, results in RESULTS.md).

1. What filling the visible-text index costs at import: the time of ``files.index_new_entries``
   for a whole generated session against the engine's own ``SessionManager.open`` of that
   file (the import benchmark's baseline), and the import with the index against it.
2. What the index buys: one complete search ("function", every hit counted and the first page
   listed) through the trigram FTS5 index against the same search as a plain ``icontains``
   scan of the same text table.

Run:  python benchmarks/bench_search.py [--entries 20000] [--repeat 3] [--write-results]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_import import _best, _header_id, _setup_django  # noqa: E402
from benchmarks.gen_session import DEFAULT_SEED, generate_session  # noqa: E402
from benchmarks.results import write_section  # noqa: E402


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        work = Path(tmp)
        _setup_django(str(work / "db.sqlite3"))
        from django.db import transaction

        from explorer import files, queries, services
        from explorer.models import EntryText, Session
        from explorer.session.manager import SessionManager

        src = generate_session(work / "gen.jsonl", entries=args.entries, seed=DEFAULT_SEED)
        data = src.read_bytes()

        def engine_open() -> None:
            copy = work / "open-copy.jsonl"
            copy.write_bytes(data)
            SessionManager.open(str(copy))

        def do_import() -> None:
            assert services.import_bytes(data, source_path=str(src)).ok

        opens, imports, indexes = [], [], []
        for _ in range(args.repeat):
            opens.append(_best(engine_open, 1))
            Session.objects.filter(session_id=_header_id(data)).delete()  # untimed
            imports.append(_best(do_import, 1))
            session = Session.objects.get(session_id=_header_id(data))
            EntryText.objects.filter(session=session).delete()
            start = time.perf_counter()
            with transaction.atomic():  # as at import: inside the storing transaction
                rows = files.index_new_entries(session)
            indexes.append(time.perf_counter() - start)
        t_open = min(opens)

        from django.db import connection

        assert connection.vendor == "sqlite"

        def fts() -> None:
            queries.search_entries("function")

        def scan() -> None:
            qs = EntryText.objects.filter(text__icontains="function")
            total = qs.count()
            list(qs.order_by("session_id", "position").values("entry_id", "text")[:50])
            assert total >= 0

        t_fts, t_scan = _best(fts, args.repeat), _best(scan, args.repeat)
        return {
            "entries": args.entries,
            "indexed_rows": rows,
            "hits": queries.search_entries("function")["total"],
            "engine_open_s": t_open,
            "import_s": min(imports),
            "index_s": min(indexes),
            "fts_s": t_fts,
            "scan_s": t_scan,
        }


def report(r: dict[str, Any]) -> str:
    return "\n".join(
        [
            "## Search index (bench_search.py)",
            "",
            f"Generated session of {r['entries']:,} entries ({r['indexed_rows']:,} with visible "
            f'text; "function" has {r["hits"]:,} hits). Ratios against the engine\'s own open of '
            "the same file, measured in the same run (best of each):",
            "",
            "| Measure | Ratio |",
            "|---|---|",
            f"| filling the index / engine open | {r['index_s'] / r['engine_open_s']:.2f}x |",
            f"| whole import with the index / engine open | "
            f"{r['import_s'] / r['engine_open_s']:.2f}x (target of the import benchmark: 4x) |",
            f"| share of the import spent on the index | {r['index_s'] / r['import_s']:.0%} |",
            f"| whole import without the index (import − index) / engine open | "
            f"{(r['import_s'] - r['index_s']) / r['engine_open_s']:.2f}x |",
            f'| search "function" (count + first page): FTS5 trigram / icontains scan | '
            f"{r['fts_s'] / r['scan_s']:.2f}x |",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args()
    text = report(run(args))
    print(text)
    if args.write_results:
        write_section("search-index", text)


if __name__ == "__main__":
    main()
