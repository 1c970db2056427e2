"""Big shapes: multi-MB lines, very deep routes, very wide branch points, deferred bodies.

Sessions users keep for months reach gigabytes through a few hundred huge lines (tool
outputs, images), tens of thousands of entries on one route and hundreds of branch points.
These tests check that every such shape reads, projects and round-trips exactly, and that a
manager that keeps long lines as skeletons (`defer_bodies_over`) answers every query exactly
as one that parsed everything. Nothing here is timed.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from explorer.session import __main__ as cli
from explorer.session import jsonfmt
from explorer.session import manager as manager_module
from explorer.session.cli_commands import all_leaf_ids, preparation_json
from explorer.session.compaction import prepare_compaction
from explorer.session.loading import load_line, parse_file, skeleton_of
from explorer.session.manager import SessionManager

from .ctx_helpers import AUTO, A, R, U, chain, compaction, custom, edit, msg, thinking
from .manager_helpers import Clock, SeqRng, header, read_bytes, write_lines

MB = 1024 * 1024


def _ts(i: int) -> str:
    return jsonfmt.iso_from_ms(1_735_689_600_000 + i * 1000)


def _stamp(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for i, entry in enumerate(entries):
        entry["timestamp"] = _ts(i)
    return entries


def _big_text(size: int, seed: int) -> str:
    """Tool output of about `size` characters, with non-ASCII lines and JSON escapes."""
    rng = random.Random(seed)
    lines = [
        "├── src/session/manager.ts",
        '  "quoted" \\ back\tslash',
        "✓ passes → 3 ms 🚀",
        "const value = load(path);",
        "plain ascii line of a log output",
    ]
    parts: list[str] = []
    total = 0
    while total < size:
        line = rng.choice(lines)
        parts.append(line)
        total += len(line) + 1
    return "\n".join(parts)


def _image() -> dict[str, Any]:
    return {"type": "image", "data": "iVBORw0KGgo" + "A" * 300_000, "mimeType": "image/png"}


def _mixed_session() -> list[dict[str, Any]]:
    """Header + a branched session whose big lines sit before, inside and after the latest
    compaction's kept range, on the active branch and on a side branch."""
    entries = chain(
        msg("u1", U("first prompt")),
        msg("a1", A("reading")),
        msg("r1", R(_big_text(300_000, 1))),
        thinking("t1", "high"),
        msg(
            "u2",
            {
                "role": "user",
                "content": [{"type": "text", "text": "look"}, _image()],
                "timestamp": 4,
            },
        ),
        msg("a2", A("kept answer")),
        msg("r2", R(_big_text(200_000, 2))),
        compaction("c1", "summary of the start", "u2", 5000),
        msg("u3", U("after the compaction")),
        msg("r3", R(_big_text(150_000, 3))),
        edit("e1", "r3", {"content": [{"type": "text", "text": "(elided)"}]}),
        custom("k1", "state", {"blob": "x" * 100_000}),
        msg("a3", A("tip answer")),
    )
    side = chain(
        msg("s1", U("side question"), parent="a1"),
        msg("s2", R(_big_text(120_000, 4)), parent=AUTO),
    )
    side[0]["parentId"] = "a1"
    labels = [
        {"type": "label", "id": "l1", "parentId": "a3", "targetId": "r1", "label": "big read"},
    ]
    return [header(), *_stamp(entries + side + labels)]


def _write(tmp_path: Path, entries: list[dict[str, Any]], name: str = "s.jsonl") -> Path:
    path = tmp_path / name
    write_lines(path, entries)
    return path


def _eager_and_deferred(
    path: Path, threshold: int = 1_000
) -> tuple[SessionManager, SessionManager]:
    eager = SessionManager.load_readonly(str(path))
    deferred = SessionManager.load_readonly(str(path), defer_bodies_over=threshold)
    return eager, deferred


def _views(manager: SessionManager, leaf: Any) -> dict[str, Any]:
    """Everything a reader of one leaf can ask, in comparable (JSON) form."""
    manager.branch(leaf)
    branch = manager.get_branch()
    return {
        "context": manager.build_session_context().to_json(),
        "projection": manager.build_session_projection().to_json(),
        "contextEntries": manager.build_context_entries(),
        "branch": [manager.full_entry(e) for e in branch],
        "branchIds": [e.get("id") for e in manager.get_branch_skeleton()],
        "leafEntry": manager.get_leaf_entry(),
        "children": manager.get_children(leaf),
        "compaction": preparation_json(prepare_compaction(branch)),
    }


# ---------------------------------------------------------------------------------------------
# Deferred bodies answer exactly like a full read


def test_deferred_manager_answers_every_query_like_a_full_read(tmp_path: Path) -> None:
    path = _write(tmp_path, _mixed_session())
    eager, deferred = _eager_and_deferred(path)
    assert deferred.deferred_count() == 6  # r1, u2, r2, r3, k1 and s2
    assert eager.deferred_count() == 0
    assert deferred.is_deferred(deferred.by_id["r1"])
    assert "content" not in deferred.by_id["r1"]["message"]  # the body stayed in the file
    assert deferred.by_id["r1"]["message"]["toolName"] == "read"  # small fields are kept

    for leaf in all_leaf_ids(eager.get_entries()):
        assert _views(deferred, leaf) == _views(eager, leaf), leaf
    for entry_id in eager.by_id:
        assert deferred.get_entry(entry_id) == eager.get_entry(entry_id)
    assert [n.to_json() for n in deferred.get_tree()] == [n.to_json() for n in eager.get_tree()]
    assert list(deferred.iter_lines()) == list(eager.iter_lines())
    assert deferred.to_bytes() == read_bytes(path) == eager.to_bytes()
    assert deferred.get_labels() == eager.get_labels() == {"r1": "big read"}


def test_deferred_count_is_exactly_the_long_lines(tmp_path: Path) -> None:
    entries = _mixed_session()
    path = _write(tmp_path, entries)
    loaded = parse_file(str(path), keep_raw=False, defer_over=1_000)
    long_ones = [i for i, e in enumerate(entries) if len(jsonfmt.dumps(e).encode()) > 1_000]
    assert list(loaded.deferred) == long_ones
    assert len(long_ones) == 6


def test_full_entries_of_deferred_lines_are_the_parsed_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, _mixed_session())
    _, deferred = _eager_and_deferred(path)
    lines = read_bytes(path).split(b"\n")
    for position, skeleton in enumerate(deferred.file_entries):
        full = deferred.full_entry(skeleton)
        assert full == load_line(lines[position]) == jsonfmt.loads(lines[position])
        # Repeated reads come from the cache: the same object, no second parse.
        assert deferred.full_entry(skeleton) is full


def test_skeleton_keeps_tree_and_settings_fields_only() -> None:
    entry = {
        "type": "message",
        "id": "x",
        "parentId": "p",
        "timestamp": _ts(1),
        "message": {**A("t" * 5000), "content": [{"type": "text", "text": "t" * 5000}]},
        "extra": {"big": "b" * 5000},
    }
    skeleton = skeleton_of(entry)
    message = entry["message"]
    assert skeleton == {
        "type": "message",
        "id": "x",
        "parentId": "p",
        "timestamp": _ts(1),
        "message": {k: v for k, v in message.items() if k != "content"},
    }
    big_label = {"type": "label", "id": "l", "parentId": "x", "targetId": "x", "label": "L" * 4000}
    assert skeleton_of(big_label) == big_label  # tree fields are kept whatever their size


def _lines_with_odd_big_ones() -> list[bytes]:
    """Long lines of every kind the fast skeleton must either match or hand back."""
    big = "x" * 5_000
    good = [
        jsonfmt.dumps(e).encode()
        for e in _stamp(chain(msg("u1", U(big)), msg("a1", A(big)), custom("k1", "s", {"v": big})))
    ]
    odd = [
        # Not valid UTF-8 inside a body: kept with a replacement character.
        b'{"type":"message","id":"b1","parentId":"k1","timestamp":"'
        + _ts(9).encode()
        + b'","message":{"role":"user","content":"\xff'
        + big.encode()
        + b'","timestamp":1}}',
        # Truncated (a crash mid-write): malformed.
        b'{"type":"message","id":"b2","parentId":"b1","message":{"role":"user","content":"'
        + big.encode(),
        # `message` is not an object: kept as it is.
        b'{"type":"message","id":"b3","parentId":"b1","message":"' + big.encode() + b'"}',
        # Numbers orjson refuses (JavaScript reads 1e400 as Infinity).
        b'{"type":"custom","id":"b4","parentId":"b3","customType":"n","data":[1e400,"'
        + big.encode()
        + b'"]}',
        # Duplicate keys: the last one wins, as in JSON.parse.
        b'{"type":"custom","id":"b5","id":"b6","parentId":"b4","customType":"d","data":"'
        + big.encode()
        + b'"}',
        # A lone surrogate escape (JSON.parse keeps it).
        b'{"type":"custom","id":"b7","parentId":"b6","customType":"s","data":"\\ud800'
        + big.encode()
        + b'"}',
        # Integer-like keys (JavaScript puts them first) in the body and in a kept field.
        b'{"type":"message","id":"b8","parentId":"b7","message":{"role":"assistant",'
        b'"usage":{"b":1,"10":2,"2":3},"content":[{"a":1,"7":"' + big.encode() + b'"}]}}',
        # An array, not an entry.
        b'["' + big.encode() + b'"]',
    ]
    return good + odd


def test_fast_skeletons_match_the_full_read(tmp_path: Path) -> None:
    lines = [jsonfmt.dumps(header()).encode(), *_lines_with_odd_big_ones()]
    path = tmp_path / "odd.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    full = parse_file(str(path), keep_raw=False)
    lean = parse_file(str(path), keep_raw=False, defer_over=1_000)
    assert lean.line_numbers == full.line_numbers
    assert lean.malformed == full.malformed and len(full.malformed) == 1
    assert full.invalid_utf8 == [5]
    assert lean.invalid_utf8 == []  # a deferred body is not decoded (validation reads in full)
    assert lean.non_objects == full.non_objects and len(full.non_objects) == 1
    # Deferred: every long entry except the one whose JSON needs the standard-library
    # parser (a lone surrogate), which loads in full as before.
    assert list(lean.deferred) == [1, 2, 3, 4, 5, 6, 7, 9]
    for position, entry in enumerate(full.entries):
        expected = skeleton_of(entry) if position in lean.deferred else entry
        assert lean.entries[position] == expected
    ids = [e.get("id") for e in lean.entries]
    assert ids == [full.entries[0]["id"], "u1", "a1", "k1", "b1", "b3", "b4", "b6", "b7", "b8"]
    assert list(lean.entries[9]["message"]["usage"]) == ["2", "10", "b"]
    eager, deferred = _eager_and_deferred(path)
    for entry_id in eager.by_id:
        assert deferred.get_entry(entry_id) == eager.get_entry(entry_id)
    b8 = deferred.get_entry("b8")
    assert b8 is not None and list(b8["message"]["content"][0]) == ["7", "a"]
    b1 = deferred.get_entry("b1")
    assert b1 is not None and b1["message"]["content"].startswith("\ufffdxxx")
    assert list(deferred.iter_lines()) == list(eager.iter_lines())


def test_legacy_files_are_never_deferred(tmp_path: Path) -> None:
    """A version-1/2 file migrates in memory: its lines do not describe its entries, so
    everything is parsed in full."""
    v2 = {"type": "session", "version": 2, "id": "old", "timestamp": _ts(0), "cwd": "/w"}
    entries = [v2, *_stamp(chain(msg("u1", U("hi")), msg("r1", R(_big_text(50_000, 5)))))]
    path = _write(tmp_path, entries)
    eager, deferred = _eager_and_deferred(path)
    assert deferred.deferred_count() == 0
    assert deferred.build_session_context().to_json() == eager.build_session_context().to_json()


def test_branched_session_from_a_deferred_manager_writes_full_entries(tmp_path: Path) -> None:
    source = _write(tmp_path, _mixed_session())
    written: list[bytes] = []
    for mode, threshold in (("eager", None), ("deferred", 1_000)):
        directory = tmp_path / mode
        manager = SessionManager.open(
            str(source), str(directory), clock=Clock(), rng=SeqRng(), defer_bodies_over=threshold
        )
        assert manager.deferred_count() == (0 if threshold is None else 6)
        new_file = manager.create_branched_session("a3")
        assert new_file is not None and manager.deferred_count() == 0
        written.append(read_bytes(new_file))
    assert written[0] == written[1]
    lines = [jsonfmt.loads(line) for line in written[1].decode().splitlines()]
    r1 = next(e for e in lines if e.get("id") == "r1")
    assert r1["message"]["content"][0]["text"] == _big_text(300_000, 1)


def test_appending_to_a_deferred_file_keeps_its_bytes(tmp_path: Path) -> None:
    path = _write(tmp_path, _mixed_session())
    before = read_bytes(path)
    manager = SessionManager.open(str(path), clock=Clock(), rng=SeqRng(), defer_bodies_over=1_000)
    manager.branch("a3")
    new_id = manager.append_message(U("one more"))
    after = read_bytes(path)
    assert after.startswith(before)
    assert jsonfmt.loads(after[len(before) :].decode())["id"] == new_id
    context = manager.build_session_context()
    assert context.messages[-1]["content"] == "one more"
    reopened = SessionManager.open(str(path))
    assert reopened.build_session_context().to_json() == context.to_json()


# ---------------------------------------------------------------------------------------------
# A 5 MB line


def _five_mb_session() -> list[dict[str, Any]]:
    huge = _big_text(5 * MB, 7)
    entries = chain(
        msg("u1", U("read the log")),
        msg("a1", A("reading")),
        msg("r1", R(huge)),
        msg("a2", A("done")),
    )
    return [header(), *_stamp(entries)]


@pytest.mark.parametrize("threshold", [None, 64 * 1024])
def test_a_five_megabyte_line_round_trips_and_reaches_the_context(
    tmp_path: Path, threshold: int | None
) -> None:
    entries = _five_mb_session()
    path = _write(tmp_path, entries)
    data = read_bytes(path)
    assert max(len(line) for line in data.split(b"\n")) > 5 * MB
    manager = SessionManager.open(str(path), defer_bodies_over=threshold)
    assert manager.deferred_count() == (0 if threshold is None else 1)
    messages = manager.build_session_context().messages
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "assistant"]
    assert messages[2]["content"][0]["text"] == entries[3]["message"]["content"][0]["text"]
    assert manager.to_bytes() == data
    assert read_bytes(path) == data  # opening never touched it


def test_cli_context_of_a_five_megabyte_line(tmp_path: Path) -> None:
    path = _write(tmp_path, _five_mb_session())
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["context", str(path), "--json"]) == 0
    record = json.loads(out.getvalue())
    assert record["messages"][2]["content"][0]["text"] == _big_text(5 * MB, 7)
    assert record["entryIds"] == ["u1", "a1", "r1", "a2"]


# ---------------------------------------------------------------------------------------------
# Command line: deferred and full reads print the same


def _cli(args: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli.main(args)
    return code, out.getvalue()


@pytest.mark.parametrize(
    "args",
    [
        ["show"],
        ["tree", "--json"],
        ["context", "--all-leaves", "--json"],
        ["context", "--all-leaves"],
        ["compact", "--dry-run", "--all-leaves", "--json", "--keep-recent", "10"],
        ["entries", "--json"],
    ],
)
def test_cli_prints_the_same_with_deferred_bodies(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    path = _write(tmp_path, _mixed_session())
    command = [args[0], str(path), *args[1:]]
    monkeypatch.setattr(manager_module, "DEFAULT_DEFER_BYTES", 1_000)
    deferred = _cli(command)
    monkeypatch.setattr(manager_module, "DEFAULT_DEFER_BYTES", None)
    eager = _cli(command)
    assert deferred == eager
    assert deferred[1]  # something was printed


# ---------------------------------------------------------------------------------------------
# A 10,000-deep route


DEPTH = 10_000


def _deep_session() -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for i in range(DEPTH):
        message = U(f"prompt {i}") if i % 2 == 0 else A(f"answer {i}")
        entries.append(msg(f"e{i:05d}", message))
    return [header(), *_stamp(chain(*entries))]


def test_a_ten_thousand_deep_route(tmp_path: Path) -> None:
    path = _write(tmp_path, _deep_session())
    manager = SessionManager.open(str(path), defer_bodies_over=64 * 1024)
    branch = manager.get_branch()
    assert len(branch) == DEPTH
    assert branch[0]["id"] == "e00000" and branch[-1]["id"] == f"e{DEPTH - 1:05d}"
    context = manager.build_session_context()
    assert len(context.messages) == DEPTH
    assert context.messages[-1]["content"][0]["text"] == f"answer {DEPTH - 1}"
    # The tree is one chain 10,000 levels deep: built and serialized without recursion.
    roots = manager.get_tree()
    assert len(roots) == 1
    node, depth = roots[0], 1
    while node.children:
        assert len(node.children) == 1
        node, depth = node.children[0], depth + 1
    assert depth == DEPTH
    tree = roots[0].to_json()
    depth = 1
    while tree["children"]:
        tree, depth = tree["children"][0], depth + 1
    assert depth == DEPTH and tree["entry"]["id"] == f"e{DEPTH - 1:05d}"
    # A leaf switch halfway up is the path to that entry.
    manager.branch("e04999")
    assert len(manager.build_session_context().messages) == 5_000
    assert manager.to_bytes() == read_bytes(path)


def test_cli_tree_and_show_of_a_ten_thousand_deep_route(tmp_path: Path) -> None:
    path = _write(tmp_path, _deep_session())
    code, out = _cli(["tree", str(path), "--json"])
    assert code == 0
    # Too deep for a recursive JSON parser: check the nesting in the text itself.
    assert out.startswith('{"roots":[{"id":"e00000","type":"message","children":[{"id":"e00001"')
    assert out.count('"children":[{') == DEPTH - 1
    assert out.endswith('"children":[]' + "}]" * (DEPTH - 1) + "}]}\n")
    code, out = _cli(["show", str(path)])
    assert code == 0
    assert f"{DEPTH} entries" in out
    assert "answer 9999" in out


# ---------------------------------------------------------------------------------------------
# 1,000 siblings


SIBLINGS = 1_000


def _wide_session(big_every: int = 0) -> list[dict[str, Any]]:
    """A root prompt with 1,000 answers, written in an order unrelated to their timestamps."""
    root = msg("root", U("which way?"), parent=None)
    root["timestamp"] = _ts(0)
    order = list(range(SIBLINGS))
    random.Random(3).shuffle(order)
    children = []
    for position, i in enumerate(order):
        text = f"way {i}" + (" " + "w" * 2_000 if big_every and position % big_every == 0 else "")
        child = msg(f"c{i:04d}", A(text), parent="root")
        child["timestamp"] = _ts(1 + i)
        children.append(child)
    return [header(), root, *children]


@pytest.mark.parametrize("threshold", [None, 1_000])
def test_a_thousand_siblings(tmp_path: Path, threshold: int | None) -> None:
    path = _write(tmp_path, _wide_session(big_every=3))
    manager = SessionManager.load_readonly(str(path), defer_bodies_over=threshold)
    assert (manager.deferred_count() > 300) == (threshold is not None)
    roots = manager.get_tree()
    assert len(roots) == 1 and len(roots[0].children) == SIBLINGS
    # Children are ordered by timestamp, not by file position.
    assert [n.entry["id"] for n in roots[0].children] == [f"c{i:04d}" for i in range(SIBLINGS)]
    assert len(manager.get_children("root")) == SIBLINGS
    leaves = all_leaf_ids(manager.get_entries())
    assert sorted(leaves) == [f"c{i:04d}" for i in range(SIBLINGS)]
    for leaf in leaves:
        manager.branch(leaf)
        messages = manager.build_session_context().messages
        assert messages[0]["content"] == "which way?"
        assert messages[1]["content"][0]["text"].startswith(f"way {int(leaf[1:])}")
        assert len(messages) == 2


def test_cli_context_of_every_sibling(tmp_path: Path) -> None:
    path = _write(tmp_path, _wide_session())
    code, out = _cli(["context", str(path), "--all-leaves", "--json"])
    assert code == 0
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == SIBLINGS
    assert {r["leafId"] for r in records} == {f"c{i:04d}" for i in range(SIBLINGS)}
    assert all(r["entryIds"] == ["root", r["leafId"]] for r in records)


# ---------------------------------------------------------------------------------------------
# The benchmark generator's big shapes


def test_generated_big_shapes_read_the_same_deferred_or_not(tmp_path: Path) -> None:
    from benchmarks.gen_session import BigShapes, generate_session

    shapes = BigShapes(huge_result_rate=0.008, image_rate=0.01, compaction_chars=200_000)
    first = generate_session(tmp_path / "a.jsonl", entries=3_000, branch_points=40, big=shapes)
    second = generate_session(tmp_path / "b.jsonl", entries=3_000, branch_points=40, big=shapes)
    data = read_bytes(first)
    assert data == read_bytes(second)  # deterministic
    lines = data.split(b"\n")[:-1]
    assert len(lines) == 3_001
    entries = [load_line(line) for line in lines]
    assert sum(1 for line in lines if len(line) > 1_000_000) >= 2
    assert any(b'"type":"image"' in line for line in lines)
    kinds = [e["type"] for e in entries]
    assert kinds.count("compaction") >= 2 and kinds.count("branch_summary") >= 1
    parents = [e.get("parentId") for e in entries[1:]]
    assert sum(1 for n in Counter(parents).values() if n > 1) == 40

    eager, deferred = _eager_and_deferred(first, threshold=64 * 1024)
    assert deferred.deferred_count() >= 2
    assert deferred.build_session_context().to_json() == eager.build_session_context().to_json()
    assert deferred.to_bytes() == data


def _default_route_types(entries: list[dict[str, Any]]) -> list[str]:
    """Types along the route of the file's last entry (its default leaf), root first."""
    by_id = {e["id"]: e for e in entries}
    out: list[str] = []
    node: Any = entries[-1]["id"]
    while node is not None:
        out.append(by_id[node]["type"])
        node = by_id[node].get("parentId")
    return out[::-1]


def test_a_lower_compaction_spacing_puts_compactions_on_a_short_route(tmp_path: Path) -> None:
    from benchmarks.bench_pages import SMALL_COMPACT_AFTER
    from benchmarks.gen_session import DEFAULT_COMPACT_AFTER, generate_session

    plain = read_bytes(generate_session(tmp_path / "a.jsonl", 500, 5, 11))
    spelled = generate_session(
        tmp_path / "b.jsonl", 500, 5, 11, compact_after=DEFAULT_COMPACT_AFTER
    )
    assert read_bytes(spelled) == plain  # the default is the spacing files always had
    dense = read_bytes(
        generate_session(tmp_path / "c.jsonl", 500, 5, 11, compact_after=SMALL_COMPACT_AFTER)
    )
    entries = [load_line(line) for line in dense.split(b"\n")[1:-1]]
    assert len(entries) == 500
    before = [load_line(line) for line in plain.split(b"\n")[1:-1]]
    assert "compaction" not in _default_route_types(before)
    # The benchmark's small session: compactions on its default route, as the big one has.
    assert _default_route_types(entries).count("compaction") >= 1
    with pytest.raises(ValueError):
        generate_session(tmp_path / "d.jsonl", 10, 0, 1, compact_after=-1)
