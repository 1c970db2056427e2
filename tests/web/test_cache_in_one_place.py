"""Every cache of a read goes through ``explorer/queries/keep.py``: the guard that keeps it
so. A module that reaches for Django's cache itself fails here, named, so a new cache is
either an API of ``keep.py`` or one of the few stores of *state* (not of figures) below."""

from __future__ import annotations

import re
from pathlib import Path

import explorer

APP = Path(explorer.__file__).resolve().parent

# What may use the cache directly, and why: none of these keeps a figure a page computes.
STATE_STORES = {
    "queries/keep.py": "the cache plumbing of the reads",
    "shared_copies.py": "writes keep.py's copies after the answer",
    "services/imports.py": "an upload's progress, written while it streams",
    "queries/listing.py": "reads that progress back for the uploader",
    "shares.py": "the share links' guessing limit per address",
    "turns.py": "whether a model turn runs, shared between workers",
}
_USES_CACHE = re.compile(r"^\s*(from django\.core\.cache import|import django\.core\.cache)", re.M)


def test_only_keep_and_the_state_stores_touch_the_cache() -> None:
    users = sorted(
        str(p.relative_to(APP))
        for p in APP.rglob("*.py")
        if "migrations" not in p.parts and _USES_CACHE.search(p.read_text(encoding="utf-8"))
    )
    assert users == sorted(STATE_STORES), (
        "a module uses Django's cache outside explorer/queries/keep.py: give keep.py the "
        f"API it needs instead; found {users}"
    )


def test_the_guard_sees_an_import() -> None:
    assert _USES_CACHE.search("x = 1\nfrom django.core.cache import cache\n")
    assert not _USES_CACHE.search("# from django.core.cache import cache is not used here\n")


def test_by_content_lays_out_a_text_once_whoever_asks() -> None:
    from django.core.cache import cache

    from explorer.queries.keep import by_content

    cache.clear()
    built: list[str] = []

    def layout(text: str) -> str:
        built.append(text)
        return f"<svg>{len(built)}</svg>"

    first = by_content("svg-layout", "digraph { a }", lambda: layout("a"))
    again = by_content("svg-layout", "digraph { a }", lambda: layout("a"))
    other = by_content("svg-layout", "digraph { b }", lambda: layout("b"))
    # A lone surrogate is drawn as U+FFFD, so it is the same layout.
    odd = by_content("svg-layout", "digraph { \ud800 }", lambda: layout("odd"))
    same = by_content("svg-layout", "digraph { \ufffd }", lambda: layout("fffd"))
    assert (first, again, other) == ("<svg>1</svg>", "<svg>1</svg>", "<svg>2</svg>")
    assert odd == same == "<svg>3</svg>"
    assert built == ["a", "b", "odd"]
