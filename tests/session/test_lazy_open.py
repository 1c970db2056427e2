"""`SessionManager.open` reads version-3 files lazily: every answer equals a full read.

The reference is `SessionManager.load_readonly(path)`, which parses every line in full
(no skeletons). The lazy manager must give the same entries, paths, contexts, projections,
trees, labels and bytes, and must keep most bodies unparsed after open + context.
"""

from __future__ import annotations

import gc
import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from benchmarks.gen_session import generate_session
from explorer.session import gcpause, jsonfmt, loading
from explorer.session.errors import SessionError
from explorer.session.manager import SessionManager
from tests.conftest import pi_fixture_files


def _tree_json(manager: SessionManager) -> list[Any]:
    """The tree as rows in depth-first order (trees here are too deep for recursion)."""
    rows: list[Any] = []
    stack = list(reversed(manager.get_tree()))
    while stack:
        node = stack.pop()
        kids = [child.entry.get("id") for child in node.children]
        rows.append((node.entry, kids, node.label, node.label_timestamp))
        stack.extend(reversed(node.children))
    return rows


def _assert_same(lazy: SessionManager, full: SessionManager) -> None:
    """Every public read of `lazy` equals the full read's (context first, as a page would)."""
    assert lazy.build_session_context() == full.build_session_context()
    assert lazy.build_session_projection() == full.build_session_projection()
    assert lazy.build_context_entries() == full.build_context_entries()
    assert lazy.get_leaf_id() == full.get_leaf_id()
    assert lazy.get_leaf_entry() == full.get_leaf_entry()
    assert lazy.get_branch() == full.get_branch()
    assert lazy.get_labels() == full.get_labels()
    assert lazy.get_session_name() == full.get_session_name()
    assert lazy.get_header() == full.get_header()
    assert lazy.get_entry_count() == full.get_entry_count()
    assert lazy.get_entries() == full.get_entries()
    assert lazy.file_entries == full.file_entries
    assert list(lazy.by_id) == list(full.by_id)
    assert lazy.by_id == full.by_id
    assert _tree_json(lazy) == _tree_json(full)
    assert lazy.to_bytes() == full.to_bytes()
    # One object per entry: the index and the entry list hold the same (full) entries.
    for entry in lazy.file_entries[1:]:
        assert lazy.by_id.get(entry["id"]) is entry or lazy.by_id[entry["id"]] == entry


def _generated(tmp_path: Path, entries: int = 3000, branch_points: int = 20) -> Path:
    path = tmp_path / "generated.jsonl"
    generate_session(path, entries=entries, branch_points=branch_points)
    return path


def test_open_of_a_generated_file_equals_a_full_read(tmp_path: Path) -> None:
    path = _generated(tmp_path)
    before = path.read_bytes()
    lazy = SessionManager.open(str(path))
    full = SessionManager.load_readonly(str(path))
    _assert_same(lazy, full)
    assert path.read_bytes() == before


def test_open_and_context_leave_most_bodies_unparsed(tmp_path: Path) -> None:
    path = _generated(tmp_path)
    manager = SessionManager.open(str(path))
    entries = manager.get_entry_count()
    context = manager.build_session_context()
    # Only the context window (from the latest compaction's kept entry) was parsed.
    assert 0 < len(context.messages) < entries
    assert len(manager._lazy) > entries // 2
    # Public skeleton-free answers: the leaf entry is full (its message has content).
    leaf = manager.get_leaf_entry()
    assert leaf is not None and leaf == SessionManager.load_readonly(str(path)).get_leaf_entry()
    # Wholesale reads adopt every entry, once.
    manager.get_entries()
    assert manager._lazy == {}


def test_leaf_switches_equal_a_full_read(tmp_path: Path) -> None:
    path = _generated(tmp_path, entries=2000, branch_points=30)
    lazy = SessionManager.open(str(path))
    full = SessionManager.load_readonly(str(path))
    parents = {e.get("parentId") for e in full.get_entries()}
    leaves = [e["id"] for e in full.get_entries() if e["id"] not in parents]
    assert len(leaves) > 5
    for leaf in leaves[:15]:
        lazy.branch(leaf)
        full.branch(leaf)
        assert lazy.build_session_context() == full.build_session_context()
        assert lazy.get_entry(leaf) == full.get_entry(leaf)
        assert lazy.get_children(leaf) == full.get_children(leaf) == []
    assert lazy._lazy  # switching leaves parsed paths, not the file


def test_iter_lines_gives_full_entries_and_original_text(tmp_path: Path) -> None:
    path = _generated(tmp_path, entries=500, branch_points=5)
    lazy = SessionManager.open(str(path))
    full = SessionManager.load_readonly(str(path))
    assert list(lazy.iter_lines()) == list(full.iter_lines())
    assert lazy._lazy == {}


def test_appending_after_a_lazy_open_keeps_the_file_and_the_answers(tmp_path: Path) -> None:
    path = _generated(tmp_path, entries=400, branch_points=4)
    before = path.read_bytes()
    manager = SessionManager.open(str(path))
    manager.build_session_context()
    new_id = manager.append_message(
        {"role": "user", "content": "after a lazy open", "timestamp": 1}
    )
    manager.append_label_change(new_id, "mine")
    data = path.read_bytes()
    assert data.startswith(before)
    reopened = SessionManager.open(str(path))
    assert reopened.get_entry(new_id)["message"]["content"] == "after a lazy open"
    assert reopened.get_label(new_id) == "mine"
    _assert_same(reopened, SessionManager.load_readonly(str(path)))
    assert manager.to_bytes() == data


def _header() -> dict[str, Any]:
    return {
        "type": "session",
        "version": 3,
        "id": "0195aaaa-0000-7000-8000-000000000000",
        "timestamp": "2025-01-01T00:00:00.000Z",
        "cwd": "/p",
    }


def _entry(entry_id: str, parent: str | None, **fields: Any) -> dict[str, Any]:
    entry = {"type": "message", "id": entry_id, "parentId": parent}
    entry["timestamp"] = "2025-01-01T00:00:01.000Z"
    entry.update(fields)
    return entry


def _user(text: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, "timestamp": 1}


def _odd_lines() -> list[bytes]:
    """Lines a skeleton must refuse or read exactly: each is kept, skipped or reported as a
    full read does."""
    h = orjson.dumps(_header())
    lines = [h]
    lines.append(orjson.dumps(_entry("a1", None, message=_user("plain"))))
    # Index-like keys in a body: JavaScript order must survive (the full load scans).
    lines.append(
        b'{"type":"message","id":"a2","parentId":"a1","timestamp":"2025-01-01T00:00:02.000Z",'
        b'"message":{"role":"assistant","content":[{"type":"toolCall","id":"t","name":"x",'
        b'"arguments":{"b":1,"10":2,"2":3}}],"timestamp":2}}'
    )
    # A label whose text is an object, an id that is a number, a huge integer.
    lines.append(
        b'{"type":"label","id":"a3","parentId":"a2","timestamp":"2025-01-01T00:00:03.000Z",'
        b'"targetId":"a1","label":{"2":"x","1":"y"}}'
    )
    lines.append(
        b'{"type":"thinking_level_change","id":7,"parentId":"a3",'
        b'"timestamp":"2025-01-01T00:00:04.000Z","thinkingLevel":123456789012345678901234567890}'
    )
    lines.append(
        b'{"type":"compaction","id":"a5","parentId":7,"timestamp":"2025-01-01T00:00:05.000Z",'
        b'"summary":"s","firstKeptEntryId":"a2","tokensBefore":123456789012345678901234567890}'
    )
    # Invalid UTF-8 inside a body, a lone surrogate escape, a blank line, a malformed line.
    lines.append(
        b'{"type":"message","id":"a6","parentId":"a5","timestamp":"2025-01-01T00:00:06.000Z",'
        b'"message":{"role":"user","content":"bad \xff byte","timestamp":6}}'
    )
    lines.append(b"")
    lines.append(b'{"type":"message","id":"a7",')
    lines.append(
        b'{"type":"message","id":"a8","parentId":"a6","timestamp":"2025-01-01T00:00:08.000Z",'
        b'"message":{"role":"user","content":"lone \\ud800 half","timestamp":8}}'
    )
    # A message that is not an object, a non-object line, CRLF ending, a session name.
    lines.append(
        b'{"type":"message","id":"a9","parentId":"a8","timestamp":"2025-01-01T00:00:09.000Z",'
        b'"message":"just text"}'
    )
    lines.append(b"[1, 2]")
    lines.append(
        b'{"type":"session_info","id":"b1","parentId":"a9","timestamp":"2025-01-01T00:00:10.000Z",'
        b'"name":"  named  "}\r'
    )
    lines.append(
        b'{"type":"message","id":"b2","parentId":"b1","timestamp":"2025-01-01T00:00:11.000Z",'
        b'"message":{"role":"assistant","content":[{"type":"text","text":"ok"}],'
        b'"provider":"p","model":"m","usage":{"input":1},"timestamp":11}}'
    )
    return lines


def test_odd_lines_read_lazily_equal_a_full_read(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_bytes(b"\n".join(_odd_lines()) + b"\n")
    before = path.read_bytes()
    lazy = SessionManager.open(str(path))
    full = SessionManager.load_readonly(str(path))
    assert lazy.loaded_file is not None and full.loaded_file is not None
    for name in ("invalid_utf8", "malformed", "falsy", "line_numbers", "line_count"):
        assert getattr(lazy.loaded_file, name) == getattr(full.loaded_file, name), name
    assert lazy.loaded_file.invalid_utf8 == [7]
    assert [n for n, _ in lazy.loaded_file.malformed] == [9]
    assert [n for n, _ in lazy.loaded_file.non_objects] == [12]
    _assert_same(lazy, full)
    arguments = lazy.get_entry("a2")["message"]["content"][0]["arguments"]
    assert list(arguments) == ["2", "10", "b"]
    assert jsonfmt.dumps(lazy.get_entry(7)) == jsonfmt.dumps(full.get_entry(7))
    assert path.read_bytes() == before


def test_refused_lines_are_read_in_full_at_open(tmp_path: Path) -> None:
    """Lines whose kept fields are not scalars (or are out of orjson's range) never become
    skeletons; the rest do."""
    path = tmp_path / "odd.jsonl"
    path.write_bytes(b"\n".join(_odd_lines()) + b"\n")
    manager = SessionManager.open(str(path))
    lazy_ids = {manager._file_entries[p].get("id") for p in manager._lazy.values()}
    assert "a3" not in lazy_ids  # label text is an object
    assert 7 not in lazy_ids  # thinkingLevel beyond 64 bits (a full read gives a float)
    assert "a6" not in lazy_ids  # invalid UTF-8
    assert "a9" not in lazy_ids  # message is a string
    # tokensBefore is not a skeleton field: its huge value is skipped, not refused.
    assert {"a1", "a2", "a5", "b1", "b2"} <= lazy_ids
    # msgspec refuses a lone surrogate escape even in a skipped string: read in full.
    assert "a8" not in lazy_ids
    assert manager.get_entry("a8")["message"]["content"] == "lone \ud800 half"
    assert manager.get_entry("a5")["tokensBefore"] == 1.2345678901234568e29
    assert manager.get_entry(7)["thinkingLevel"] == 1.2345678901234568e29


def test_a_file_rewritten_by_someone_else_is_refused(tmp_path: Path) -> None:
    path = _generated(tmp_path, entries=300, branch_points=3)
    manager = SessionManager.open(str(path))
    lines = path.read_bytes().split(b"\n")
    # Same length lines, other ids: the byte spans now point at other entries.
    swapped = [lines[0], *reversed(lines[1:-1]), lines[-1]]
    path.write_bytes(b"\n".join(swapped))
    with pytest.raises(SessionError, match="changed while open"):
        manager.get_entries()


def test_deferred_open_is_not_lazy(tmp_path: Path) -> None:
    path = _generated(tmp_path, entries=300, branch_points=3)
    manager = SessionManager.open(str(path), defer_bodies_over=64 * 1024)
    assert manager._lazy == {}
    assert manager.deferred_count() == 0  # no line that long in this file


def test_version_1_files_are_read_in_full(tmp_path: Path) -> None:
    path = tmp_path / "v1.jsonl"
    header = {"type": "session", "id": "s", "timestamp": "2025-01-01T00:00:00.000Z", "cwd": "/"}
    message = {"type": "message", "timestamp": "2025-01-01T00:00:01.000Z", "message": _user("hi")}
    path.write_bytes(orjson.dumps(header) + b"\n" + orjson.dumps(message) + b"\n")
    manager = SessionManager.open(str(path))
    assert manager._lazy == {}
    assert [e["message"]["content"] for e in manager.get_entries()] == ["hi"]


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("fixture", [str(p) for p in pi_fixture_files()], ids=os.path.basename)
def test_pi_fixtures_after_migration_reopen_lazily(fixture: str, tmp_path: Path) -> None:
    """Pi's real files are version 1: the first open migrates and rewrites them as version
    3; reopening that file is lazy and must equal a full read of the same bytes."""
    copy = tmp_path / os.path.basename(fixture)
    shutil.copyfile(fixture, copy)
    os.chmod(copy, 0o644)
    SessionManager.open(str(copy))
    lazy = SessionManager.open(str(copy))
    assert lazy._lazy
    _assert_same(lazy, SessionManager.load_readonly(str(copy)))


def test_lazy_skeleton_refuses_what_a_full_read_rejects() -> None:
    for line in (b'{"a":"x\ty"}', b'{"a":01}', b'{"a":[1,]}', b'{"a":NaN}', b"\xef\xbb\xbf{}"):
        assert loading.lazy_skeleton(line) is None
    assert loading.lazy_skeleton(b'{"id":"x","content":[{"k":1}],"message":{"role":"u"}}') == {
        "id": "x",
        "message": {"role": "u"},
    }


def test_a_pause_promotes_what_it_built_without_a_young_collection() -> None:
    if not gc.isenabled():
        pytest.fail("the test suite runs with the collector enabled")
    with gcpause.gc_paused():
        kept = [{"n": [i]} for i in range(20_000)]
        assert not gc.isenabled()
    assert gc.isenabled()
    # Nothing young is left for the next allocation to traverse.
    assert gc.get_count()[0] < 50
    assert gc.get_freeze_count() == 0
    assert len(kept) == 20_000


def test_a_pause_leaves_objects_frozen_by_others_frozen() -> None:
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        with gcpause.gc_paused():
            kept = [[i] for i in range(1000)]
        # Neither thawed (an unfreeze would empty the frozen generation) nor joined by the
        # 1,000 new lists (a freeze of our own). Not an exact count: other threads of the
        # process (the broadcast worker, say) may free a frozen object meanwhile.
        assert frozen - 500 < gc.get_freeze_count() < frozen + 500
        assert len(kept) == 1000
    finally:
        gc.unfreeze()
