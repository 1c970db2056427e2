"""``extract_references`` stops reading a kind once it holds its first ``_MAX_PER_KIND``
values and skips scans that cannot match: the same references, in the same order, as the
full reading (kept here as it was) for any texts, on generated sessions and on Pi's files."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.gen_session import generate_session
from explorer.analysis import compactions as comp_mod
from explorer.analysis.compactions import (
    _BACKTICK,
    _HEX_ID,
    _MAX_PER_KIND,
    _NUMBER,
    _PATH,
    _PROMPT,
    _URL,
    REFERENCE_KINDS,
    _is_command,
    compaction_ranges,
    extract_references,
    replaced_indices,
    survival_of,
)
from tests.conftest import pi_fixture_files


def _full_reading(
    texts: Iterable[str],
    *,
    commands: Iterable[str] = (),
    known_ids: Iterable[str] = (),
    outputs: Iterable[str] = (),
) -> dict[str, list[str]]:
    """``extract_references`` before it stopped early: every text read whole."""
    ids = set(known_ids)
    found: dict[str, dict[str, None]] = {k: {} for k in REFERENCE_KINDS}

    def add(kind: str, value: str) -> None:
        value = value.strip().rstrip(".,;:")
        if value and len(found[kind]) < _MAX_PER_KIND:
            found[kind][value] = None

    for cmd in commands:
        first = cmd.strip().splitlines()[0] if cmd.strip() else ""
        if first:
            add("command", first[:200])
    quiet = [(t, True) for t in outputs]
    for text, is_output in [*((t, False) for t in texts), *quiet]:
        if not text:
            continue
        rest = text
        for m in _URL.finditer(text):
            add("url", m.group(0).rstrip(".,;:!?"))
        rest = _URL.sub(" ", rest)
        if not is_output:
            for m in _BACKTICK.finditer(rest):
                if _is_command(m.group(1)):
                    add("command", m.group(1))
            for m in _PROMPT.finditer(rest):
                add("command", m.group(1))
        for m in _PATH.finditer(rest):
            v = m.group(0)
            if "/" in v or "." in v:
                add("path", v)
        for m in _HEX_ID.finditer(rest):
            if m.group(0) in ids:
                add("entry_id", m.group(0))
        if is_output:
            continue
        scrub = _PATH.sub(" ", _HEX_ID.sub(" ", rest))
        for m in _NUMBER.finditer(scrub):
            v = m.group(0).rstrip(",")
            digits = v.replace(",", "").replace("_", "")
            if "." in digits or len(digits) >= 3:
                add("number", v)
    return {k: list(v) for k, v in found.items()}


IDS = ["0a1b2c3d", "deadbeef", "12345678", "abcdef01", "9f8e7d6c"]
PIECES = st.one_of(
    st.sampled_from(
        [
            " ",
            "\n",
            "`",
            "$ ",
            "\n$ git status\n",
            "`npm test`",
            "`ls -la`",
            "https://",
            "http://ex.com/",
            "HTTPS://A.b/c",
            "://",
            "/",
            ".",
            ",",
            "_",
            ")",
            "~/",
            "src/",
            "a.py",
            ".json",
            "x.md",
            "1.5",
            "1,234",
            "10_000",
            "é",
            "中",
            "\ud800",
            *IDS,
            "deadbeefdeadbeef",
            "DEADBEEF",
        ]
    ),
    st.text(alphabet="abcdef0123456789/._-:", min_size=1, max_size=12),
    st.integers(0, 10**6).map(str),
)
TEXT = st.lists(PIECES, max_size=80).map("".join)


def _same(texts, commands=(), known_ids=(), outputs=()):
    got = extract_references(texts, commands=commands, known_ids=known_ids, outputs=outputs)
    want = _full_reading(texts, commands=commands, known_ids=known_ids, outputs=outputs)
    assert got == want


@settings(max_examples=300, deadline=None)
@given(
    st.lists(TEXT, max_size=5),
    st.lists(TEXT, max_size=5),
    st.lists(TEXT, max_size=3),
    st.sets(st.sampled_from(IDS)),
)
def test_any_texts_give_the_full_readings_references(texts, outputs, commands, ids):
    _same(texts, commands, ids, outputs)


@settings(max_examples=60, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=4), st.integers(1, 40))
def test_kinds_that_fill_give_the_full_readings_references(texts, times):
    # repeated and numbered so every kind passes _MAX_PER_KIND partway through a text
    many = [
        "".join(f"{t} /p{n}/f{n}.py https://h{n}.io/x {n}00 `git log -{n}` " for n in range(times))
        for t in texts
    ]
    ids = [f"{n:08x}" for n in range(0, 4000, 7)]
    _same(many, [], ids, [*many, " ".join(ids)])
    _same(many[:1], [], ids[:100], many[1:])


def test_a_multi_megabyte_output_after_its_kinds_fill():
    block = "".join(
        f"{n:06d} INFO worker-{n % 7} handled request /api/v1/items/{n * 37 % 9973} in {n % 97} ms\n"
        for n in range(1000)
    )
    big = (block * 40)[:3_700_000]
    late = big + " deadbeef https://late.example/x 0a1b2c3d\n"
    for outputs in ([big], [late], [big, late], [late, "abcdef01 ok"]):
        _same(["see src/a.py and 1,234 at https://x.io"], ["git status"], IDS, outputs)


# -- on sessions: every compaction's and branch summary's report ---------------------------


def _paths(entries: list[dict]) -> list[list[dict]]:
    by_id = {e["id"]: e for e in entries if isinstance(e.get("id"), str)}
    parents = {e.get("parentId") for e in by_id.values()}
    out = []
    for leaf in (i for i in by_id if i not in parents):
        path, at = [], leaf
        while isinstance(at, str) and at in by_id and len(path) <= len(by_id):
            path.append(by_id[at])
            at = by_id[at].get("parentId")
        out.append(path[::-1])
    return out


def _reports_agree(entries: list[dict], monkeypatch) -> int:
    checked = 0
    for path in _paths(entries):
        types = [str(e.get("type")) for e in path]
        ids = [str(e.get("id")) for e in path]
        cases = []
        for rng in compaction_ranges(path):
            replaced = [path[j] for j in replaced_indices(types, rng)][-150:]
            summary = path[rng[0]].get("summary")
            cases.append((replaced, summary if isinstance(summary, str) else "", ()))
        for i, e in enumerate(path):
            if e.get("type") == "branch_summary":
                summary = e.get("summary") if isinstance(e.get("summary"), str) else ""
                cases.append((path[max(0, i - 150) : i], summary, ids[:i]))
        # and windows of plain history against the last assistant text, for coverage
        for stop in range(50, len(path), 97):
            cases.append((path[max(0, stop - 150) : stop], json.dumps(path[stop]), ids))
        for replaced, summary, known in cases:
            got = survival_of(replaced, summary, known)
            with monkeypatch.context() as m:
                m.setattr(comp_mod, "extract_references", _full_reading)
                want = survival_of(replaced, summary, known)
            assert got == want
            checked += 1
    return checked


def test_generated_sessions_give_the_same_reports(tmp_path, monkeypatch):
    for n, (size, after) in enumerate([(800, 60), (2500, 200), (1500, None)]):
        f = generate_session(
            tmp_path / f"s{n}.jsonl", entries=size, branch_points=6, seed=n, compact_after=after
        )
        rows = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()[1:]]
        assert _reports_agree(rows, monkeypatch) > 0


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_pi_fixtures_give_the_same_reports(path: Path, monkeypatch):
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and row.get("type") != "session":
            rows.append(row)
    _reports_agree(rows, monkeypatch)


def test_the_hex_run_test_matches_the_id_pattern():
    for text in ["", "deadbee", "deadbeef", "xdeadbeefx", "DEADBEEF", "dead-beef", "é12345678"]:
        assert comp_mod._has_hex_run(text) == bool(re.search(r"[0-9a-f]{8}", text))
