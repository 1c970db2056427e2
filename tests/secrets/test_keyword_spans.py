"""Long texts are lower-cased a span at a time for the keyword pass: every keyword is still
found exactly once (also across a span's edge), secrets there are still found, and a
multi-MB non-ASCII tool result no longer costs many times its size to scan."""

from __future__ import annotations

import random
import tracemalloc

from explorer.secrets import scan_text, scanner

from .seeded import make_secrets

S = make_secrets(43)
SPAN = scanner._KEYWORD_SPAN


def _whole(text: str) -> list[tuple[int, int, int]]:
    """The keyword pass over the whole text lower-cased at once (what spans must equal)."""
    return sorted(
        scanner._KEYWORDS.find_matches_as_indexes(scanner._lowered(text), overlapping=True)
    )


def test_keywords_across_span_edges_are_found_once():
    for keyword in ("age-secret-key-1", "hooks.slack.com", "token", "://"):
        for shift in range(len(keyword) + 1):
            text = "é" * (SPAN - shift) + keyword.upper() + " tail " * 10
            hits = sorted(scanner._keyword_hits(text))
            assert hits == _whole(text)
            word = scanner._KEYWORD_LIST.index(keyword)
            assert sum(1 for h in hits if h[0] == word) == 1


def test_spans_equal_the_whole_text_on_mixed_texts():
    rng = random.Random(11)
    pieces = ["x" * 5000, "é", "😀", " ", "Σ", "\n", "ß"]
    for _trial in range(30):
        parts = []
        while sum(map(len, parts)) < 3 * SPAN:
            word = rng.choice(scanner._KEYWORD_LIST)
            parts.append(rng.choice([word, word.upper(), rng.choice(pieces), rng.choice(pieces)]))
        text = "".join(parts)
        assert sorted(scanner._keyword_hits(text)) == _whole(text)


def test_a_secret_on_a_span_edge_is_found():
    token = S["github-token"]
    for shift in (0, 2, len(token) // 2, len(token)):
        text = "ü" * (SPAN - shift) + f" GH_TOKEN={token} " + "ü" * 100
        found = [text[m.start : m.end] for m in scan_text(text)]
        assert found == [token]


def test_scanning_a_big_non_ascii_text_costs_about_its_size():
    text = ("résumé of the build 😀 ok\n" * 120_000)[:3_000_000]  # 3 M characters, 12 MB
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        scan_text(text)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # Lower-cased whole, the pass briefly held 4 + 12 bytes per character (48 MB here).
    assert peak - before < 2 * 1024 * 1024
