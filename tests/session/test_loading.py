"""Loading, tolerance, repair and migration (SPEC 1.6-1.7, 3.3; scenarios S13-S21)."""

from __future__ import annotations

import os

import pytest

from explorer.session import jsonfmt
from explorer.session.entries import migrate_session_entries
from explorer.session.errors import SessionError
from explorer.session.loading import (
    HEADER_SCAN_LIMIT,
    HeaderScanLimitError,
    discover_header,
    load_entries_from_file,
    parse_bytes,
    read_session_header,
)
from explorer.session.manager import SessionManager

from .manager_helpers import (
    A,
    Clock,
    SeqRng,
    U,
    header,
    lines_of,
    msg_entry,
    read_bytes,
    write_lines,
)

S13_INPUT = [
    '{"type":"session","id":"sess-1","timestamp":"2024-01-01T00:00:00.000Z","cwd":"/w"}',
    '{"type":"message","timestamp":"2024-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1}}',
    '{"type":"message","timestamp":"2024-01-01T00:00:02.000Z","message":{"role":"hookMessage","customType":"note","content":"n","display":true,"timestamp":2}}',
    '{"type":"compaction","timestamp":"2024-01-01T00:00:03.000Z","summary":"S","firstKeptEntryIndex":2,"tokensBefore":10}',
]
S13_OUTPUT = [
    '{"type":"session","id":"sess-1","timestamp":"2024-01-01T00:00:00.000Z","cwd":"/w","version":3}',
    '{"type":"message","timestamp":"2024-01-01T00:00:01.000Z","message":{"role":"user","content":"hi","timestamp":1},"id":"11111111","parentId":null}',
    '{"type":"message","timestamp":"2024-01-01T00:00:02.000Z","message":{"role":"custom","customType":"note","content":"n","display":true,"timestamp":2},"id":"22222222","parentId":"11111111"}',
    '{"type":"compaction","timestamp":"2024-01-01T00:00:03.000Z","summary":"S","tokensBefore":10,"id":"33333333","parentId":"22222222","firstKeptEntryId":"22222222"}',
]


def test_s13_migration_v1_to_v3(tmp_path):
    path = tmp_path / "v1.jsonl"
    write_lines(path, S13_INPUT)
    m = SessionManager.open(
        str(path), rng=SeqRng(["11111111", "22222222", "33333333"]), clock=Clock()
    )
    assert lines_of(path) == S13_OUTPUT
    assert m.get_leaf_id() == "33333333"
    messages = m.build_session_context().messages
    assert [msg["role"] for msg in messages] == ["compactionSummary", "custom"]
    assert messages[0]["summary"] == "S"
    from explorer.session.messages import convert_to_llm

    llm = convert_to_llm(messages)
    assert len(llm) == 2 and all(x["role"] == "user" for x in llm)
    assert llm[0]["content"][0]["text"].endswith("<summary>\nS\n</summary>")
    assert llm[1]["content"] == [{"type": "text", "text": "n"}]


def test_s14_migration_v2_to_v3_keeps_key_positions(tmp_path):
    path = tmp_path / "v2.jsonl"
    write_lines(
        path,
        [
            '{"type":"session","version":2,"id":"s","timestamp":"2024-01-01T00:00:00.000Z","cwd":"/w"}',
            '{"type":"message","id":"m1","parentId":null,"timestamp":"2024-01-01T00:00:01.000Z","message":{"role":"hookMessage","customType":"n","content":"x","display":true,"timestamp":1}}',
        ],
    )
    m = SessionManager.open(str(path))
    lines = lines_of(path)
    assert (
        lines[0]
        == '{"type":"session","version":3,"id":"s","timestamp":"2024-01-01T00:00:00.000Z","cwd":"/w"}'
    )
    assert jsonfmt.loads(lines[1])["message"]["role"] == "custom"
    assert m.get_leaf_id() == "m1"


def test_migration_index_edge_cases():
    entries = [
        {"type": "session", "id": "s"},
        {"type": "compaction", "summary": "a", "firstKeptEntryIndex": 0},
        {"type": "compaction", "summary": "b", "firstKeptEntryIndex": 3},  # after itself: no id yet
        {"type": "message", "message": {"role": "user", "content": "x"}},
        {"type": "compaction", "summary": "c", "firstKeptEntryIndex": 1.5},
        {"type": "compaction", "summary": "d", "firstKeptEntryIndex": "1"},
        {"type": "compaction", "summary": "e", "firstKeptEntryIndex": 6},  # itself
    ]
    assert migrate_session_entries(entries, SeqRng()) is True
    assert entries[0]["version"] == 3
    for e in entries[1:3] + entries[4:5]:
        assert "firstKeptEntryId" not in e and "firstKeptEntryIndex" not in e
    assert entries[5]["firstKeptEntryIndex"] == "1"  # not a number: untouched
    assert entries[6]["firstKeptEntryId"] == entries[6]["id"]
    assert entries[3]["parentId"] == entries[2]["id"]
    assert migrate_session_entries(entries) is False  # idempotent


def test_migrate_list_without_header_counts_as_v1():
    entries = [{"type": "message", "id": "old", "parentId": "x"}]
    assert migrate_session_entries(entries, SeqRng(["abcdef01"])) is True
    assert entries[0]["id"] == "abcdef01" and entries[0]["parentId"] is None


def test_s15_no_rewrite_for_current_files(tmp_path):
    path = tmp_path / "v3.jsonl"
    data = write_lines(
        path,
        [
            header(),
            msg_entry("e1", None, U("hi")),
            '{"type":"weird" , "id":"w1","parentId":"e1","timestamp":"t","x":1.0}',
        ],
    )
    m = SessionManager.open(str(path))
    assert read_bytes(path) == data
    assert m.to_bytes() == data
    assert m.get_leaf_id() == "w1"


def test_s16_malformed_lines_are_skipped(tmp_path):
    path = tmp_path / "m.jsonl"
    data = write_lines(
        path,
        [
            header(),
            msg_entry("e1", None, U("a")),
            "not json",
            "",
            "   ",
            msg_entry("e2", "e1", A("b")),
        ],
    )
    m = SessionManager.open(str(path))
    assert [e["id"] for e in m.get_entries()] == ["e1", "e2"]
    assert m.get_leaf_id() == "e2"
    assert read_bytes(path) == data
    assert m.loaded_file.malformed[0][0] == 3


def test_s17_garbage_before_the_header(tmp_path):
    path = tmp_path / "g.jsonl"
    write_lines(path, ["garbage{", header(), msg_entry("e1", None, U("a"))])
    m = SessionManager.open(str(path))
    assert m.get_header()["id"] == "s1"
    assert [e["id"] for e in m.get_entries()] == ["e1"]
    assert discover_header(str(path))["id"] == "s1"


@pytest.mark.parametrize(
    "content",
    [
        [msg_entry("e1", None, U("a"))],
        [{"type": "session", "id": 5, "timestamp": "t", "cwd": "/w"}],
        ["5", header()],
        ['"text"', header()],
        ["[1]", header()],
        ["true", header()],
    ],
)
def test_s18_invalid_non_empty_file(tmp_path, content):
    path = tmp_path / "bad.jsonl"
    data = write_lines(path, content)
    with pytest.raises(SessionError) as info:
        SessionManager.open(str(path))
    assert str(info.value) == f"Session file is not a valid pi session: {path}"
    assert read_bytes(path) == data
    assert load_entries_from_file(str(path)) == []


def test_falsy_values_before_header_are_harmless(tmp_path):
    path = tmp_path / "f.jsonl"
    write_lines(
        path,
        ["null", "0", "false", '""', header(), "null", msg_entry("e1", None, U("a")), "7", "[2]"],
    )
    m = SessionManager.open(str(path))
    assert [e["id"] for e in m.get_entries()] == ["e1"]
    assert m.get_leaf_id() == "e1"  # the stray 7 and [2] are dropped, not made the leaf
    assert [n for n, _ in m.loaded_file.non_objects] == [8, 9]


def test_s19_empty_file(tmp_path):
    path = tmp_path / "named.jsonl"
    path.write_bytes(b"")
    m = SessionManager.open(str(path), clock=Clock())
    lines = lines_of(path)
    assert len(lines) == 1
    h = jsonfmt.loads(lines[0])
    assert h["type"] == "session" and h["version"] == 3 and h["id"] == m.get_session_id()
    assert m.get_session_file() == str(path)
    m.append_custom_entry("x")
    assert len(lines_of(path)) == 2


def test_s20_trailing_newline_repair(tmp_path):
    path = tmp_path / "t.jsonl"
    data = write_lines(path, [header(), msg_entry("e1", None, U("a"))])[:-1]
    path.write_bytes(data)
    m = SessionManager.open(str(path), clock=Clock())
    assert read_bytes(path) == data + b"\n"
    m.append_message(U("b"))
    lines = lines_of(path)
    assert len(lines) == 3
    assert jsonfmt.loads(lines[2])["parentId"] == "e1"


def test_newline_repair_also_after_malformed_tail(tmp_path):
    path = tmp_path / "t.jsonl"
    data = write_lines(path, [header()]) + b"{broken"
    path.write_bytes(data)
    SessionManager.open(str(path))
    assert read_bytes(path) == data + b"\n"


def test_s21_opening_a_path_that_does_not_exist(tmp_path):
    path = tmp_path / "new.jsonl"
    m = SessionManager.open(str(path), clock=Clock())
    assert m.get_session_file() == str(path)
    m.append_model_change("p", "m")
    assert not path.exists()
    m.append_message(U("x"))
    assert path.exists() and len(lines_of(path)) == 3
    assert os.listdir(tmp_path) == ["new.jsonl"]


def test_open_uses_header_cwd_and_override(tmp_path):
    path = tmp_path / "c.jsonl"
    write_lines(path, [header(cwd="/somewhere/else"), msg_entry("e1", None, U("a"))])
    assert SessionManager.open(str(path)).get_cwd() == "/somewhere/else"
    assert SessionManager.open(str(path), cwd_override="/x").get_cwd() == "/x"
    assert SessionManager.open(str(path)).get_session_dir() == str(tmp_path)


def test_invalid_utf8_and_bom_and_crlf(tmp_path):
    path = tmp_path / "u.jsonl"
    good = jsonfmt.dumps(msg_entry("e1", None, U("caf\u00e9"))).encode()
    bad_utf8 = jsonfmt.dumps(msg_entry("e2", "e1", U("X"))).encode().replace(b"X", b"\xff\xfe")
    bom = b"\xef\xbb\xbf" + jsonfmt.dumps(msg_entry("e3", "e2", U("bom"))).encode()
    crlf = jsonfmt.dumps(msg_entry("e4", "e2", U("crlf"))).encode() + b"\r"
    data = (
        jsonfmt.dumps(header()).encode()
        + b"\n"
        + good
        + b"\n"
        + bad_utf8
        + b"\n"
        + bom
        + b"\n"
        + crlf
        + b"\n"
    )
    path.write_bytes(data)
    m = SessionManager.open(str(path))
    assert [e["id"] for e in m.get_entries()] == ["e1", "e2", "e4"]
    assert m.get_entry("e2")["message"]["content"] == "\ufffd\ufffd"
    assert m.loaded_file.invalid_utf8 == [3]
    assert [n for n, _ in m.loaded_file.malformed] == [4]
    assert read_bytes(path) == data


def test_integer_like_keys_parse_in_javascript_order():
    data = (
        jsonfmt.dumps(header())
        + '\n{"type":"custom","customType":"c","data":{"b":1,"10":2,"2":3},"id":"x","parentId":null,"timestamp":"t"}\n'
    ).encode()
    loaded = parse_bytes(data)
    assert list(loaded.entries[1]["data"]) == ["2", "10", "b"]
    assert loaded.raw_lines[1].endswith('"timestamp":"t"}')


def test_very_long_line(tmp_path):
    big = "y" * (5 * 1024 * 1024)
    path = tmp_path / "big.jsonl"
    write_lines(path, [header(), msg_entry("e1", None, U(big)), "{" + "x" * (3 * 1024 * 1024)])
    m = SessionManager.open(str(path))
    assert m.get_entry("e1")["message"]["content"] == big
    assert len(m.loaded_file.malformed[0][1]) < 100


def test_header_discovery_scan_limit(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_bytes(
        b" " * (HEADER_SCAN_LIMIT + 10) + b"\n" + jsonfmt.dumps(header()).encode() + b"\n"
    )
    with pytest.raises(HeaderScanLimitError):
        read_session_header(str(path))
    assert discover_header(str(path)) is None
    # open() falls back to a full load.
    m = SessionManager.open(str(path))
    assert m.get_session_id() == "s1" and m.get_cwd() == "/w/proj"
    exact = tmp_path / "exact.jsonl"
    h = jsonfmt.dumps(header()).encode()
    exact.write_bytes(b" " * (HEADER_SCAN_LIMIT - len(h)) + h)
    # A final header line ending exactly at the scan limit is still found.
    assert read_session_header(str(exact))["id"] == "s1"
    no_newline = tmp_path / "nn.jsonl"
    no_newline.write_bytes(h)
    assert read_session_header(str(no_newline))["id"] == "s1"


def test_in_memory_entries_with_and_without_header():
    entries = [
        {"type": "session", "id": "s", "timestamp": "t", "cwd": "/w"},
        {"type": "message", "timestamp": "t", "message": U("a")},
    ]
    m = SessionManager.in_memory("/w", entries=entries, rng=SeqRng(["aaaa0000"]))
    assert m.get_session_id() == "s"
    assert m.get_leaf_id() == "aaaa0000"
    assert m.get_header()["version"] == 3
    m2 = SessionManager.in_memory("/w", entries=[msg_entry("x", None, U("a"))])
    assert m2.get_header()["id"] != "s" and m2.get_leaf_id() == "x"


def test_load_readonly_is_deterministic_and_side_effect_free(tmp_path):
    path = tmp_path / "v1.jsonl"
    data = "\n".join(S13_INPUT).encode()  # no final newline either
    path.write_bytes(data)
    a = SessionManager.load_readonly(str(path))
    b = SessionManager.load_readonly(str(path))
    assert [e["id"] for e in a.get_entries()] == [e["id"] for e in b.get_entries()]
    assert a.get_entries()[2]["firstKeptEntryId"] == a.get_entries()[1]["id"]
    assert read_bytes(path) == data
    c = SessionManager.load_readonly(data)
    assert [e["id"] for e in c.get_entries()] == [e["id"] for e in a.get_entries()]
    assert not a.is_persisted() and a.get_session_file() is None
    a.append_message(U("x"))
    assert read_bytes(path) == data
    with pytest.raises(SessionError):
        SessionManager.load_readonly(b"garbage")


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_parse_file_matches_parse_bytes_across_chunk_boundaries(tmp_path, monkeypatch, chunk):
    from explorer.session import loading

    monkeypatch.setattr(loading, "READ_CHUNK", chunk)
    body = _mixed_content()
    for data in (body, body[:-1], b"", b"\n\n", b"garbage"):
        path = tmp_path / "f.jsonl"
        path.write_bytes(data)
        a = loading.parse_file(str(path))
        b = parse_bytes(data)
        for field_name in (
            "entries",
            "raw_lines",
            "line_numbers",
            "valid",
            "size",
            "line_count",
            "missing_final_newline",
            "malformed",
            "invalid_utf8",
            "falsy",
            "non_objects",
        ):
            assert getattr(a, field_name) == getattr(b, field_name), field_name


def _mixed_content() -> bytes:
    return (
        b"garbage{\n"
        + jsonfmt.dumps(header()).encode()
        + b"\n"
        + b'{"type":"custom","customType":"c","data":{"b":1,"10":2},"id":"k","parentId":null,"timestamp":"t"}\n'
        + b"\n   \nnull\n7\n"
        + jsonfmt.dumps(msg_entry("e1", None, U("caf\u00e9 \u2028 x"))).encode()
        + b"\n"
        + b'{"bad":"\xff"}\n'
        + jsonfmt.dumps(msg_entry("e2", "e1", U("y" * 300))).encode()
        + b"\n"
    )


def test_to_bytes_reproduces_lines_read_back_from_the_file(tmp_path):
    path = tmp_path / "raw.jsonl"
    data = (
        jsonfmt.dumps(header()).encode()
        + b"\n"
        + b'{"type":"message","id":"e1","parentId":null,"timestamp":"t","message":{"role":"user","content":"\xff\xfe caf\xc3\xa9","timestamp":1.0}}\n'
        + b'{"type":"x" ,  "id":"e2","parentId":"e1","timestamp":"t","n":1e2}\n'
    )
    path.write_bytes(data)
    m = SessionManager.open(str(path), clock=Clock())
    assert m.loaded_file.spans is not None and m.loaded_file.raw_lines == []
    assert m.get_entry("e1")["message"]["content"] == "\ufffd\ufffd caf\u00e9"
    assert m.to_bytes() == data
    m.append_message(U("more"))
    assert m.to_bytes() == read_bytes(path)
    assert [line for _, line in m.iter_lines()][
        2
    ] == '{"type":"x" ,  "id":"e2","parentId":"e1","timestamp":"t","n":1e2}'


def test_load_readonly_v3_path_keeps_bytes_and_never_repairs(tmp_path):
    path = tmp_path / "v3.jsonl"
    data = write_lines(path, [header(), msg_entry("e1", None, U("a"))])[:-1]  # no final newline
    path.write_bytes(data)
    m = SessionManager.load_readonly(str(path))
    assert read_bytes(path) == data
    assert m.to_bytes() == data + b"\n"
    assert m.get_leaf_id() == "e1" and m.get_cwd() == "/w/proj"
    assert SessionManager.load_readonly(str(tmp_path / "missing.jsonl")).get_entries() == []
