"""SessionManager API: navigation, queries, labels, tree, edits, discovery (SPEC 3, 8.3 S28-S44)."""

from __future__ import annotations

import os
import time

import pytest

from explorer.session import jsonfmt
from explorer.session.errors import SessionError
from explorer.session.manager import SessionManager

from .manager_helpers import (
    SYS,
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


def _persisted(tmp_path):
    return SessionManager.create("/w/proj", str(tmp_path), clock=Clock())


def test_s28_seed_exercise_two_routes_in_one_file(tmp_path):
    m = _persisted(tmp_path)
    r = m.append_message(U("root"))
    a = m.append_message(A("route A"))
    m.branch(r)
    b = m.append_message(U("route B"))
    path = m.get_session_file()
    lines = lines_of(path)
    assert len(lines) == 4
    assert "route A" in read_bytes(path).decode()
    assert jsonfmt.loads(lines[3])["parentId"] == r
    assert m.get_entry(b)["parentId"] == r
    reopened = SessionManager.open(path)
    assert reopened.get_leaf_id() == b
    assert reopened.build_session_context().messages == [U("root"), U("route B")]
    tree = reopened.get_tree()
    assert len(tree) == 1 and tree[0].entry["id"] == r
    assert [c.entry["id"] for c in tree[0].children] == [a, b]


def test_s29_navigation_alone_is_not_persisted(tmp_path):
    m = _persisted(tmp_path)
    r = m.append_message(U("root"))
    a = m.append_message(A("route A"))
    before = read_bytes(m.get_session_file())
    m.branch(r)
    assert m.get_leaf_id() == r
    assert read_bytes(m.get_session_file()) == before  # branch() appends nothing
    reopened = SessionManager.open(m.get_session_file())
    assert reopened.get_leaf_id() == a
    assert reopened.build_session_context().messages == [U("root"), A("route A")]


def test_s30_branch_errors():
    m = SessionManager.in_memory("/w")
    u = m.append_message(U("a"))
    with pytest.raises(SessionError) as info:
        m.branch("nope")
    assert str(info.value) == "Entry nope not found"
    assert m.get_leaf_id() == u


def test_s31_reset_leaf_creates_a_second_root():
    m = SessionManager.in_memory("/w", clock=Clock())
    u1 = m.append_message(U("a"))
    m.append_message(A("b"))
    m.reset_leaf()
    assert m.build_session_context().messages == []
    assert m.get_branch() == []
    u2 = m.append_message(U("c"))
    assert m.get_entry(u2)["parentId"] is None
    assert [n.entry["id"] for n in m.get_tree()] == [u1, u2]
    assert m.build_session_context().messages == [U("c")]


def test_s32_branch_with_summary():
    m = SessionManager.in_memory("/w", clock=Clock())
    u1 = m.append_message(U("q"))
    a1 = m.append_message(A("r"))
    s = m.branch_with_summary(u1, "Tried X")
    entry = m.get_entry(s)
    assert entry["parentId"] == u1 and entry["fromId"] == a1
    assert m.get_leaf_id() == s
    messages = m.build_session_context().messages
    assert messages[0] == U("q")
    assert messages[1]["role"] == "branchSummary" and messages[1]["summary"] == "Tried X"
    assert len(messages) == 2

    fresh = SessionManager.in_memory("/w")
    s2 = fresh.branch_with_summary(None, "S")
    assert fresh.get_entry(s2)["fromId"] == "root"
    assert fresh.get_entry(s2)["parentId"] is None
    with pytest.raises(SessionError) as info:
        fresh.branch_with_summary("nope", "S")
    assert str(info.value) == "Entry nope not found"


def test_s33_labels(tmp_path):
    m = _persisted(tmp_path)
    u1 = m.append_message(U("q"))
    m.append_message(A("r"))
    m.append_label_change(u1, "first")
    l2 = m.append_label_change(u1, "second")
    assert m.get_label(u1) == "second"
    assert m.get_leaf_id() == l2
    node = m.get_tree()[0]
    assert node.entry["id"] == u1
    assert node.label == "second"
    assert node.label_timestamp == m.get_entry(l2)["timestamp"]
    assert node.to_json()["label"] == "second"
    assert m.build_session_context().messages == [U("q"), A("r")]
    m.append_label_change(u1, None)
    assert m.get_label(u1) is None
    assert "label" not in jsonfmt.loads(lines_of(m.get_session_file())[-1])
    assert "label" not in m.get_tree()[0].to_json()
    reopened = SessionManager.open(m.get_session_file())
    assert reopened.get_label(u1) is None
    m.append_label_change(u1, "third")
    assert SessionManager.open(m.get_session_file()).get_label(u1) == "third"


def test_s34_label_target_must_exist():
    m = SessionManager.in_memory("/w")
    with pytest.raises(SessionError) as info:
        m.append_label_change("nope", "x")
    assert str(info.value) == "Entry nope not found"


def test_s35_tree_ordering(tmp_path):
    path = tmp_path / "t.jsonl"
    write_lines(
        path,
        [
            header(),
            msg_entry("r", None, U("r"), "2025-01-01T00:00:01.000Z"),
            msg_entry("c2", "r", U("c2"), "2025-01-01T00:00:05.000Z"),
            msg_entry("c1", "r", U("c1"), "2025-01-01T00:00:03.000Z"),
        ],
    )
    m = SessionManager.open(str(path))
    assert [c.entry["id"] for c in m.get_tree()[0].children] == ["c1", "c2"]
    assert m.get_leaf_id() == "c1"


def test_tree_unparseable_timestamps_go_last_in_file_order():
    entries = [
        header(),
        msg_entry("r", None, U("r")),
        msg_entry("x1", "r", U("x"), "garbage"),
        msg_entry("c2", "r", U("c"), "2025-01-01T00:00:05.000Z"),
        msg_entry("x2", "r", U("x"), "also bad"),
        msg_entry("c1", "r", U("c"), "2025-01-01T00:00:03.000Z"),
        msg_entry("same", "r", U("c"), "2025-01-01T00:00:03.000Z"),
    ]
    m = SessionManager.in_memory("/w", entries=entries)
    assert [c.entry["id"] for c in m.get_tree()[0].children] == ["c1", "same", "c2", "x1", "x2"]


def test_tree_self_parent_and_duplicate_ids():
    entries = [
        header(),
        msg_entry("r", None, U("r")),
        msg_entry("self", "self", U("s")),
        msg_entry("d", "r", U("first d")),
        msg_entry("d", "self", U("second d")),
    ]
    m = SessionManager.in_memory("/w", entries=entries)
    roots = m.get_tree()
    assert [n.entry["id"] for n in roots] == ["r", "self"]
    # One node per id (the last entry's), attached under each duplicate's parent.
    assert roots[0].children[0].entry["message"]["content"] == "second d"
    assert roots[1].children[0] is roots[0].children[0]
    assert m.get_entry_count() == 3
    # get_children walks the index: the surviving "d" hangs under "self", not "r".
    assert m.get_children("r") == []
    assert [e["id"] for e in m.get_children("self")] == ["self", "d"]


def test_s36_orphans():
    entries = [header(), msg_entry("e1", None, U("a")), msg_entry("e2", "missing", U("b"))]
    m = SessionManager.in_memory("/w", entries=entries)
    assert [n.entry["id"] for n in m.get_tree()] == ["e1", "e2"]
    assert [e["id"] for e in m.get_branch("e2")] == ["e2"]
    from explorer.session.context import build_session_context

    assert len(build_session_context(m.get_entries(), "e2").messages) == 1


def test_s37_session_name():
    m = SessionManager.in_memory("/w", clock=Clock())
    i = m.append_session_info("My\r\nName  ")
    assert m.get_entry(i)["name"] == "My Name"
    assert m.get_session_name() == "My Name"
    u = m.append_message(U("a"))
    j = m.append_session_info("  ")
    assert m.get_entry(j)["name"] == ""
    assert m.get_session_name() is None
    m.branch(u)
    m.append_session_info("Other branch")
    m.branch(i)
    assert m.get_session_name() == "Other branch"


def test_s38_context_edit_validation():
    m = SessionManager.in_memory("/w", clock=Clock())
    s1 = m.append_message(SYS("p", ts=1))
    u1 = m.append_message(U("a"))
    a1 = m.append_message(A("b"))
    m.branch(u1)
    m.append_message(U("c"))
    cases = [
        (("nope", None), "Entry nope not found"),
        ((a1, None), f"Entry {a1} is not on the active branch"),
        ((s1, None), f"Entry {s1} does not contribute editable model content"),
        (
            (u1, {"content": 5}),
            "Context edit replacement must be null or contain string/array content",
        ),
        ((u1, "x"), "Context edit replacement must be null or contain string/array content"),
        (
            (u1, {"text": "x"}),
            "Context edit replacement must be null or contain string/array content",
        ),
    ]
    for args, message in cases:
        with pytest.raises(SessionError) as info:
            m.append_context_edit(*args)
        assert str(info.value) == message
    e = m.append_context_edit(u1, {"content": "ok"})
    assert m.get_entry(e)["replacement"] == {"content": "ok"}


def test_context_edit_normalizes_assistant_strings():
    m = SessionManager.in_memory("/w", clock=Clock())
    m.append_message(U("a"))
    a1 = m.append_message(A("b"))
    e = m.append_context_edit(a1, {"content": "short", "extra": 1})
    assert m.get_entry(e)["replacement"] == {"content": [{"type": "text", "text": "short"}]}
    c = m.append_custom_message_entry("t", "x", True)
    e2 = m.append_context_edit(c, {"content": "y", "extra": 1})
    assert m.get_entry(e2)["replacement"] == {"content": "y", "extra": 1}
    m.reset_leaf()
    with pytest.raises(SessionError):
        m.append_context_edit(c, None)


def _write_session(path, cwd, ts="2025-01-01T00:00:00.000Z", session_id="s"):
    write_lines(
        path,
        [header(session_id, cwd, timestamp=ts), msg_entry(f"{session_id}-e", None, U(session_id))],
    )


def test_s39_continue_recent_picks_newest_valid(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    _write_session(d / "old.jsonl", "/w/proj", session_id="old")
    _write_session(d / "new.jsonl", "/w/proj", session_id="new")
    (d / "broken.jsonl").write_text("garbage")
    t = time.time() - 1000
    os.utime(d / "old.jsonl", (t, t))
    os.utime(d / "new.jsonl", (t + 10, t + 10))
    os.utime(d / "broken.jsonl", (t + 20, t + 20))
    m = SessionManager.continue_recent("/w/proj", str(d))
    assert m.get_session_file() == str(d / "new.jsonl")
    assert m.get_leaf_id() == "new-e"
    empty = tmp_path / "empty"
    empty.mkdir()
    fresh = SessionManager.continue_recent("/w/proj", str(empty))
    assert fresh.get_entries() == [] and not os.path.exists(fresh.get_session_file())


def test_s40_continue_recent_cwd_filter(tmp_path, monkeypatch):
    d = tmp_path / "shared"
    d.mkdir()
    _write_session(d / "a.jsonl", "/w/proj", session_id="mine")
    _write_session(d / "b.jsonl", "/other", session_id="theirs")
    t = time.time() - 1000
    os.utime(d / "a.jsonl", (t, t))
    os.utime(d / "b.jsonl", (t + 10, t + 10))
    assert SessionManager.continue_recent("/w/proj", str(d)).get_session_id() == "mine"
    agent = tmp_path / "agent"
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(agent))
    default = agent / "sessions" / "--w-proj--"
    default.mkdir(parents=True)
    _write_session(default / "a.jsonl", "/w/proj", session_id="mine")
    _write_session(default / "b.jsonl", "/other", session_id="theirs")
    os.utime(default / "a.jsonl", (t, t))
    os.utime(default / "b.jsonl", (t + 10, t + 10))
    assert SessionManager.continue_recent("/w/proj").get_session_id() == "theirs"
    assert SessionManager.continue_recent("/w/proj", str(default)).get_session_id() == "theirs"
    assert SessionManager.find_by_id("/w/proj", "theirs") == str(default / "b.jsonl")
    assert SessionManager.find_by_id("/w/proj", "theirs", str(d)) is None
    assert SessionManager.find_by_id("/w/proj", "mine", str(d)) == str(d / "a.jsonl")


def test_s41_list(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    write_lines(
        d / "f1.jsonl",
        [
            header("f1", timestamp="2025-01-01T00:00:00.000Z"),
            msg_entry(
                "u", None, {"role": "user", "content": "fix bug", "timestamp": 1738454400000}
            ),
            {
                "type": "session_info",
                "id": "i",
                "parentId": "u",
                "timestamp": "2025-02-02T00:00:01.000Z",
                "name": "Bugfix",
            },
        ],
    )
    write_lines(d / "f2.jsonl", [header("f2", timestamp="2025-01-15T00:00:00.000Z")])
    (d / "junk.jsonl").write_text('{"type":"message"}\n')
    write_lines(d / "throws.jsonl", [header("t"), {"type": "message", "id": "x", "message": None}])
    infos = SessionManager.list("/w/proj", str(d))
    assert [i.id for i in infos] == ["f1", "f2"]
    f1, f2 = infos
    assert f1.name == "Bugfix" and f1.message_count == 1 and f1.first_message == "fix bug"
    assert f1.modified == 1738454400000
    assert f1.to_json()["modified"] == "2025-02-02T00:00:00.000Z"
    assert f2.first_message == "(no messages)" and f2.message_count == 0
    assert f2.modified == jsonfmt.date_parse("2025-01-15T00:00:00.000Z")
    assert [i.id for i in SessionManager.list_all(str(d))] == ["f1", "f2"]


def test_s42_queries():
    m = SessionManager.in_memory("/w", clock=Clock())
    u1 = m.append_message(U("a"))
    a1 = m.append_message(A("b"))
    m.branch(u1)
    a2 = m.append_message(A("c"))
    assert m.get_branch("nope") == []
    assert m.get_entry("nope") is None
    assert [e["id"] for e in m.get_children(u1)] == [a1, a2]
    assert m.get_entry_count() == 3
    assert [e["id"] for e in m.get_branch(a1)] == [u1, a1]


def test_s43_new_session_on_an_opened_manager(tmp_path):
    m = _persisted(tmp_path)
    m.append_message(U("a"))
    old = m.get_session_file()
    before = read_bytes(old)
    new_path = m.new_session()
    assert new_path == m.get_session_file() != old
    assert os.path.dirname(new_path) == str(tmp_path)
    assert read_bytes(old) == before
    assert m.get_entries() == [] and m.get_leaf_id() is None
    m.append_custom_entry("x")
    assert not os.path.exists(new_path)
    m.append_message(U("b"))
    assert len(lines_of(new_path)) == 3


def test_s44_reopen_leaf_is_last_line_even_if_metadata(tmp_path):
    m = _persisted(tmp_path)
    u1 = m.append_message(U("a"))
    a1 = m.append_message(A("b"))
    lab = m.append_label_change(u1, "x")
    reopened = SessionManager.open(m.get_session_file())
    assert reopened.get_leaf_id() == lab
    assert [e["id"] for e in reopened.get_branch()] == [u1, a1, lab]


def test_cycle_stops_the_walk():
    entries = [header(), msg_entry("a", "b", U("a")), msg_entry("b", "a", U("b"))]
    m = SessionManager.in_memory("/w", entries=entries)
    assert [e["id"] for e in m.get_branch()] == ["a", "b"]
    assert m.get_tree() == []


def test_append_compaction_stores_system_checkpoint():
    m = SessionManager.in_memory("/w", clock=Clock(1_741_068_000_000, 0))
    m.append_message(SYS("base", {"a": "1"}, ts=10))
    u = m.append_message(U("q"))
    m.append_message(SYS("", {"a": "2"}, ts=20))
    c = m.append_compaction("S", u, 5, {"readFiles": [], "modifiedFiles": []}, False)
    entry = m.get_entry(c)
    assert entry["systemMessage"] == {
        "role": "system",
        "content": "base",
        "sections": {"a": "2"},
        "timestamp": 1_741_068_000_000,
    }
    assert list(entry)[-1] == "systemMessage"
    messages = m.build_session_context().messages
    assert messages[0] == entry["systemMessage"]
    assert messages[1]["role"] == "compactionSummary"
    assert messages[2] == U("q")
    # No system messages with a timestamp and no tools: no checkpoint.
    m2 = SessionManager.in_memory("/w")
    m2.append_message(SYS("base", {"a": "x"}))
    u2 = m2.append_message(U("q"))
    assert "systemMessage" not in m2.get_entry(m2.append_compaction("S", u2, 1))


def test_storage_protocol_round_trip(tmp_path):
    from explorer.session.storage import FileStorage, SessionStorage

    class MemoryStorage:
        def __init__(self):
            self.path = None
            self.data = None
            self.calls = []

        def exists(self):
            return self.data is not None

        def read_bytes(self):
            return self.data

        def create_exclusive(self, data):
            if self.data is not None:
                raise FileExistsError("exists")
            self.calls.append("create")
            self.data = data

        def append(self, data):
            self.calls.append("append")
            self.data += data

        def rewrite(self, data):
            self.calls.append("rewrite")
            self.data = data

    store = MemoryStorage()
    assert isinstance(store, SessionStorage) and isinstance(FileStorage("x"), SessionStorage)
    m = SessionManager.from_storage(store, cwd="/w", clock=Clock())
    m.append_model_change("p", "m")
    assert store.data is None
    u = m.append_message(U("a"))
    m.append_message(A("b"))
    assert store.calls == ["create", "append"]
    reopened = SessionManager.from_storage(store)
    assert reopened.get_cwd() == "/w"
    assert reopened.get_branch()[1]["id"] == u
    assert reopened.to_bytes() == store.data
    reopened.append_message(U("c"))
    assert store.data.count(b"\n") == 5 and store.calls[-1] == "append"


def test_open_migrated_fixture_like_file_is_rewritten_once(tmp_path):
    path = tmp_path / "v1.jsonl"
    write_lines(
        path,
        [
            {"type": "session", "id": "s", "timestamp": "t", "cwd": "/w"},
            {"type": "message", "timestamp": "t", "message": U("a")},
        ],
    )
    m = SessionManager.open(str(path))
    first = read_bytes(path)
    assert parsed_lines(path)[1]["id"] == m.get_leaf_id()
    SessionManager.open(str(path))
    assert read_bytes(path) == first
