"""A Claude Code user record answering several parallel tool calls at once.

Claude Code writes one assistant record per content block, so three parallel calls are three
assistant records; the answers often come back in ONE user record holding three
`tool_result` blocks (and sometimes a text block typed with them). The engine reads such a
record as several messages (one `toolResult` per block); the stored Pi form must keep them
apart too, each with its `toolCallId`, or every page that pairs a result with its call by id
loses the pairs and the projection counts the results as user text.

The file is built here (the shared examples hold one result per record).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from explorer import agent_import, files, queries
from explorer.models import Entry, Session
from explorer.session.formats import load_foreign
from explorer.session.formats.pi_form import part_ids
from explorer.session.manager import SessionManager
from tests.web.test_tool_pairs import _calls_and_results, assert_pairs_shown

pytestmark = pytest.mark.django_db

SID = "5e55e55e-0000-4000-8000-00000000c1a0"


def _uuid(n: int) -> str:
    return f"00000000-0000-4000-8000-{n:012d}"


def _record(kind: str, n: int, parent: int | None, message: dict[str, Any], **extra) -> dict:
    return {
        "type": kind,
        "uuid": _uuid(n),
        "parentUuid": _uuid(parent) if parent is not None else None,
        "sessionId": SID,
        "cwd": "/srv/app",
        "timestamp": f"2026-11-02T10:00:{n:02d}.000Z",
        "message": message,
        **extra,
    }


USAGE = {"input_tokens": 3, "output_tokens": 40, "cache_read_input_tokens": 1000}


def _call(n: int, parent: int, msg_id: str, call_id: str, path: str) -> dict:
    block = {"type": "tool_use", "id": call_id, "name": "Read", "input": {"file_path": path}}
    message = {"id": msg_id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
               "content": [block], "stop_reason": "tool_use", "usage": USAGE}  # fmt: skip
    return _record("assistant", n, parent, message)


def _reply(n: int, parent: int, msg_id: str, text: str) -> dict:
    message = {"id": msg_id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
               "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
               "usage": USAGE}  # fmt: skip
    return _record("assistant", n, parent, message)


def _result(call_id: str, text: str) -> dict:
    return {"type": "tool_result", "tool_use_id": call_id, "content": text}


def claude_multi_file(folder: Path) -> Path:
    """A prompt; three parallel Read calls (one record each, one response); ONE user record
    with the three results; a reply; a fourth call answered by a user record holding its
    result and a typed text block; a last reply."""
    records = [
        _record("user", 1, None, {"role": "user", "content": "Read the three config files"}),
        _call(2, 1, "msg_A", "toolu_A", "/srv/app/a.toml"),
        _call(3, 2, "msg_A", "toolu_B", "/srv/app/b.toml"),
        _call(4, 3, "msg_A", "toolu_C", "/srv/app/c.toml"),
        _record(
            "user",
            5,
            4,
            {
                "role": "user",
                "content": [
                    _result("toolu_A", "alpha = 1"),
                    _result("toolu_B", "beta = 2"),
                    _result("toolu_C", "gamma = 3"),
                ],
            },
            toolUseResult={"type": "text"},
        ),  # fmt: skip
        _reply(6, 5, "msg_B", "All three read."),
        _call(7, 6, "msg_C", "toolu_D", "/srv/app/d.toml"),
        _record(
            "user",
            8,
            7,
            {
                "role": "user",
                "content": [
                    _result("toolu_D", "delta = 4"),
                    {"type": "text", "text": "and please check e.toml as well"},
                ],
            },
        ),  # fmt: skip
        _reply(9, 8, "msg_D", "Checked."),
    ]
    path = folder / f"{SID}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


RESULT_IDS = {"toolu_A": 5, "toolu_B": 5, "toolu_C": 5, "toolu_D": 8}
CALL_RECORDS = {"toolu_A": 2, "toolu_B": 3, "toolu_C": 4, "toolu_D": 7}


def _imported(tmp_path: Path) -> tuple[Session, Path]:
    path = claude_multi_file(tmp_path)
    result = agent_import.import_agent_file(str(path))
    assert result.ok, [str(p) for p in result.problems]
    return Session.objects.get(agent="claude-code"), path


def test_the_engine_reads_each_result_as_its_own_message(tmp_path):
    """The engine's reading (what `pisession context` prints) was already right: one record
    per line, and each result a `toolResult` message with its call id."""
    foreign = load_foreign(str(claude_multi_file(tmp_path)))
    assert len(foreign.entries()) == 9
    pairs = foreign.context(_uuid(9))
    results = [(i, m["toolCallId"]) for i, m in pairs if m["role"] == "toolResult"]
    assert results == [(_uuid(5), "toolu_A"), (_uuid(5), "toolu_B"), (_uuid(5), "toolu_C"),
                       (_uuid(8), "toolu_D")]  # fmt: skip
    assert [m["role"] for i, m in pairs if i == _uuid(8)] == ["toolResult", "user"]


def test_part_ids_are_derived_from_the_record_and_the_last_keeps_its_uuid(tmp_path):
    foreign = load_foreign(str(claude_multi_file(tmp_path)))
    record = foreign.get(_uuid(5))
    assert record is not None
    assert part_ids(record) == [f"{_uuid(5)}:1", f"{_uuid(5)}:2", _uuid(5)]
    one = foreign.get(_uuid(1))
    assert one is not None and part_ids(one) == [_uuid(1)]


def test_each_result_is_stored_as_its_own_entry_with_its_call_id(tmp_path):
    session, _ = _imported(tmp_path)
    rows = {
        eid: (parent, json.loads(raw)["message"])
        for eid, parent, raw in Entry.objects.filter(session=session, type="message").values_list(
            "entry_id", "parent_id", "raw"
        )
    }
    five = [f"{_uuid(5)}:1", f"{_uuid(5)}:2", _uuid(5)]
    # Parent chain in block order; the record's children still hang from its uuid.
    assert [rows[i][0] for i in five] == [_uuid(4), five[0], five[1]]
    assert [rows[i][1]["toolCallId"] for i in five] == ["toolu_A", "toolu_B", "toolu_C"]
    assert all(rows[i][1]["role"] == "toolResult" for i in five)
    assert [rows[i][1]["toolName"] for i in five] == ["Read"] * 3
    assert rows[_uuid(6)][0] == _uuid(5)
    eight = [f"{_uuid(8)}:1", _uuid(8)]
    assert [rows[i][1]["role"] for i in eight] == ["toolResult", "user"]
    assert rows[eight[0]][1]["toolCallId"] == "toolu_D"
    assert rows[_uuid(8)][1]["content"] == [
        {"type": "text", "text": "and please check e.toml as well"}
    ]
    # The tree's leaves are the file's: no part is a leaf of its own.
    assert session.entry_count == 12  # nine records, two more parts of 5, one of 8
    ids = set(Entry.objects.filter(session=session).values_list("entry_id", flat=True))
    parents = set(Entry.objects.filter(session=session).values_list("parent_id", flat=True))
    assert session.leaf_count == 1 and ids - parents == {_uuid(9)}


def test_every_page_pairs_the_results_with_their_calls(tmp_path, viewer_client):
    session, _ = _imported(tmp_path)
    pairs = _calls_and_results(session)
    expect = {
        cid: (_uuid(CALL_RECORDS[cid]), part)
        for cid, part in zip(
            ["toolu_A", "toolu_B", "toolu_C", "toolu_D"],
            [f"{_uuid(5)}:1", f"{_uuid(5)}:2", _uuid(5), f"{_uuid(8)}:1"],
            strict=True,
        )
    }
    assert pairs == expect
    assert_pairs_shown(viewer_client, session, expect)
    # Integrity: no result "without its call".
    assert queries.unmatched_tool_results(session) == []


def test_the_projection_lists_each_result_with_its_call_id(tmp_path):
    """Pi's projection of the stored form is the engine's reading of the file: the same
    messages, each result from its own entry (whose id maps back to the record)."""
    session, path = _imported(tmp_path)
    foreign = load_foreign(str(path))
    manager = SessionManager.load_readonly(b"".join(files.iter_export(session)))
    projection = manager.build_session_projection()
    got = [(p.source_entry["id"], m) for p in projection.entries for m in p.messages]
    want = foreign.context(_uuid(9))

    def key(m: dict) -> tuple:
        # Usage differs by design (the Pi form prices it and counts it once per response).
        return (m["role"], m.get("toolCallId"), json.dumps(m["content"]))

    assert [key(m) for _, m in got] == [key(m) for _, m in want]
    assert [i.split(":")[0] for i, _ in got] == [i for i, _ in want]
    results = [(i, m["toolCallId"]) for i, m in got if m["role"] == "toolResult"]
    assert results == [(f"{_uuid(5)}:1", "toolu_A"), (f"{_uuid(5)}:2", "toolu_B"),
                       (_uuid(5), "toolu_C"), (f"{_uuid(8)}:1", "toolu_D")]  # fmt: skip
    # The Context tab's rows: three results, not one user message of their texts.
    rows = queries.context_summary(session, _uuid(9), 200_000, 16_384)["rows"]
    roles = [role for r in rows for _, role, _ in r["projected"]]
    assert roles.count("toolResult") == 4 and roles.count("user") == 2


def test_reimporting_the_same_file_adds_nothing(tmp_path):
    session, path = _imported(tmp_path)
    again = agent_import.import_agent_file(str(path))
    assert again.ok and again.unchanged
    assert Entry.objects.filter(session=session).count() == session.entry_count


def _compacted_file(folder: Path) -> Path:
    """The file above, then a compaction preserving everything from the three results on,
    its summary and one more exchange."""
    path = claude_multi_file(folder)
    boundary = {
        "type": "system", "subtype": "compact_boundary", "uuid": _uuid(10), "parentUuid": None,
        "logicalParentUuid": _uuid(9), "sessionId": SID, "cwd": "/srv/app",
        "timestamp": "2026-11-02T10:00:10.000Z", "content": "Conversation compacted",
        "compactMetadata": {"trigger": "manual", "preTokens": 5000, "preservedMessages": {
            "anchorUuid": _uuid(4), "uuids": [_uuid(n) for n in range(5, 10)]}},
    }  # fmt: skip
    summary = _record("user", 11, 10, {"role": "user", "content": "Summary: read four files."},
                      isCompactSummary=True, isVisibleInTranscriptOnly=True)  # fmt: skip
    more = [
        _record("user", 12, 11, {"role": "user", "content": "Thanks"}),
        _reply(13, 12, "msg_E", "You are welcome."),
    ]
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in [boundary, summary, *more]))
    return path


def test_a_compaction_keeping_a_multi_result_record_keeps_all_its_parts(tmp_path):
    """The compaction's first kept entry is the record's first part, so Pi's projection of
    the stored form keeps every result, as the engine's reading does."""
    path = _compacted_file(tmp_path)
    result = agent_import.import_agent_file(str(path))
    assert result.ok
    session = Session.objects.get(agent="claude-code")
    compaction = json.loads(Entry.objects.get(session=session, entry_id=_uuid(10)).raw)
    assert compaction["firstKeptEntryId"] == f"{_uuid(5)}:1"
    foreign = load_foreign(str(path))
    manager = SessionManager.load_readonly(b"".join(files.iter_export(session)))
    manager.branch(_uuid(13))
    got = [(p.source_entry["id"], m) for p in manager.build_session_projection().entries
           for m in p.messages]  # fmt: skip
    want = foreign.context(_uuid(13))
    boundary_of = {v: k for k, v in foreign.summary_of.items()}
    assert [i.split(":")[0] for i, _ in got] == [boundary_of.get(i, i) for i, _ in want]
    results = [m["toolCallId"] for _, m in got if m["role"] == "toolResult"]
    assert results == ["toolu_A", "toolu_B", "toolu_C", "toolu_D"]


def test_a_session_stored_merged_keeps_its_form_when_the_file_grows(tmp_path):
    """A session stored before the split (one merged entry per record) is continued in that
    form: the grown file adds its new records, no part becomes a stray branch beside the
    stored record. Deleted and imported again, it is stored split."""
    from explorer.services.imports import delete_session
    from explorer.session.formats.pi_form import pi_bytes

    path = claude_multi_file(tmp_path)
    old = files.import_bytes(pi_bytes(load_foreign(str(path)), split=False), source_path=str(path))
    assert old.ok and old.session is not None
    assert not Entry.objects.filter(session=old.session, entry_id__endswith=":1").exists()
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(_record("user", 10, 9, {"role": "user", "content": "More"})) + "\n")
    grown = agent_import.import_agent_file(str(path))
    assert grown.ok and grown.session is not None and grown.session.pk == old.session.pk
    session = grown.session
    assert session.entry_count == 10 and session.leaf_count == 1
    assert not Entry.objects.filter(session=session, entry_id__contains=":").exists()
    assert not [p for p in grown.problems if p.code == "conflict"]
    delete_session(session, None)
    again = agent_import.import_agent_file(str(path))
    assert again.ok and again.session is not None and again.session.entry_count == 13
    assert _calls_and_results(again.session)["toolu_B"][1] == f"{_uuid(5)}:2"


def test_a_grown_file_adds_the_parts_of_its_new_records(tmp_path, viewer_client):
    """Followed or imported again after growing: the new multi-result record is stored in
    parts like the first ones, after the stored lines."""
    session, path = _imported(tmp_path)
    more = [
        _call(10, 9, "msg_F", "toolu_E", "/srv/app/e.toml"),
        _call(11, 10, "msg_F", "toolu_F", "/srv/app/f.toml"),
        _record(
            "user",
            12,
            11,
            {
                "role": "user",
                "content": [_result("toolu_E", "eps = 5"), _result("toolu_F", "phi = 6")],
            },
        ),  # fmt: skip
    ]
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(r) + "\n" for r in more))
    grown = agent_import.import_agent_file(str(path))
    assert grown.ok and grown.session is not None and grown.session.pk == session.pk
    assert grown.added == 4 and not grown.problems
    expect = {"toolu_E": (_uuid(10), f"{_uuid(12)}:1"), "toolu_F": (_uuid(11), _uuid(12))}
    pairs = _calls_and_results(grown.session)
    assert {k: pairs[k] for k in expect} == expect
    assert_pairs_shown(viewer_client, grown.session, expect)
