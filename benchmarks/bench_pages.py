"""Explorer page benchmark: a 50,000-entry session against a 500-entry one, in one run.

Targets (issue 12): every page of the big session (tree, graph, transcript, raw vs projected,
compactions, compare, timeline, integrity, search and its count, live) costs at most 2x the
same page of the small session, cold (first request, empty cache), warm, and cold again after an entry is
appended (the cache as the page left it: what a reader meets after every write); page weight
(HTML bytes) is reported beside it; the folded graph keeps a few hundred nodes at most.

The small session is generated with compactions considered after fewer characters of path
(``--small-compact-after``) than the big one's default: at the default it has none on its
default route, and its Compactions tab would be an empty state compared with a full one. With
200,000 its default route (212 entries) has one compaction, as the big one's (984) has, and
the live range after it is 122 entries (the big one's: 515; at the default spacing the whole
132-entry route was live). A denser spacing would shrink the small session's live range,
which is what Raw vs projected, Compare and the meter cost in proportion to.

Run:  python benchmarks/bench_pages.py [--entries 50000] [--small 500] [--repeat 7] [--only 'tree page,live'] [--write-results]
"""

from __future__ import annotations

import argparse
import re
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
# The small session's compaction spacing (characters of path): its default route then holds a
# compaction like the big session's (generated at the default spacing) does.
SMALL_COMPACT_AFTER = 200_000
MAX_NODES = 400
# (title, url name, query string); "{a}"/"{b}" are two leaves of the session, "{word}" a word
# the generator writes into user messages.
PAGES = (
    ("tree page", "explorer:session_detail", ""),
    ("graph SVG", "explorer:graph_svg", ""),
    ("transcript", "explorer:transcript", ""),
    ("raw vs projected", "explorer:context", ""),
    ("compactions", "explorer:compactions", ""),
    ("compare", "explorer:compare", "a={a}&b={b}"),
    ("timeline", "explorer:timeline", ""),
    ("integrity", "explorer:integrity", ""),
    ("search", "explorer:session_search", "q={word}"),
    # What the search page asks for after it listed a big session's first hits uncounted.
    ("search count", "explorer:session_search_count", "q={word}&type=&offset=0"),
    ("live", "explorer:live", ""),
)


def _timed(client, url: str) -> tuple[float, int, bytes]:
    t = time.perf_counter()
    r = client.get(url)
    took = time.perf_counter() - t
    assert r.status_code == 200, (url, r.status_code)
    return took, r.status_code, r.content


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=50_000)
    ap.add_argument("--small", type=int, default=500)
    ap.add_argument(
        "--small-compact-after",
        type=int,
        default=SMALL_COMPACT_AFTER,
        help="characters of path before the small session's generator considers a compaction",
    )
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", default="", help="comma-separated page titles to run")
    ap.add_argument("--write-results", action="store_true")
    ap.add_argument("--note", default="", help="a Markdown file whose text ends the section")
    args = ap.parse_args(argv)

    tmp = Path(tempfile.mkdtemp(prefix="bench-pages-"))
    client = setup_site(tmp)
    from django.core.cache import cache
    from django.urls import reverse

    from explorer import broadcast, queries, rendering, services, shared_copies
    from explorer.models import Session

    sessions: dict[str, Session] = {}
    leaves: dict[str, tuple[str, str]] = {}
    spacing = {"small": args.small_compact_after, "big": None}
    for label, n, bp, seed in (("small", args.small, 5, 11), ("big", args.entries, 200, 7)):
        path = tmp / f"{label}.jsonl"
        generate_session(
            str(path), entries=n, branch_points=bp, seed=seed, compact_after=spacing[label]
        )
        t = time.perf_counter()
        result = services.import_bytes(path.read_bytes(), source_path=str(path), user=None)
        print(f"imported {label}: {n} entries in {time.perf_counter() - t:.1f}s", flush=True)
        sessions[label] = result.session
        choices = [c["id"] for c in queries.leaf_choices(result.session)]
        leaves[label] = (choices[0], choices[len(choices) // 2])

    layouts = {"n": 0}
    original = rendering._layout

    def counting(dot: str) -> str:
        layouts["n"] += 1
        return original(dot)

    rendering._layout = counting
    # One request of an unrelated page first: the process's warm-up (imports, the first
    # graphviz call) must not land on whichever page is measured cold first.
    client.get(reverse("explorer:session_list"))
    client.get(reverse("explorer:graph_svg", args=[sessions["small"].pk]))
    shared_copies.flush()
    cache.clear()
    wanted = {t.strip() for t in args.only.split(",") if t.strip()}
    rows = []
    nodes = {}
    for title, name, query in PAGES:
        if wanted and title not in wanted:
            continue
        timing: dict[str, dict[str, float]] = {}
        for label in ("small", "big"):
            s = Session.objects.get(pk=sessions[label].pk)
            a, b = leaves[label]
            url = reverse(name, args=[s.pk])
            if query:
                url += "?" + query.format(a=a, b=b, word="fix")
            # The copies the earlier pages handed to the writer land before the clear, not
            # in the cold request (whose own copies are written after its answer).
            shared_copies.flush()
            cache.clear()
            cold, _, _ = _timed(client, url)
            warm = [_timed(client, url) for _ in range(args.repeat)]
            body = warm[-1][2]
            # Cold after an append: the session gains one entry at its tip, then the page is
            # asked for again with the cache as the earlier requests left it.
            services.rename_session(s, None, f"bench {title}", leaf_id=queries.default_leaf_id(s))
            # The append's own live broadcast (its frames, the meter) runs in a worker thread
            # of this process; measured beside the page, it would hold the interpreter lock
            # through part of the request (30-60 ms of its own work). Its cost is
            # bench_live's; this one measures the page.
            broadcast.drain(30)
            appended, _, _ = _timed(client, url)
            timing[label] = {
                "cold": cold,
                "warm": statistics.median(w[0] for w in warm),
                "append": appended,
                "bytes": len(body),
            }
            if name == "explorer:graph_svg":
                nodes[label] = len(re.findall(r"class=\"node ge ", body.decode()))
        ratios = {
            k: timing["big"][k] / max(timing["small"][k], 1e-9)
            for k in ("cold", "warm", "append", "bytes")
        }
        rows.append((title, timing, ratios))
        print(
            f"{title}: warm {timing['small']['warm'] * 1000:.1f}/{timing['big']['warm'] * 1000:.1f} ms (x{ratios['warm']:.2f}), "
            f"cold {timing['small']['cold'] * 1000:.0f}/{timing['big']['cold'] * 1000:.0f} ms (x{ratios['cold']:.2f}), "
            f"after append {timing['small']['append'] * 1000:.0f}/{timing['big']['append'] * 1000:.0f} ms (x{ratios['append']:.2f}), "
            f"HTML {timing['small']['bytes']}/{timing['big']['bytes']} bytes",
            flush=True,
        )
    if nodes:
        print(f"graph nodes: small {nodes.get('small')}, big {nodes.get('big')}")

    from django.conf import settings

    backend = settings.CACHES["default"]["BACKEND"].rsplit(".", 1)[-1]
    ok = all(max(r[2]["warm"], r[2]["cold"], r[2]["append"]) <= TARGET for r in rows)
    ok = ok and (nodes.get("big") or 0) <= MAX_NODES
    lines = [
        "## Explorer pages (`benchmarks/bench_pages.py`)",
        "",
        f"SQLite, Django test client, {backend} cache; generated sessions of {args.small} and {args.entries} entries "
        f"(5 and 200 branch points; the small one's compactions considered after {args.small_compact_after:,} "
        "characters of path instead of 600,000, so that its default route has one as the big one's has). "
        f"Per page: one cold request (cache cleared), the median of {args.repeat} warm "
        "requests, then one request after an entry was appended at the tip (the cache as the page left it; its live broadcast finished first). "
        "Ratios are big / small in the same run; target ≤ 2 for all three.",
        "",
        "| page | warm small / big ms | × | cold small / big ms | × | after append small / big ms | × | HTML bytes small / big |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for title, t, r in rows:
        lines.append(
            f"| {title} | {t['small']['warm'] * 1000:.1f} / {t['big']['warm'] * 1000:.1f} | {r['warm']:.2f} | "
            f"{t['small']['cold'] * 1000:.0f} / {t['big']['cold'] * 1000:.0f} | {r['cold']:.2f} | "
            f"{t['small']['append'] * 1000:.0f} / {t['big']['append'] * 1000:.0f} | {r['append']:.2f} | "
            f"{t['small']['bytes']} / {t['big']['bytes']} |"
        )
    lines += [
        "",
        f"Folded graph: {nodes.get('small')} nodes for {args.small} entries, {nodes.get('big')} nodes for "
        f"{args.entries} entries (limit {MAX_NODES}).",
        f"Result: {'PASS' if ok else 'FAIL'}",
    ]
    if args.note:
        lines += ["", Path(args.note).read_text(encoding="utf-8").strip()]
    text = "\n".join(lines)
    print(text)
    if args.write_results:
        write_section("bench_pages", text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
