"""The command line, run as a real subprocess (`python -m explorer.session`).

Covers the JSON shapes other tools consume, that inspection never writes to the file it reads,
that ids assigned while migrating legacy files are the same on every run, per-leaf output with
`--all-leaves` (including a leaf that fails), very deep linear sessions, and `validate`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from explorer.session import __main__ as cli
from explorer.session import cli_commands
from explorer.session.jsonfmt import dumps
from tests.conftest import PI_FIXTURES, pi_fixture_files

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = PI_FIXTURES
FIXTURE_FILES = pi_fixture_files()


def run(*args: str | Path, check_code: int | None = 0) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT))
    env.pop("PISESSION_DEBUG", None)
    proc = subprocess.run(
        [sys.executable, "-m", "explorer.session", *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    if check_code is not None:
        assert proc.returncode == check_code, (
            proc.returncode,
            proc.stdout[-2000:],
            proc.stderr[-2000:],
        )
    assert "Traceback" not in proc.stderr
    return proc


def json_lines(proc: subprocess.CompletedProcess[str]) -> list[Any]:
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def ts(n: int) -> str:
    return f"2025-03-04T05:{n // 60:02d}:{n % 60:02d}.000Z"


def usage(total: int) -> dict[str, Any]:
    return {
        "input": total - 10,
        "output": 10,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": total,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


def user(entry_id: str, parent: str | None, n: int, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": ts(n),
        "message": {"role": "user", "content": text, "timestamp": 1741064700000 + n},
    }


def assistant(entry_id: str, parent: str, n: int, text: str, total: int = 100) -> dict[str, Any]:
    return {
        "type": "message",
        "id": entry_id,
        "parentId": parent,
        "timestamp": ts(n),
        "message": {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "api": "anthropic-messages",
            "provider": "anthropic",
            "model": "claude-sonnet-4-5",
            "usage": usage(total),
            "stopReason": "stop",
            "timestamp": 1741064700000 + n,
        },
    }


HEADER = {
    "type": "session",
    "version": 3,
    "id": "0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a2b",
    "timestamp": ts(0),
    "cwd": "/home/ana/proj",
}


def write_session(
    path: Path, entries: list[dict[str, Any]], header: dict[str, Any] | None = HEADER
) -> Path:
    lines = ([dumps(header)] if header else []) + [dumps(e) for e in entries]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture()
def branched(tmp_path: Path) -> Path:
    """u1 → a1 → {u2 → a2, u3 → label(u1)}; the label entry is the last line (the leaf)."""
    entries = [
        user("u1", None, 1, "hello"),
        assistant("a1", "u1", 2, "hi there"),
        user("u2", "a1", 3, "branch A"),
        assistant("a2", "u2", 4, "answer A", total=150),
        user("u3", "a1", 5, "branch B"),
        {
            "type": "label",
            "id": "l1",
            "parentId": "u3",
            "timestamp": ts(6),
            "targetId": "u1",
            "label": "start",
        },
    ]
    return write_session(tmp_path / "branched.jsonl", entries)


def snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


# ---------------------------------------------------------------------------------------------
# JSON shapes


def test_entries_json_lists_every_entry_in_file_order(branched: Path) -> None:
    (records,) = json_lines(run("entries", branched, "--json"))
    assert records == [
        {"id": "u1", "parentId": None, "type": "message"},
        {"id": "a1", "parentId": "u1", "type": "message"},
        {"id": "u2", "parentId": "a1", "type": "message"},
        {"id": "a2", "parentId": "u2", "type": "message"},
        {"id": "u3", "parentId": "a1", "type": "message"},
        {"id": "l1", "parentId": "u3", "type": "label"},
    ]


def test_tree_json_nests_children_and_omits_missing_labels(branched: Path) -> None:
    proc = run("tree", branched, "--json")
    (tree,) = json_lines(proc)
    leaf_a = {"id": "a2", "type": "message", "children": []}
    label = {"id": "l1", "type": "label", "children": []}
    assert tree == {
        "roots": [
            {
                "id": "u1",
                "type": "message",
                "label": "start",
                "children": [
                    {
                        "id": "a1",
                        "type": "message",
                        "children": [
                            {"id": "u2", "type": "message", "children": [leaf_a]},
                            {"id": "u3", "type": "message", "children": [label]},
                        ],
                    }
                ],
            }
        ]
    }
    # Key order is part of the format: id, type, label, children; compact like JSON.stringify.
    assert proc.stdout.startswith(
        '{"roots":[{"id":"u1","type":"message","label":"start","children":['
    )


def test_context_json_default_leaf(branched: Path) -> None:
    (record,) = json_lines(run("context", branched, "--json"))
    assert list(record) == ["leafId", "messages", "entryIds", "thinkingLevel", "model", "tokens"]
    assert record["leafId"] == "l1"
    assert record["entryIds"] == ["u1", "a1", "u3"]
    assert [m["role"] for m in record["messages"]] == ["user", "assistant", "user"]
    assert record["messages"][2]["content"] == "branch B"
    assert record["thinkingLevel"] == "off"
    assert record["model"] == {"provider": "anthropic", "modelId": "claude-sonnet-4-5"}
    # Usage of a1 (100) plus ceil(len("branch B") / 4) for the message after it.
    assert record["tokens"] == 102


def test_context_leaf_option_and_all_leaves(branched: Path) -> None:
    (record,) = json_lines(run("context", branched, "--leaf", "a2", "--json"))
    assert record["leafId"] == "a2"
    assert record["entryIds"] == ["u1", "a1", "u2", "a2"]
    assert record["tokens"] == 150
    records = json_lines(run("context", branched, "--all-leaves", "--json"))
    # Every entry without children, in file order.
    assert [r["leafId"] for r in records] == ["a2", "l1"]
    assert records[1]["entryIds"] == ["u1", "a1", "u3"]


def test_context_human_output_names_leaf_and_messages(branched: Path) -> None:
    out = run("context", branched).stdout
    assert "leaf l1" in out
    assert "branch B" in out
    assert "\x1b[" not in out  # no colour when not a terminal


def test_compact_dry_run_json(tmp_path: Path) -> None:
    entries: list[dict[str, Any]] = []
    parent = None
    for i in range(6):
        entries.append(user(f"u{i}", parent, 2 * i + 1, "question " + "x" * 400))
        entries.append(
            assistant(f"a{i}", f"u{i}", 2 * i + 2, "answer " + "y" * 400, total=1000 + i)
        )
        parent = f"a{i}"
    path = write_session(tmp_path / "long.jsonl", entries)
    (record,) = json_lines(run("compact", path, "--keep-recent", "150", "--dry-run", "--json"))
    assert record["leafId"] == "a5"
    prep = record["preparation"]
    assert list(prep) == [
        "firstKeptEntryId",
        "isSplitTurn",
        "turnStartEntryId",
        "summarizeEntryIds",
        "turnPrefixEntryIds",
        "tokensBefore",
        "details",
    ]
    # Each turn is ~200 tokens: the budget of 150 is exceeded inside the last turn, so the
    # cut lands on its user message and every earlier turn is summarized.
    assert prep["firstKeptEntryId"] == "u5"
    assert prep["isSplitTurn"] is False
    assert prep["turnStartEntryId"] is None
    assert prep["summarizeEntryIds"] == [e["id"] for e in entries[:10]]
    assert prep["turnPrefixEntryIds"] == []
    assert prep["tokensBefore"] == 1005
    assert prep["details"] == {"readFiles": [], "modifiedFiles": []}
    # Nothing to compact in a tiny session: preparation null.
    small = write_session(tmp_path / "small.jsonl", entries[:1])
    (record,) = json_lines(run("compact", small, "--dry-run", "--json"))
    assert record == {"leafId": "u0", "preparation": None}


def test_compact_requires_dry_run(branched: Path) -> None:
    before = snapshot(branched)
    proc = run("compact", branched, "--json", check_code=2)
    assert "--dry-run" in proc.stderr
    assert snapshot(branched) == before


# ---------------------------------------------------------------------------------------------
# Bad input: clear message, non-zero exit, no traceback


def test_missing_file(tmp_path: Path) -> None:
    proc = run("show", tmp_path / "nope.jsonl", check_code=1)
    assert "no such file" in proc.stderr
    assert proc.stdout == ""


def test_not_a_session_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    path.write_text('{"hello": "world"}\n', encoding="utf-8")
    before = snapshot(path)
    proc = run("context", path, "--json", check_code=1)
    assert "not a valid pi session" in proc.stderr
    assert snapshot(path) == before


def test_empty_file_gets_no_header(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    for command in ("show", "entries", "tree", "context"):
        proc = run(command, path, check_code=1)
        assert "empty" in proc.stderr
    assert path.read_bytes() == b""


def test_header_only_session_has_a_null_leaf(tmp_path: Path) -> None:
    path = write_session(tmp_path / "header.jsonl", [])
    (context,) = json_lines(run("context", path, "--json"))
    assert context == {
        "leafId": None,
        "messages": [],
        "entryIds": [],
        "thinkingLevel": "off",
        "model": None,
        "tokens": 0,
    }
    assert json_lines(run("entries", path, "--json")) == [[]]
    assert json_lines(run("tree", path, "--json")) == [{"roots": []}]
    assert json_lines(run("compact", path, "--dry-run", "--json")) == [
        {"leafId": None, "preparation": None}
    ]
    assert "leaf (none)" in run("show", path).stdout


def test_unknown_leaf_is_an_error(branched: Path) -> None:
    proc = run("context", branched, "--leaf", "zzzzzzzz", "--json", check_code=1)
    assert "zzzzzzzz" in proc.stderr and "not found" in proc.stderr
    assert proc.stdout == ""
    proc = run("compact", branched, "--leaf", "zzzzzzzz", "--dry-run", check_code=1)
    assert "not found" in proc.stderr


def test_leaf_and_all_leaves_are_exclusive(branched: Path) -> None:
    proc = run("context", branched, "--leaf", "a2", "--all-leaves", check_code=2)
    assert "not allowed" in proc.stderr


def test_a_failing_leaf_prints_an_error_record_and_the_rest_goes_on(
    branched: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = cli_commands.context_record

    def flaky(manager: Any, leaf_id: Any) -> dict[str, Any]:
        if leaf_id == "a2":
            raise ValueError("broken leaf")
        return real(manager, leaf_id)

    monkeypatch.setattr(cli, "context_record", flaky)
    code = cli.main(["context", str(branched), "--all-leaves", "--json"])
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    # An unexpected failure names its kind, so a bug is told apart from bad data.
    assert records[0] == {"leafId": "a2", "error": "ValueError: broken leaf"}
    assert records[1]["leafId"] == "l1" and records[1]["entryIds"] == ["u1", "a1", "u3"]
    assert code == 1


def test_all_leaves_reports_a_leaf_that_cannot_be_selected_and_goes_on(tmp_path: Path) -> None:
    # A hand-written entry whose id is an array: it has no children, but nothing can select it.
    odd = user("ignored", "u1", 2, "odd")
    odd["id"] = [1]
    path = write_session(
        tmp_path / "odd.jsonl", [user("u1", None, 1, "hi"), odd, user("u2", "u1", 3, "ok")]
    )
    before = snapshot(path)
    proc = run("context", path, "--all-leaves", "--json", check_code=1)
    records = json_lines(proc)
    assert [r["leafId"] for r in records] == [[1], "u2"]
    assert list(records[0]) == ["leafId", "error"] and "cannot be selected" in records[0]["error"]
    assert records[1]["entryIds"] == ["u1", "u2"]
    proc = run("compact", path, "--all-leaves", "--dry-run", "--json", check_code=1)
    assert [list(r) for r in json_lines(proc)] == [["leafId", "error"], ["leafId", "preparation"]]
    assert snapshot(path) == before


# ---------------------------------------------------------------------------------------------
# show


def test_show_marks_the_active_path(branched: Path) -> None:
    lines = run("show", branched).stdout.splitlines()
    text = "\n".join(lines)
    assert "← leaf" in text
    marked = [line for line in lines if line.lstrip("│├└─ ").startswith("*")]
    marked_ids = [line.lstrip("│├└─ ").split()[1] for line in marked]
    assert marked_ids == ["u1", "a1", "u3", "l1"]
    assert "[start]" in text  # the label shows next to u1
    assert "├─" in text and "└─" in text  # the branch point a1 indents its two children


def test_show_leaf_option_moves_the_marker(branched: Path) -> None:
    lines = run("show", branched, "--leaf", "a2").stdout.splitlines()
    marked = [
        line.lstrip("│├└─ ").split()[1] for line in lines if line.lstrip("│├└─ ").startswith("*")
    ]
    assert marked == ["u1", "a1", "u2", "a2"]


# ---------------------------------------------------------------------------------------------
# Real Pi files: read in place, never modified, ids deterministic


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=lambda p: p.name)
def test_real_files_are_read_in_place_without_modification(fixture: Path) -> None:
    before = snapshot(fixture)
    (records,) = json_lines(run("entries", fixture, "--json"))
    assert len(records) > 1000
    assert records[0]["parentId"] is None
    assert all(r["parentId"] == prev["id"] for prev, r in zip(records, records[1:], strict=False))
    assert "version 1, migrated in memory" in run("show", fixture).stdout
    run("tree", fixture, "--json")
    (context,) = json_lines(run("context", fixture, "--json"))
    assert context["leafId"] == records[-1]["id"]
    assert len(context["messages"]) == len(context["entryIds"]) > 0
    run("compact", fixture, "--dry-run", "--json")
    run("validate", fixture, check_code=None)
    assert snapshot(fixture) == before


@pytest.mark.pi_fixtures
def test_legacy_ids_are_the_same_on_every_run_and_usable_across_commands(tmp_path: Path) -> None:
    fixture = FIXTURE_FILES[0]
    (first,) = json_lines(run("entries", fixture, "--json"))
    (second,) = json_lines(run("entries", fixture, "--json"))
    assert first == second
    # A copy elsewhere gets the same ids: they depend on the content only.
    copy = tmp_path / "copy.jsonl"
    shutil.copyfile(fixture, copy)
    (third,) = json_lines(run("entries", copy, "--json"))
    assert third == first
    middle = first[len(first) // 2]["id"]
    (record,) = json_lines(run("context", fixture, "--leaf", middle, "--json"))
    assert record["leafId"] == middle
    assert record["entryIds"][-1] == middle or middle not in record["entryIds"]


def test_legacy_file_without_final_newline_is_not_repaired(tmp_path: Path) -> None:
    path = tmp_path / "legacy.jsonl"
    lines = [
        {"type": "session", "id": "legacy-1", "timestamp": ts(0), "cwd": "/tmp"},
        {
            "type": "message",
            "timestamp": ts(1),
            "message": {"role": "user", "content": "hi", "timestamp": 1},
        },
        {
            "type": "message",
            "timestamp": ts(2),
            "message": {
                "role": "hookMessage",
                "customType": "x",
                "content": "c",
                "display": True,
                "timestamp": 2,
            },
        },
    ]
    path.write_text("\n".join(dumps(line) for line in lines), encoding="utf-8")
    before = snapshot(path)
    (records,) = json_lines(run("entries", path, "--json"))
    assert [r["parentId"] for r in records] == [None, records[0]["id"]]
    assert all(len(r["id"]) == 8 for r in records)
    (context,) = json_lines(run("context", path, "--json"))
    assert [m["role"] for m in context["messages"]] == ["user", "custom"]
    assert snapshot(path) == before


# ---------------------------------------------------------------------------------------------
# Very deep sessions


def test_ten_thousand_deep_linear_session(tmp_path: Path) -> None:
    depth = 10_500
    entries = []
    parent = None
    for i in range(depth):
        entry_id = f"{i:08x}"
        if i % 2 == 0:
            entries.append(user(entry_id, parent, i, f"q{i}"))
        else:
            entries.append(assistant(entry_id, parent, i, f"a{i}"))
        parent = entry_id
    path = write_session(tmp_path / "deep.jsonl", entries)

    proc = run("tree", path, "--json")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * depth))
    try:
        (tree,) = json_lines(proc)
    finally:
        sys.setrecursionlimit(limit)
    node, seen = tree["roots"][0], 1
    while node["children"]:
        (node,) = node["children"]
        seen += 1
    assert seen == depth and node["id"] == f"{depth - 1:08x}"

    lines = run("show", path).stdout.splitlines()
    assert len(lines) == depth + 2  # title, details, one line per entry without indentation
    assert all(line.startswith("* ") for line in lines[2:])

    (context,) = json_lines(run("context", path, "--json"))
    assert len(context["messages"]) == depth
    assert context["entryIds"][0] == "00000000"
    run("compact", path, "--dry-run", "--json")
    (records,) = json_lines(run("entries", path, "--json"))
    assert len(records) == depth
    run("validate", path)


# ---------------------------------------------------------------------------------------------
# validate


def test_validate_clean_file_exits_zero(branched: Path) -> None:
    proc = run("validate", branched)
    assert "no problems" in proc.stdout
    (report,) = json_lines(run("validate", branched, "--json"))
    assert report["ok"] is True and report["problems"] == []


def test_validate_reports_line_numbers_and_exits_one(tmp_path: Path, branched: Path) -> None:
    lines = branched.read_text(encoding="utf-8").splitlines()
    lines.insert(3, "{not json")  # becomes line 4
    lines.append(dumps(user("u1", "a2", 9, "again")))  # duplicate id, line 9
    path = tmp_path / "broken.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = snapshot(path)
    proc = run("validate", path, check_code=1)
    assert f"{path}:4:" in proc.stdout
    (report,) = json_lines(run("validate", path, "--json", check_code=1))
    by_line = {p["line"]: p for p in report["problems"]}
    assert 4 in by_line and by_line[4]["severity"] == "warning"
    assert any(p["line"] == 9 and p["severity"] == "error" for p in report["problems"])
    assert report["ok"] is False
    assert snapshot(path) == before


def test_validate_allow_warnings(tmp_path: Path, branched: Path) -> None:
    text = branched.read_text(encoding="utf-8")
    path = tmp_path / "nonl.jsonl"
    path.write_text(text.rstrip("\n") + "\n{oops", encoding="utf-8")
    run("validate", path, check_code=1)
    run("validate", path, "--allow-warnings", check_code=0)


def test_validate_not_a_session(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text("5\n", encoding="utf-8")
    proc = run("validate", path, check_code=1)
    assert f"{path}:1:" in proc.stdout
    proc = run("validate", tmp_path / "missing.jsonl", check_code=1)
    assert "no such file" in proc.stderr


# ---------------------------------------------------------------------------------------------
# list


def test_list_directory(tmp_path: Path, branched: Path) -> None:
    sessions = tmp_path / "sessions" / "--home-ana-proj--"
    sessions.mkdir(parents=True)
    shutil.copyfile(branched, sessions / "2025-03-04T05-00-00-000Z_0195f3a2.jsonl")
    (sessions / "junk.jsonl").write_text("not json\n", encoding="utf-8")
    for directory in (sessions, tmp_path / "sessions"):
        records = json_lines(run("list", directory, "--json"))
        assert len(records) == 1
        assert records[0]["cwd"] == "/home/ana/proj"
        assert records[0]["firstMessage"] == "hello"
    out = run("list", sessions).stdout
    assert "hello" in out and "/home/ana/proj" in out
    proc = run("list", tmp_path / "nowhere", check_code=1)
    assert "not a directory" in proc.stderr


# ---------------------------------------------------------------------------------------------
# Agreement with Pi itself
#
# `data/cli_pi_reference/session.jsonl` was written by Pi 1.0.3's SessionManager (system
# message, thinking and model changes, tool calls and results with non-ASCII text, labels set
# and cleared, a replacement and an omission edit, custom message and state, usage, a
# compaction with its checkpoint, a branch summary, a failed assistant, bashExecution, a
# second root). The other files are what Pi 1.0.3 computes for it: the entry list, getTree(),
# and for every leaf the projection's messages, their source entries, the settings and
# estimateProjectedContextTokens(); and prepareCompaction() with keepRecentTokens 100 / 20000.

REFERENCE = Path(__file__).parent / "data" / "cli_pi_reference"


@pytest.mark.parametrize("command", ["entries", "tree"])
def test_json_output_is_byte_identical_to_pi(command: str) -> None:
    proc = run(command, REFERENCE / "session.jsonl", "--json")
    assert proc.stdout == (REFERENCE / f"{command}.json").read_text(encoding="utf-8")


def test_context_of_every_leaf_is_byte_identical_to_pi() -> None:
    proc = run("context", REFERENCE / "session.jsonl", "--all-leaves", "--json")
    expected = (REFERENCE / "context.jsonl").read_text(encoding="utf-8")
    assert proc.stdout.splitlines() == expected.splitlines()
    assert len(expected.splitlines()) == 4


@pytest.mark.parametrize("keep", [100, 20000])
def test_compaction_preview_agrees_with_pi(keep: int) -> None:
    proc = run(
        "compact",
        REFERENCE / "session.jsonl",
        "--all-leaves",
        "--keep-recent",
        str(keep),
        "--dry-run",
        "--json",
    )
    ours = json_lines(proc)
    reference = [
        json.loads(line)
        for line in (REFERENCE / f"compact-keep{keep}.jsonl").read_text().splitlines()
    ]
    assert [r["leafId"] for r in ours] == [r["leafId"] for r in reference]
    for mine, pi in zip(ours, reference, strict=True):
        if pi["preparation"] is None:
            assert mine["preparation"] is None
            continue
        prep, expected = mine["preparation"], pi["preparation"]
        for key in ("firstKeptEntryId", "isSplitTurn", "tokensBefore", "details"):
            assert prep[key] == expected[key], key
        # Pi counts messages; every summarized entry here contributes exactly one.
        assert len(prep["summarizeEntryIds"]) == expected["nSummarize"]
        assert len(prep["turnPrefixEntryIds"]) == expected["nPrefix"]
    if keep == 100:
        assert any(r["preparation"] for r in reference)


@pytest.mark.pi_fixtures
def test_pi_fixtures_are_present():
    # The fixture-driven tests above are parametrised over these files; an empty glob would
    # silently run none of them.
    assert len(FIXTURE_FILES) >= 2
