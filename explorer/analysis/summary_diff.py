"""A summary beside the one before it: a word diff, and which references of the earlier
summary the later one dropped.

A compaction's summary is written from the previous summary plus what happened since, so
what it drops is usually lost to the model for good; a word diff shows the rewording, the
reference check shows what matters (file paths, identifiers, ids, URLs, commands, numbers)
in one list. Pure functions over two strings; a compaction's comparison is stored with its
survival check when it arrives (``survival_writer``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Literal

from explorer.analysis.compactions import (
    SurvivalReport,
    extract_references,
    reference_survival,
)

Op = Literal["same", "removed", "added"]

# Word tokens, whitespace kept as its own tokens so the two sides read as written.
_TOKEN = re.compile(r"\s+|[^\s]+")
# Code identifiers: snake_case, camelCase / PascalCase with an inner capital, dotted names
# (``queries.route_map``) and anything in backticks that is one word. Plain words are not
# identifiers: their loss shows in the word diff, not in the list of dropped references.
_IDENT = re.compile(
    r"(?<![\w./-])(?:[A-Za-z_][A-Za-z0-9_]*\.)*"
    r"(?:[A-Za-z][A-Za-z0-9]*_[A-Za-z0-9_]*|_[A-Za-z0-9_]+|[a-z]+[A-Z][A-Za-z0-9]*|"
    r"[A-Z][a-z0-9]+[A-Z][A-Za-z0-9]*)(?:\(\))?(?![\w/-])"
)
_BACKTICK_WORD = re.compile(r"`([A-Za-z_][\w.]*(?:\(\))?)`")
MAX_TOKENS = 20000  # each side; a longer summary is compared on its first 20,000 tokens
MAX_IDENTIFIERS = 150


def word_diff(old: str, new: str) -> list[tuple[Op, str]]:
    """``old`` → ``new`` as runs of kept, removed and added text (whitespace included), in
    reading order: removed runs come before the added runs that replace them."""
    a = _TOKEN.findall(old or "")[:MAX_TOKENS]
    b = _TOKEN.findall(new or "")[:MAX_TOKENS]
    out: list[tuple[Op, str]] = []

    def put(op: Op, tokens: list[str]) -> None:
        if not tokens:
            return
        text = "".join(tokens)
        if out and out[-1][0] == op:
            out[-1] = (op, out[-1][1] + text)
        else:
            out.append((op, text))

    # Lines first, then words within each changed stretch of lines: a word matcher over two
    # whole summaries of thousands of words (every space a token) cost half a second a page;
    # a summary is rewritten a paragraph at a time, so the lines that stay are found first.
    a_lines, b_lines = _lines(a), _lines(b)
    by_line = difflib.SequenceMatcher(None, a_lines, b_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in by_line.get_opcodes():
        old_words = [t for line in a_lines[i1:i2] for t in line]
        new_words = [t for line in b_lines[j1:j2] for t in line]
        if tag == "equal":
            put("same", old_words)
            continue
        matcher = difflib.SequenceMatcher(None, old_words, new_words, autojunk=False)
        for op, k1, k2, m1, m2 in matcher.get_opcodes():
            if op == "equal":
                put("same", old_words[k1:k2])
            else:
                put("removed", old_words[k1:k2])
                put("added", new_words[m1:m2])
    return out


def _lines(tokens: list[str]) -> list[tuple[str, ...]]:
    """``tokens`` cut into lines (a token holding a line break ends one)."""
    lines: list[tuple[str, ...]] = []
    start = 0
    for k, t in enumerate(tokens):
        if "\n" in t:
            lines.append(tuple(tokens[start : k + 1]))
            start = k + 1
    if start < len(tokens):
        lines.append(tuple(tokens[start:]))
    return lines


def identifiers(text: str) -> list[str]:
    """Code identifiers named in ``text`` (see ``_IDENT``), first mention first."""
    found: dict[str, None] = {}
    for m in _BACKTICK_WORD.finditer(text or ""):
        found.setdefault(m.group(1), None)
    for m in _IDENT.finditer(text or ""):
        found.setdefault(m.group(0), None)
    return list(found)[:MAX_IDENTIFIERS]


def summary_references(text: str, known_ids: Iterable[str] = ()) -> dict[str, list[str]]:
    """The references a summary names: the survival check's kinds plus identifiers."""
    refs = extract_references([text or ""], known_ids=known_ids)
    named = set().union(*refs.values()) if refs else set()
    refs["identifier"] = [i for i in identifiers(text) if i not in named]
    return refs


def dropped_references(old: str, new: str, known_ids: Iterable[str] = ()) -> SurvivalReport:
    """Each reference of the earlier summary ``old``, and whether the later ``new`` still
    names it (``survived``), by the survival check's own rules."""
    return reference_survival(summary_references(old, known_ids), new or "")
