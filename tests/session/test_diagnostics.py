"""Diagnostics report (SPEC Appendix D): every problem named with its line, nothing crashes."""

from __future__ import annotations

from explorer.session import jsonfmt
from explorer.session.diagnostics import validate_bytes, validate_file

from .manager_helpers import SYS, A, U, header, msg_entry


def _data(objects):
    return "".join((o if isinstance(o, str) else jsonfmt.dumps(o)) + "\n" for o in objects).encode()


def _by_code(report):
    out = {}
    for p in report.problems:
        out.setdefault(p.code, []).append(p)
    return out


def test_clean_file_has_no_problems():
    report = validate_bytes(
        _data([header(), msg_entry("a", None, U("x")), msg_entry("b", "a", A("y"))])
    )
    assert report.ok and report.problems == []
    assert report.version == 3 and report.header["id"] == "s1"
    assert report.entry_count == 2 and report.line_count == 3


def test_not_a_session_is_an_error():
    for content, fragment in [
        ([msg_entry("a", None, U("x"))], "not a session header"),
        (["5", header()], "not an object"),
        ([{"type": "session", "id": 1}], "no string id"),
        (["garbage"], "no JSON value"),
    ]:
        report = validate_bytes(_data(content), path="/x.jsonl")
        assert not report.ok
        [problem] = report.errors
        assert problem.code == "not-a-session" and fragment in problem.message


def test_tolerated_problems_are_warnings_with_lines():
    data = _data(
        [
            "garbage{",
            header(),
            msg_entry("a", None, U("x")),
            "not json",
            "null",
            "7",
            msg_entry("b", "missing", U("y")),
            {
                "type": "future_type",
                "id": "f",
                "parentId": "a",
                "timestamp": "2025-01-01T00:00:02.000Z",
            },
        ]
    )[:-1]
    report = validate_bytes(data)
    assert report.ok
    codes = _by_code(report)
    assert [p.line for p in codes["malformed-line"]] == [1, 4]
    assert [p.line for p in codes["falsy-value"]] == [5]
    assert [p.line for p in codes["non-object-line"]] == [6]
    assert codes["dangling-parent"][0].line == 7 and codes["dangling-parent"][0].entry_id == "b"
    assert "missing" in codes["dangling-parent"][0].message
    assert codes["unknown-type"][0].entry_id == "f"
    assert codes["missing-final-newline"][0].line == 8
    assert all(p.severity == "warning" for p in report.problems)
    assert [p.line for p in report.problems] == sorted(p.line for p in report.problems)


def test_duplicate_ids_and_cycles_are_errors():
    data = _data(
        [
            header(),
            msg_entry("a", None, U("x")),
            msg_entry("a", None, U("again")),
            msg_entry("c1", "c2", U("x")),
            msg_entry("c2", "c1", U("y")),
            msg_entry("self", "self", U("z")),
        ]
    )
    report = validate_bytes(data)
    assert not report.ok
    codes = _by_code(report)
    [dup] = codes["duplicate-id"]
    assert dup.line == 3 and "lines 2 and 3" in dup.message
    cycles = codes["parent-cycle"]
    assert len(cycles) == 2
    assert {p.entry_id for p in cycles} <= {"c1", "c2", "self"}
    assert any("c1" in p.message and "c2" in p.message for p in cycles)


def test_legacy_version_is_reported_and_checked_after_migration():
    data = _data(
        [
            {"type": "session", "id": "s", "timestamp": "t", "cwd": "/w"},
            {"type": "message", "timestamp": "2025-01-01T00:00:00.000Z", "message": U("x")},
            {
                "type": "compaction",
                "timestamp": "2025-01-01T00:00:00.000Z",
                "summary": "S",
                "firstKeptEntryIndex": 1,
                "tokensBefore": 1,
            },
        ]
    )
    report = validate_bytes(data)
    assert report.ok
    assert report.codes() == ["legacy-version"]
    assert "legacy version 1" in report.problems[0].message


def test_context_edit_and_compaction_problems():
    data = _data(
        [
            header(),
            msg_entry("s", None, SYS("p", ts=1)),
            msg_entry("u", "s", U("x")),
            msg_entry("a", "u", A("y")),
            msg_entry("u2", "u", U("other branch")),
            {
                "type": "context_edit",
                "id": "e1",
                "parentId": "u2",
                "timestamp": "t",
                "targetId": "a",
                "replacement": None,
            },
            {
                "type": "context_edit",
                "id": "e2",
                "parentId": "e1",
                "timestamp": "t",
                "targetId": "s",
                "replacement": None,
            },
            {
                "type": "context_edit",
                "id": "e3",
                "parentId": "e2",
                "timestamp": "t",
                "targetId": "nope",
                "replacement": None,
            },
            {
                "type": "context_edit",
                "id": "e4",
                "parentId": "e3",
                "timestamp": "t",
                "targetId": "u",
            },
            {
                "type": "context_edit",
                "id": "e5",
                "parentId": "e4",
                "timestamp": "t",
                "targetId": "u",
                "replacement": {"text": "x"},
            },
            {
                "type": "compaction",
                "id": "c",
                "parentId": "e5",
                "timestamp": "t",
                "summary": "S",
                "firstKeptEntryId": "a",
                "tokensBefore": 1,
                "systemMessage": {"role": "system", "content": None},
            },
        ]
    )
    codes = _by_code(validate_bytes(data))
    assert codes["edit-off-path"][0].entry_id == "e1"
    assert codes["edit-not-editable"][0].entry_id == "e2"
    assert codes["edit-unknown-target"][0].entry_id == "e3"
    assert codes["edit-without-replacement"][0].entry_id == "e4"
    assert 'target "u"' in codes["edit-without-replacement"][0].message
    assert codes["edit-malformed-replacement"][0].entry_id == "e5"
    assert codes["first-kept-not-on-path"][0].entry_id == "c"
    assert codes["bad-checkpoint"][0].entry_id == "c"


def test_message_content_sections_and_timestamps():
    data = _data(
        [
            header(),
            msg_entry("r", None, SYS("p", {"n": 5, "ok": "x", "z": 0}, ts=1)),
            msg_entry("nots", "r", SYS("p")),
            msg_entry("num", "r", {"role": "user", "content": 5, "timestamp": 1}, "bad time"),
            msg_entry("null", "r", {"role": "user", "timestamp": 1}),
            msg_entry("blk", "r", {"role": "assistant", "content": [5]}),
            {"type": "message", "id": "nomsg", "parentId": "r", "timestamp": "t", "message": None},
        ]
    )
    codes = _by_code(validate_bytes(data))
    assert [p.entry_id for p in codes["nan-section"]] == ["r"] and '"n"' in codes["nan-section"][
        0
    ].message
    assert codes["system-without-timestamp"][0].entry_id == "nots"
    assert codes["bad-content"][0].entry_id == "num"
    assert codes["null-content"][0].entry_id == "null"
    assert codes["bad-block"][0].entry_id == "blk"
    assert codes["bad-message"][0].entry_id == "nomsg"
    assert codes["unparseable-timestamp"][0].entry_id == "num"


def test_invalid_utf8_huge_lines_and_empty(tmp_path):
    big = (
        b'{"type":"message","id":"b","parentId":null,"timestamp":"t","message":{"role":"user","content":"'
        + b"x" * (6 * 1024 * 1024)
        + b'"}}'
    )
    data = (
        _data([header()])
        + b'{"bad":"\xff"}\n'
        + big
        + b"\n"
        + b"{"
        + b"y" * (4 * 1024 * 1024)
        + b"\n"
    )
    report = validate_bytes(data)
    codes = _by_code(report)
    assert codes["invalid-utf8"][0].line == 2
    assert codes["malformed-line"][0].line == 4 and len(codes["malformed-line"][0].message) < 200
    assert report.entry_count == 2
    empty = validate_bytes(b"")
    assert empty.ok and empty.codes() == ["empty-file"]
    path = tmp_path / "f.jsonl"
    path.write_bytes(data)
    assert validate_file(str(path)).to_json()["problems"] == report.to_json()["problems"]


def test_deep_chain_validates_without_recursion():
    lines = [header(), msg_entry("e0", None, U("x"))]
    lines += [msg_entry(f"e{i}", f"e{i - 1}", U("x")) for i in range(1, 20000)]
    lines.append(
        {
            "type": "context_edit",
            "id": "edit",
            "parentId": "e19999",
            "timestamp": "t",
            "targetId": "e0",
            "replacement": None,
        }
    )
    report = validate_bytes(_data(lines))
    assert report.ok and report.problems == []


def test_version_values_follow_javascript_comparisons():
    def codes_for(version):
        head = {"type": "session", "version": version, "id": "s", "timestamp": "t", "cwd": "/w"}
        return validate_bytes(_data([head, msg_entry("a", None, U("x"))])).codes()

    assert codes_for("3") == ["odd-version"]  # "3" >= 3 in JavaScript: not migrated
    assert codes_for(4) == ["newer-version"]
    assert codes_for(2) == ["legacy-version"]
    assert codes_for("x") == ["legacy-version"]  # NaN: Pi rewrites without changes
    assert codes_for(None) == ["legacy-version"]
