"""The explorer's pure questions: alignment, survival of references, routes, timeline."""

from __future__ import annotations

from explorer.analysis.compactions import (
    compaction_info,
    compaction_ranges,
    extract_references,
    reference_survival,
    survival_for,
)
from explorer.analysis.compare import common_ancestor_index, projection_diff, route_stats
from explorer.analysis.projection import align_projection
from explorer.session.tokens import CompactionSettings

USAGE = {"input": 100, "output": 10, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 110,
         "cost": {"input": 0.1, "output": 0.01, "cacheRead": 0, "cacheWrite": 0, "total": 0.11}}  # fmt: skip


def msg(i, parent, role, content, **extra):
    m = {"role": role, "content": content, "timestamp": i, **extra}
    if role == "assistant":
        m.update({"api": "a", "provider": "p", "model": "m", "usage": USAGE, "stopReason": "stop"})
    return {
        "type": "message",
        "id": i,
        "parentId": parent,
        "timestamp": "2025-03-04T05:06:08.000Z",
        "message": m,
    }


def path_with_everything():
    return [
        msg("s1", None, "system", "You are careful."),
        msg("u1", "s1", "user", "Read src/app.py and run `pytest -q` see https://example.com/doc 12345"),
        msg("a1", "u1", "assistant", [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "src/app.py"}}]),
        msg("t1", "a1", "toolResult", [{"type": "text", "text": "print(1)"}], toolCallId="c1", toolName="read", isError=False),
        msg("a2", "t1", "assistant", [{"type": "text", "text": "It prints 1."}]),
        {"type": "compaction", "id": "c9", "parentId": "a2", "timestamp": "2025-03-04T05:07:00.000Z",
         "summary": "Read src/app.py; ran pytest -q.", "firstKeptEntryId": "a2", "tokensBefore": 999},
        msg("u2", "c9", "user", "Now edit it"),
        {"type": "label", "id": "l1", "parentId": "u2", "timestamp": "2025-03-04T05:07:01.000Z", "targetId": "u2", "label": "x"},
        msg("a3", "l1", "assistant", [{"type": "text", "text": "Edited."}]),
        {"type": "context_edit", "id": "e1", "parentId": "a3", "timestamp": "2025-03-04T05:07:02.000Z", "targetId": "a3", "replacement": None},
        msg("u3", "e1", "user", "Again"),
        {"type": "context_edit", "id": "e2", "parentId": "u3", "timestamp": "2025-03-04T05:07:03.000Z", "targetId": "u3", "replacement": {"content": "Once more"}},
    ]  # fmt: skip


def test_alignment_explains_every_difference():
    path = path_with_everything()
    view = align_projection(
        path, context_window=1000, settings=CompactionSettings(reserve_tokens=100)
    )
    status = {r.id: (r.status, r.reason) for r in view.rows}
    assert status["s1"][0] == "superseded"
    assert status["u1"] == ("compacted", "folded into compaction c9")
    assert status["a2"][0] == "same"
    assert status["c9"][0] == "summary" and "keeps history from a2" in status["c9"][1]
    assert status["l1"][0] == "metadata" and "label" in status["l1"][1]
    assert status["a3"] == ("hidden", "hidden by context edit e1")
    assert status["u3"] == ("replaced", "content replaced by context edit e2")
    assert status["e1"] == ("metadata", "context edit: hides a3")
    c9 = next(r for r in view.rows if r.id == "c9")
    assert c9.order == [1]  # the summary is the first thing the model sees
    assert view.compaction_id == "c9"
    assert view.threshold == 900
    assert view.projected_tokens > 0 and view.raw_tokens > view.projected_sum - 10
    assert view.would_compact is False


def test_compaction_would_trigger_for_a_small_window():
    view = align_projection(
        path_with_everything(), context_window=100, settings=CompactionSettings(reserve_tokens=100)
    )
    assert view.projected_tokens > 0
    assert view.would_compact is True


def test_references_are_extracted_by_kind():
    refs = extract_references(
        [
            "see src/app.py and ./lib/x.ts at https://example.com/a?b=1, ran `git status` 12345 and 3.14 id abcdef12"
        ],
        commands=["npm test -- src/a.ts\nsecond line"],
        known_ids={"abcdef12"},
    )
    assert "src/app.py" in refs["path"] and "./lib/x.ts" in refs["path"]
    assert refs["url"] == ["https://example.com/a?b=1"]
    assert "git status" in refs["command"] and "npm test -- src/a.ts" in refs["command"]
    assert "12345" in refs["number"] and "3.14" in refs["number"]
    assert refs["entry_id"] == ["abcdef12"]


def test_survival_reports_what_the_summary_kept():
    report = reference_survival({"path": ["src/app.py", "src/gone.py", "lib/deep/name.ts"], "number": ["12345"]},
                                "Kept src/app.py and name.ts; 123456 rows")  # fmt: skip
    items = {i.value: i for i in report.items}
    assert items["src/app.py"].survived
    assert not items["src/gone.py"].survived
    assert items["lib/deep/name.ts"].partial and not items["lib/deep/name.ts"].survived
    assert not items["12345"].survived  # 123456 is a different number
    assert report.survived == 1 and report.total == 4


def test_compaction_view_data():
    path = path_with_everything()
    ranges = compaction_ranges(path)
    assert ranges == [(5, 0, 4)]
    info = compaction_info(path, *ranges[0])
    assert [e["id"] for e in info.replaced] == ["s1", "u1", "a1", "t1"]
    assert [e["id"] for e in info.kept] == ["a2"]
    assert info.tokens_before == 999 and not info.off_path
    report = survival_for(info)
    by = {i.value: i.survived for i in report.items}
    assert by["src/app.py"] is True
    assert by["https://example.com/doc"] is False


def test_routes_compare_from_their_common_ancestor():
    assert common_ancestor_index(["a", "b", "c"], ["a", "b", "x", "y"]) == 1
    assert common_ancestor_index(["a"], ["z"]) == -1
    path = path_with_everything()
    stats = route_stats(path)
    assert stats.tool_calls == 1 and stats.files_read == ["src/app.py"]
    assert round(stats.cost, 2) == 0.33 and stats.tokens == 330
    other = path[:5] + [msg("z1", "a2", "user", "different")]
    diff = projection_diff(path, other)
    sides = {d.source_id: d.side for d in diff}
    assert sides["z1"] == "b" and sides["c9"] == "a" and sides["u1"] == "b"


def test_tool_output_numbers_are_not_references():
    refs = extract_references(["kept 4096 rows"], outputs=["811: line 99999 of src/out.py"])
    assert refs["number"] == ["4096"]
    assert "src/out.py" in refs["path"]


def test_an_edit_of_a_folded_entry_is_explained():
    path = path_with_everything() + [
        {
            "type": "context_edit",
            "id": "e3",
            "parentId": "e2",
            "timestamp": "2025-03-04T05:07:04.000Z",
            "targetId": "u1",
            "replacement": None,
        }
    ]
    status = {r.id: r.reason for r in align_projection(path).rows}
    assert status["e3"] == "context edit of u1: no effect, the target is not in context"
