"""Branched sessions and forks (SPEC 7, 8.8 S91-S96)."""

from __future__ import annotations

import os

import pytest

from explorer.session import jsonfmt
from explorer.session.errors import SessionError
from explorer.session.manager import SessionManager

from .manager_helpers import (
    A,
    Clock,
    U,
    header,
    lines_of,
    msg_entry,
    parsed_lines,
    read_bytes,
    write_lines,
)


def test_s91_create_branched_session_persisted(tmp_path):
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock())
    u1 = m.append_message(U("hello"))
    a1 = m.append_message(A("hi"))
    lab = m.append_label_change(u1, "important")
    u2 = m.append_message(U("more"))
    a2 = m.append_message(A("ok"))
    m.append_message(U("abandoned"))
    old = m.get_session_file()
    old_bytes = read_bytes(old)
    label_ts = m.get_entry(lab)["timestamp"]
    p = m.create_branched_session(a2)
    assert len(lines_of(old)) == 7 and read_bytes(old) == old_bytes
    assert p != old and os.path.dirname(p) == str(tmp_path)
    lines = parsed_lines(p)
    h = lines[0]
    assert list(h) == ["type", "version", "id", "timestamp", "cwd", "parentSession"]
    assert h["parentSession"] == old
    assert [(e["id"], e["parentId"]) for e in lines[1:5]] == [
        (u1, None),
        (a1, u1),
        (u2, a1),
        (a2, u2),
    ]
    new_label = lines[5]
    assert list(new_label) == ["type", "id", "parentId", "timestamp", "targetId", "label"]
    assert new_label["parentId"] == a2 and new_label["timestamp"] == label_ts
    assert new_label["targetId"] == u1 and new_label["label"] == "important"
    assert new_label["id"] not in {u1, a1, u2, a2}
    assert len(lines) == 6
    assert m.get_session_file() == p
    assert m.get_session_id() == h["id"]
    assert m.get_leaf_id() == new_label["id"]
    assert m.get_label(u1) == "important"
    assert [e["message"]["content"] for e in m.get_entries() if e["type"] == "message"][-1] == A(
        "ok"
    )["content"]
    # Later appends go to the new file as single lines.
    m.append_message(U("next"))
    assert len(lines_of(p)) == 7


def test_s92_first_kept_entry_id_remapped_past_a_label():
    m = SessionManager.in_memory("/w", clock=Clock())
    u1 = m.append_message(U("q"))
    lab = m.append_label_change(u1, "x")
    a1 = m.append_message(A("r"))
    m.append_message(U("more"))
    c = m.append_compaction("S", lab, 5)
    before = m.build_session_context().messages
    assert m.create_branched_session(c) is None
    assert m.get_entry(c)["firstKeptEntryId"] == a1
    after = m.build_session_context().messages
    assert [x["role"] for x in after] == ["compactionSummary", "assistant", "user"]
    assert after == before


def test_s93_create_branched_session_in_memory():
    m = SessionManager.in_memory("/w", clock=Clock())
    u = m.append_message(U("q"))
    old_id = m.get_session_id()
    assert m.create_branched_session(u) is None
    assert "parentSession" not in m.get_header()
    assert m.get_session_file() is None
    assert m.get_session_id() != old_id
    with pytest.raises(SessionError) as info:
        m.create_branched_session("nope")
    assert str(info.value) == "Entry nope not found"


def test_s94_branched_session_without_conversation(tmp_path):
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock())
    m.append_message(U("x"))
    m.reset_leaf()
    k = m.append_custom_entry("ext")
    p = m.create_branched_session(k)
    assert not os.path.exists(p)
    m.append_message(U("x"))
    lines = parsed_lines(p)
    assert [e["type"] for e in lines] == ["session", "custom", "message"]
    assert lines[1]["id"] == k and lines[2]["parentId"] == k


def test_branched_compaction_pointing_to_itself_stays_retain_none():
    m = SessionManager.in_memory("/w", clock=Clock())
    m.append_message(U("q"))
    c = m.append_compaction("S", None, 5)
    m.create_branched_session(c)
    assert m.get_entry(c)["firstKeptEntryId"] == c


def test_s95_fork_from_copies_every_branch(tmp_path):
    src_dir = tmp_path / "src"
    m = SessionManager.create("/w/proj", str(src_dir), clock=Clock())
    r = m.append_message(U("r"))
    a = m.append_message(A("a"))
    m.branch(r)
    b = m.append_message(A("b"))
    m.branch(a)
    src = m.get_session_file()
    src_bytes = read_bytes(src)
    d2 = tmp_path / "d2"
    f = SessionManager.fork_from(src, "/other/proj", str(d2), clock=Clock(1_741_070_000_000))
    new_lines = lines_of(f.get_session_file())
    h = jsonfmt.loads(new_lines[0])
    assert list(h) == ["type", "version", "id", "timestamp", "cwd", "parentSession"]
    assert h["version"] == 3 and h["cwd"] == "/other/proj" and h["parentSession"] == src
    assert h["timestamp"] == "2025-03-04T06:33:20.000Z"
    assert new_lines[1:] == lines_of(src)[1:]
    assert f.get_cwd() == "/other/proj"
    assert f.get_leaf_id() == b
    assert read_bytes(src) == src_bytes
    assert os.path.dirname(f.get_session_file()) == str(d2)
    assert [e["parentId"] for e in f.get_entries()] == [None, r, r]
    assert a in f.by_id


def test_fork_from_reserializes_and_does_not_migrate(tmp_path):
    src = tmp_path / "v1.jsonl"
    write_lines(
        src,
        [
            {"type": "session", "id": "s", "timestamp": "t", "cwd": "/w"},
            '{"type":"message", "timestamp":"t","message":{"role":"user","content":"x","timestamp":1.0}}',
        ],
    )
    f = SessionManager.fork_from(str(src), "/w2", str(tmp_path / "out"), {"id": "fork-1"})
    lines = lines_of(f.get_session_file())
    assert (
        lines[1]
        == '{"type":"message","timestamp":"t","message":{"role":"user","content":"x","timestamp":1}}'
    )
    assert f.get_session_id() == "fork-1"
    with pytest.raises(SessionError):
        SessionManager.fork_from(str(src), "/w2", str(tmp_path / "out"), {"id": "bad id"})


def test_s96_fork_from_errors(tmp_path):
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(SessionError) as info:
        SessionManager.fork_from(str(missing), "/x", str(tmp_path / "o"))
    assert str(info.value) == f"Cannot fork: source session file is empty or invalid: {missing}"
    bad = tmp_path / "bad.jsonl"
    write_lines(bad, [msg_entry("e", None, U("x"))])
    with pytest.raises(SessionError) as info:
        SessionManager.fork_from(str(bad), "/x", str(tmp_path / "o"))
    assert str(info.value) == f"Cannot fork: source session file is empty or invalid: {bad}"
    empty = tmp_path / "empty.jsonl"
    write_lines(empty, [])
    with pytest.raises(SessionError):
        SessionManager.fork_from(str(empty), "/x", str(tmp_path / "o"))
    write_lines(bad, [header()])
    assert SessionManager.fork_from(str(bad), "/x", str(tmp_path / "o")).get_entries() == []
