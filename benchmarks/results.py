"""One place that updates `benchmarks/RESULTS.md`.

Each benchmark script owns one section, fenced by `<!-- NAME:start -->` and
`<!-- NAME:end -->`; rewriting a section leaves every other script's results where they are.
"""

from __future__ import annotations

from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def write_section(name: str, body: str, path: Path = RESULTS) -> None:
    """Replace section `name` in place, or append it when the file does not have it yet."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{body.rstrip(chr(10))}\n{end}\n"
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmark results\n"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1].lstrip("\n")
        text = before + block + ("\n" + after if after else "")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text, encoding="utf-8")
