"""Secret scanner: false positives on ordinary code and logs, and scanning throughput.

1. False positives. Every finding on a corpus that holds no live secret counts as one:
   the Python standard library source (`/usr/lib/python3.11`), the packages installed in
   the virtualenv (Django, cryptography, Playwright, ...), this project's own code and
   tests, Pi's real session fixtures (`/work/shared/fixtures/pi`, read only) and the
   machine's plain-text logs. Printed per corpus: MB, findings, findings per MB, the share
   of lines with a finding, and the rules that fire most (with masked previews only).
2. Throughput. `scan_entry` over every line of a generated session (`gen_session.py`),
   against a plain `orjson.loads` of the same lines measured in the same run; and
   `redact_line` over the same lines.

Run:  python benchmarks/bench_secrets.py [--entries 5000] [--write-results]
"""

from __future__ import annotations

import argparse
import collections
import os
import platform
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.gen_session import DEFAULT_SEED, generate_session  # noqa: E402
from benchmarks.results import write_section  # noqa: E402
from explorer.secrets import (  # noqa: E402
    RULES_VERSION,
    redact_line,
    scan_entry,
    scan_text,
    scanner,  # noqa: E402
)

STDLIB = Path("/usr/lib/python3.11")
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
PI_FIXTURES = Path(os.environ.get("SESSIONS_FIXTURES_DIR", "/work/shared/fixtures")) / "pi"
TEXT_SUFFIXES = {".py", ".md", ".txt", ".html", ".css", ".js", ".toml", ".cfg", ".json", ".jsonl"}


_SKIP_DIRS = frozenset({"__pycache__", ".venv", ".git", "node_modules", "dist-packages"})


def _files(root: Path, suffixes: set[str]) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.suffix in suffixes and path.is_file():
                yield path


def corpora() -> dict[str, list[Path]]:
    logs = [p for p in sorted(Path("/var/log").glob("*.log")) if os.access(p, os.R_OK)]
    logs += [p for p in sorted(Path("/var/log/apt").glob("*.log")) if os.access(p, os.R_OK)]
    return {
        "python3.11 stdlib (.py)": list(_files(STDLIB, {".py"})),
        "installed packages (Django, cryptography, ...: .py/.js/.json/.txt/.md)": list(
            _files(SITE_PACKAGES, TEXT_SUFFIXES)
        ),
        "this repo (code, tests, docs)": [
            # the scanner's own tests hold fake secrets on purpose
            p
            for p in _files(ROOT, TEXT_SUFFIXES)
            if "benchmarks/RESULTS.md" not in str(p) and "tests/secrets" not in str(p)
        ],
        "Pi fixtures (JSONL, scan_entry)": sorted(PI_FIXTURES.glob("*.jsonl")),
        "system logs (/var/log)": logs,
    }


def measure_false_positives(
    paths: list[Path],
) -> tuple[int, int, int, collections.Counter[str], dict[str, list[str]]]:
    """(bytes, lines, lines with a finding, findings per kind, sample locations per kind)."""
    size = lines = hit_lines = 0
    kinds: collections.Counter[str] = collections.Counter()
    where: dict[str, list[str]] = collections.defaultdict(list)
    for path in paths:
        data = path.read_bytes()
        size += len(data)
        jsonl = path.suffix == ".jsonl"
        for number, raw in enumerate(data.split(b"\n"), 1):
            if not raw.strip():
                continue
            lines += 1
            text = raw.decode("utf-8", "replace")
            if jsonl:
                try:
                    kinds_here = [f.kind for f in scan_entry(orjson.loads(raw))]
                except orjson.JSONDecodeError:
                    kinds_here = [m.kind for m in scan_text(text)]
            else:
                kinds_here = [m.kind for m in scan_text(text)]
            if kinds_here:
                hit_lines += 1
                kinds.update(kinds_here)
                for kind in kinds_here:
                    if len(where[kind]) < 3:
                        where[kind].append(f"{path.name}:{number}")
    return size, lines, hit_lines, kinds, where


def _interleaved_best(fns: list, rounds: int = 5) -> list[float]:
    """Best time of each function over `rounds` rounds that run them one after the other,
    so that a burst of load on a shared machine hits every measurement alike."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - t0)
    return best


def measure_throughput(entries: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        path = generate_session(
            os.path.join(tmp, "s.jsonl"),
            entries=entries,
            branch_points=entries // 250,
            seed=DEFAULT_SEED,
        )
        data = Path(path).read_bytes()
    raw_lines = [line for line in data.split(b"\n") if line]
    parsed = [orjson.loads(line) for line in raw_lines]
    mb = len(data) / 1e6

    def parse() -> None:
        for line in raw_lines:
            orjson.loads(line)

    def scan() -> None:
        for entry in parsed:
            scan_entry(entry)

    def parse_and_scan() -> None:
        for line in raw_lines:
            scan_entry(orjson.loads(line))

    def redact() -> None:
        for line in raw_lines:
            redact_line(line)

    # the keyword gate alone, on the strings a scan looks at: one substring test per
    # keyword (the simple way) against the one Aho-Corasick pass the scanner makes
    lowered = [scanner._lowered(s) for e in parsed for _, _, s in scanner._walk(e, 8)]
    keywords = scanner._KEYWORD_LIST

    def gate_substrings() -> None:
        for low in lowered:
            for k in keywords:
                k in low  # noqa: B015

    def gate_automaton() -> None:
        for low in lowered:
            scanner._KEYWORDS.find_matches_as_indexes(low, overlapping=True)

    t_parse, t_scan, t_both, t_redact, t_sub, t_ac = _interleaved_best(
        [parse, scan, parse_and_scan, redact, gate_substrings, gate_automaton]
    )
    findings = sum(len(scan_entry(e)) for e in parsed)
    return {
        "mb": mb,
        "lines": len(raw_lines),
        "parse": mb / t_parse,
        "scan": mb / t_scan,
        "both": mb / t_both,
        "redact": mb / t_redact,
        "ratio": t_both / t_parse,
        "redact_ratio": t_redact / t_parse,
        "generated_findings": findings,
        "gate_substrings": t_sub / t_parse,
        "gate_automaton": t_ac / t_parse,
        "keywords": len(keywords),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--write-results", action="store_true")
    args = parser.parse_args(argv)

    out: list[str] = []

    def say(line: str = "") -> None:
        print(line)
        out.append(line)

    say(
        f"Rules version {RULES_VERSION}; Python {platform.python_version()} on {platform.machine()}."
    )
    say()
    say("**False positives** (every finding on these corpora is one; none holds a live secret):")
    say()
    say("| corpus | MB | lines | findings | per MB | lines with a finding | top rules |")
    say("|---|---:|---:|---:|---:|---:|---|")
    total_mb = total_findings = total_lines = total_hit = 0
    all_kinds: collections.Counter[str] = collections.Counter()
    samples: dict[str, list[str]] = {}
    for name, paths in corpora().items():
        size, lines, hit, kinds, where = measure_false_positives(paths)
        n = sum(kinds.values())
        total_mb += size
        total_findings += n
        total_lines += lines
        total_hit += hit
        all_kinds.update(kinds)
        for k, v in where.items():
            samples.setdefault(k, v)
        top = ", ".join(f"{k} {c}" for k, c in kinds.most_common(4)) or "none"
        say(
            f"| {name} | {size / 1e6:.1f} | {lines:,} | {n} | {n / max(size / 1e6, 1e-9):.2f} | "
            f"{hit / max(lines, 1):.4%} | {top} |"
        )
    say(
        f"| **all** | {total_mb / 1e6:.1f} | {total_lines:,} | {total_findings} | "
        f"{total_findings / (total_mb / 1e6):.2f} | {total_hit / max(total_lines, 1):.4%} | "
        f"{', '.join(f'{k} {c}' for k, c in all_kinds.most_common(4)) or 'none'} |"
    )
    say()
    if samples:
        say(
            "Where the top rules fired (first lines per rule): "
            + "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(samples.items()))
        )
        say()
    t = measure_throughput(args.entries)
    say(
        f"**Throughput** on a generated {args.entries:,}-entry session ({t['mb']:.1f} MB, {t['lines']:,} lines), best of 5 interleaved rounds:"
    )
    say()
    say("| step | MB/s | time vs `orjson.loads` alone |")
    say("|---|---:|---:|")
    say(f"| `orjson.loads` of each line (baseline) | {t['parse']:.1f} | 1.00x |")
    say(f"| `scan_entry` of each parsed entry | {t['scan']:.1f} | {t['parse'] / t['scan']:.2f}x |")
    say(f"| `orjson.loads` + `scan_entry` | {t['both']:.1f} | {t['ratio']:.2f}x |")
    say(f"| `redact_line` of each raw line | {t['redact']:.1f} | {t['redact_ratio']:.2f}x |")
    say()
    say(
        f"Keyword gate alone ({t['keywords']} keywords, time vs `orjson.loads`): one substring "
        f"test per keyword {t['gate_substrings']:.2f}x, one Aho-Corasick pass (`ahocorasick-rs`) "
        f"{t['gate_automaton']:.2f}x, so the automaton is "
        f"{t['gate_substrings'] / t['gate_automaton']:.1f}x faster."
    )
    say()
    say(f"Findings in the generated session (it holds no secret): {t['generated_findings']}.")
    load = os.getloadavg()[0]
    say(
        f"Load average during the run: {load:.1f} on {os.cpu_count()} CPUs "
        "(absolute MB/s move with the load; the ratio to `orjson.loads` is the figure to compare)."
    )
    if args.write_results:
        write_section(
            "bench_secrets", "## Secret scanner (`bench_secrets.py`)\n\n" + "\n".join(out)
        )
        print("RESULTS.md updated")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
