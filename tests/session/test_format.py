"""File format: header, lazy creation, ids, key order, JSON form (SPEC 1.1-1.5, 8.1 S01-S12, S22)."""

from __future__ import annotations

import os
import re

import pytest

from explorer.session import jsonfmt
from explorer.session.entries import (
    branch_summary_entry,
    compaction_entry,
    context_edit_entry,
    custom_entry,
    custom_message_entry,
    label_entry,
    message_entry,
    model_change_entry,
    session_header,
    session_info_entry,
    thinking_level_change_entry,
    usage_entry,
)
from explorer.session.errors import SessionError
from explorer.session.ids import (
    SESSION_ID_ERROR,
    deterministic_rng,
    generate_entry_id,
    uuid4,
    uuid7,
    validate_session_id,
)
from explorer.session.loading import parse_session_entries
from explorer.session.manager import SessionManager
from explorer.session.paths import file_timestamp, get_default_session_dir, resolve_path

from .manager_helpers import SYS, A, Clock, R, SeqRng, U, Z, lines_of, parsed_lines, read_bytes

UUID7_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_s01_header_of_a_new_session(tmp_path):
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock())
    path = m.get_session_file()
    header = m.get_header()
    assert os.path.dirname(path) == str(tmp_path)
    assert os.path.basename(path) == f"{file_timestamp(header['timestamp'])}_{header['id']}.jsonl"
    assert not os.path.exists(path)
    assert list(header) == ["type", "version", "id", "timestamp", "cwd"]
    assert header["version"] == 3
    assert header["cwd"] == "/w/proj"
    assert UUID7_RE.match(header["id"])
    assert m.get_leaf_id() is None
    assert m.build_session_context().to_json() == {
        "messages": [],
        "thinkingLevel": "off",
        "model": None,
    }


def test_s02_lazy_creation_flushes_everything_at_once(tmp_path):
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock())
    path = m.get_session_file()
    mc = m.append_model_change("test", "m1")
    tl = m.append_thinking_level_change("high")
    assert not os.path.exists(path)
    u = m.append_message(U("hi"))
    lines = parsed_lines(path)
    assert [e["type"] for e in lines] == [
        "session",
        "model_change",
        "thinking_level_change",
        "message",
    ]
    assert [e.get("id") for e in lines[1:]] == [mc, tl, u]
    assert lines[1]["parentId"] is None
    assert lines[2]["parentId"] == mc
    assert lines[3]["parentId"] == tl


def test_s03_appends_after_first_flush_are_single_lines(tmp_path):
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock())
    m.append_model_change("test", "m1")
    m.append_thinking_level_change("high")
    u = m.append_message(U("hi"))
    before = read_bytes(m.get_session_file())
    c = m.append_custom_entry("ext", {"n": 1})
    after = read_bytes(m.get_session_file())
    assert after.startswith(before)
    lines = lines_of(m.get_session_file())
    assert len(lines) == 5
    last = jsonfmt.loads(lines[-1])
    assert list(last) == ["type", "customType", "data", "id", "parentId", "timestamp"]
    assert last["parentId"] == u
    assert last["id"] == c
    assert last["data"] == {"n": 1}


def test_s04_non_conversation_roles_do_not_create_the_file(tmp_path):
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock())
    path = m.get_session_file()
    first = m.append_message(SYS("", {"p": "x"}, ts=1))
    m.append_message(R("r"))
    m.append_custom_message_entry("m", "c", True)
    m.append_custom_entry("e")
    m.append_label_change(first, "l")
    assert not os.path.exists(path)
    m.append_message(A("a"))
    assert len(lines_of(path)) == 7


def test_s05_exclusive_create(tmp_path):
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock())
    path = m.get_session_file()
    with open(path, "w") as fh:
        fh.write("x")
    with pytest.raises(FileExistsError):
        m.append_message(U("hi"))
    assert read_bytes(path).decode() == "x"
    # Pi 1.6.0: the entry that was not written is not kept in memory (docs/spec-pi-1.6.md P07).
    assert m.get_leaf_entry() is None and m.get_entries() == []
    # Every later append retries the exclusive create and fails the same way.
    with pytest.raises(FileExistsError):
        m.append_message(U("again"))
    assert read_bytes(path).decode() == "x"


def test_s06_entry_ids_and_collisions():
    rng = SeqRng(["aaaaaaaa", "aaaaaaaa", "bbbbbbbb"])
    m = SessionManager.in_memory("/w/proj", rng=rng, clock=Clock())
    first = m.append_message(U("a"))
    second = m.append_message(U("b"))
    assert (first, second) == ("aaaaaaaa", "bbbbbbbb")

    m2 = SessionManager.in_memory("/w/proj", rng=SeqRng(["aaaaaaaa"] * 200), clock=Clock())
    assert m2.append_message(U("a")) == "aaaaaaaa"
    full = m2.append_message(U("b"))
    assert len(full) == 36
    assert full.startswith("aaaaaaaa-")
    assert re.match(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", full)


def test_generate_entry_id_uses_known_set():
    rng = SeqRng(["01234567", "89abcdef"])
    assert generate_entry_id({"01234567"}, rng) == "89abcdef"


def test_uuid_shapes_and_determinism():
    assert re.match(r"^[0-9a-f]{8}-[0-9a-f]{4}-4", uuid4())
    u = uuid7(1_741_064_767_089, deterministic_rng(b"t"))
    assert UUID7_RE.match(u)
    assert int(u[:8] + u[9:13], 16) == 1_741_064_767_089
    a = uuid7(5, deterministic_rng(b"x"))
    b = uuid7(5, deterministic_rng(b"x"))
    assert a == b and UUID7_RE.match(a)
    # Default source: monotonic within the process even when the clock goes back.
    ids = [uuid7(10_000) for _ in range(50)] + [uuid7(9_000)]
    assert ids == sorted(ids)


def test_s07_timestamps_and_file_name(tmp_path):
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock(1_741_064_767_089))
    assert m.get_header()["timestamp"] == "2025-03-04T05:06:07.089Z"
    assert os.path.basename(m.get_session_file()).startswith("2025-03-04T05-06-07-089Z_")


def test_s08_omitted_optional_keys():
    m = SessionManager.in_memory("/w/proj", clock=Clock())
    u1 = m.append_message(U("a"))
    m.append_label_change(u1, None)
    m.append_compaction("S", u1, 5)
    m.append_custom_entry("ext")
    e = m.append_usage("cache_warm", "p", "m", Z, "")
    lines = [jsonfmt.loads(line) for _, line in m.iter_lines()][2:]
    assert list(lines[0]) == ["type", "id", "parentId", "timestamp", "targetId"]
    assert list(lines[1]) == [
        "type",
        "id",
        "parentId",
        "timestamp",
        "summary",
        "firstKeptEntryId",
        "tokensBefore",
    ]
    assert list(lines[2]) == ["type", "customType", "id", "parentId", "timestamp"]
    assert list(lines[3]) == [
        "type",
        "id",
        "parentId",
        "timestamp",
        "kind",
        "provider",
        "model",
        "usage",
    ]
    assert isinstance(e, dict) and e["type"] == "usage"
    m.append_label_change(u1, "keep")
    assert m.get_label(u1) == "keep"
    m.append_label_change(u1, "")
    assert '"label":""' in list(m.iter_lines())[-1][1]
    assert m.get_label(u1) is None


def test_s09_javascript_number_format(tmp_path):
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock())
    m.append_message(U("x"))
    usage = jsonfmt.loads(jsonfmt.dumps(Z))
    usage["cost"]["cacheRead"] = 0.000015
    usage["cost"]["total"] = 3.0
    usage["input"] = 1e21
    m.append_usage("k", "p", "m", usage)
    line = lines_of(m.get_session_file())[-1]
    assert '"cacheRead":0.000015' in line
    assert '"total":3' in line and '"total":3.0' not in line
    assert '"input":1e+21' in line


def test_s10_raw_u2028_survives(tmp_path):
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock())
    m.append_message(U("a\u2028b\rc"))
    path = m.get_session_file()
    raw = read_bytes(path).decode("utf-8")
    assert "\u2028" in raw
    assert "b\\rc" in raw
    assert len(lines_of(path)) == 2
    reopened = SessionManager.open(path)
    assert reopened.get_leaf_entry()["message"]["content"] == "a\u2028b\rc"


def test_s11_custom_session_ids():
    m = SessionManager.in_memory("/w/proj", clock=Clock())
    m.new_session({"id": "my.session-1"})
    assert m.get_header()["id"] == "my.session-1"
    assert m.get_session_id() == "my.session-1"
    for bad in ["-bad", "bad.", "", "a b"]:
        with pytest.raises(SessionError) as info:
            m.new_session({"id": bad})
        assert str(info.value) == SESSION_ID_ERROR
    assert validate_session_id("a") == "a"


def test_s12_directory_encoding(tmp_path):
    agent = str(tmp_path / "agent")
    d = get_default_session_dir("/home/ana/proj", agent)
    assert d == f"{agent}/sessions/--home-ana-proj--"
    assert os.path.isdir(d)
    assert get_default_session_dir("/srv/a:b/c", agent).endswith("/--srv-a-b-c--")
    assert get_default_session_dir("/", agent).endswith("/----")


def test_path_resolution(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    home = os.path.expanduser("~")
    assert resolve_path("~") == home
    assert resolve_path("~/a/../b") == f"{home}/b"
    assert resolve_path("rel/./x/") == f"{tmp_path}/rel/x"
    assert resolve_path("//a//b/") == "/a/b"
    assert resolve_path("file:///tmp/a%20b") == "/tmp/a b"


def test_agent_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PI_CODING_AGENT_DIR", str(tmp_path / "ag"))
    m = SessionManager.create("/w/proj", clock=Clock())
    assert m.get_session_dir() == f"{tmp_path}/ag/sessions/--w-proj--"
    assert m.uses_default_session_dir()


def test_s22_parse_session_entries():
    text = '\n{"type":"session","id":"s"}\nbad\n{"type":"x"}\n\n'
    assert parse_session_entries(text) == [{"type": "session", "id": "s"}, {"type": "x"}]
    assert parse_session_entries('{"type":"x"}\nnull\n0') == [{"type": "x"}, None, 0]


def test_entry_builders_key_order():
    assert list(session_header("s", "t", "/c", "/p")) == [
        "type",
        "version",
        "id",
        "timestamp",
        "cwd",
        "parentSession",
    ]
    assert list(message_entry("i", None, "t", {})) == [
        "type",
        "id",
        "parentId",
        "timestamp",
        "message",
    ]
    assert list(thinking_level_change_entry("i", None, "t", "high"))[-1] == "thinkingLevel"
    assert list(model_change_entry("i", None, "t", "p", "m"))[-2:] == ["provider", "modelId"]
    assert list(usage_entry("i", None, "t", "k", "p", "m", Z, "n"))[-1] == "note"
    assert list(
        compaction_entry("i", None, "t", "S", "k", 1, {}, Z, False, {"role": "system"})
    ) == [
        "type",
        "id",
        "parentId",
        "timestamp",
        "summary",
        "firstKeptEntryId",
        "tokensBefore",
        "details",
        "usage",
        "fromHook",
        "systemMessage",
    ]
    assert list(branch_summary_entry("i", None, "t", "root", "S", {}, Z, True)) == [
        "type",
        "id",
        "parentId",
        "timestamp",
        "fromId",
        "summary",
        "details",
        "usage",
        "fromHook",
    ]
    assert list(custom_entry("c", {"a": 1}, "i", None, "t")) == [
        "type",
        "customType",
        "data",
        "id",
        "parentId",
        "timestamp",
    ]
    assert list(custom_message_entry("c", "x", False, {"d": 1}, "i", None, "t")) == [
        "type",
        "customType",
        "content",
        "display",
        "details",
        "id",
        "parentId",
        "timestamp",
    ]
    assert list(context_edit_entry("i", None, "t", "x", None)) == [
        "type",
        "id",
        "parentId",
        "timestamp",
        "targetId",
        "replacement",
    ]
    assert list(label_entry("i", None, "t", "x", "l"))[-2:] == ["targetId", "label"]
    assert list(session_info_entry("i", None, "t", ""))[-1] == "name"


def test_all_append_methods_write_spec_key_order(tmp_path):
    m = SessionManager.create("/w/proj", str(tmp_path), clock=Clock())
    u = m.append_message(U("hi"))
    m.append_compaction("S", None, float("nan"), {"readFiles": []}, False, Z)
    m.branch_with_summary(u, "B", {"x": 1}, True, Z)
    m.append_custom_message_entry("m", [{"type": "text", "text": "c"}], False, {"d": 1})
    m.append_session_info("name")
    m.append_context_edit(u, None)
    lines = parsed_lines(m.get_session_file())
    comp = lines[2]
    assert comp["firstKeptEntryId"] == comp["id"]  # retain-none
    assert comp["tokensBefore"] is None  # NaN serializes as null
    assert comp["fromHook"] is False
    assert list(comp)[-3:] == ["details", "usage", "fromHook"]
    assert lines[3]["parentId"] == u and lines[3]["fromId"] == comp["id"]
    assert list(lines[4])[:5] == ["type", "customType", "content", "display", "details"]
    assert lines[6] == {**lines[6], "targetId": u, "replacement": None}
