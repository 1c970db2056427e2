"""Tool results without their call: read from the head of each result's line, kept as the
session grows, and the same as a check that reads every line whole."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from explorer import queries, services
from explorer.analysis import integrity
from explorer.models import Entry, Session

from . import crafted

pytestmark = pytest.mark.django_db

TS = "2025-03-04T05:06:08.000Z"
BIG = "x" * 50_000  # a content far longer than the head that is read first


def _assistant(eid: str, parent: str | None, calls: list[str]) -> dict:
    content = [{"type": "toolCall", "id": c, "name": "read", "arguments": {}} for c in calls]
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2}
    message = {"role": "assistant", "content": content, "api": "a", "provider": "p", "model": "m", "usage": usage, "stopReason": "toolUse", "timestamp": 2}  # fmt: skip
    return crafted.entry(eid, parent, message, TS)


def _result(eid: str, parent: str, call: str, *, call_last: bool = False) -> dict:
    # call_last: the call id after megabytes of content
    return crafted.tool_result(eid, parent, call, BIG, TS, call_last=call_last)


def _session() -> Session:
    entries = [
        crafted.entry("u1", None, {"role": "user", "content": "hi", "timestamp": 1}, TS),
        _assistant("a1", "u1", ["c1", "c2"]),
        _result("r1", "a1", "c1"),
        _result("r2", "r1", "c2", call_last=True),
        _result("r3", "r2", "c-nowhere"),
        _result("r4", "r3", "c-late", call_last=True),
    ]
    head = crafted.header("tools-session", timestamp=TS)
    data = crafted.session_bytes(head, entries, compact=True)
    result = services.import_bytes(data, source_path="tools.jsonl", user=None)
    assert result.session is not None
    return result.session


def _whole_line_check(session: Session) -> list[dict]:
    """The check as it was: every line read whole, nothing kept."""
    rows = list(
        Entry.objects.filter(session=session)
        .order_by("position")
        .values_list("entry_id", "parent_id", "role", "line_no")
    )
    raws = dict(Entry.objects.filter(session=session).values_list("entry_id", "raw"))
    results = [(r[0], r[3]) for r in rows if r[2] == "toolResult"]
    parent = {r[0]: r[1] for r in rows}
    role = {r[0]: r[2] for r in rows}
    return integrity.unmatched_tool_results(
        results, parent, role, lambda ids: {i: raws[i] for i in ids}, lambda ids: {i: raws[i] for i in ids}
    )  # fmt: skip


def test_heads_find_what_whole_lines_find(viewer_client):
    session = _session()
    with CaptureQueriesContext(connection) as seen:
        found = queries.unmatched_tool_results(session)
    assert [f["id"] for f in found] == ["r3", "r4"]
    assert found[0]["detail"] == "no assistant call c-nowhere above it"
    assert found[1]["detail"] == "no assistant call c-late above it"  # found past the head
    assert found == _whole_line_check(session)
    # The whole line is read only for the result whose call id lies past its head, and
    # for the assistant messages.
    whole = [q["sql"] for q in seen.captured_queries if '"explorer_entry"."raw"' in q["sql"] and "SUBSTR" not in q["sql"].upper()]  # fmt: skip
    assert len(whole) == 2, whole
    assert all("'r1'" not in q and "'r3'" not in q for q in whole)
    page = viewer_client.get(
        f"/sessions/{session.pk}/integrity/", {"section": "tools"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "c-nowhere" in page and "c-late" in page and "c2" not in page.replace("c-", "")


def test_kept_results_grow_with_the_session():
    session = _session()
    assert len(queries.unmatched_tool_results(session)) == 2
    tip = queries.default_leaf_id(session)
    steps = [
        {
            "role": "toolResult",
            "toolCallId": "c-new",
            "toolName": "read",
            "content": [{"type": "text", "text": "late"}],
            "isError": False,
            "timestamp": 9,
        },  # fmt: skip
        {"role": "user", "content": "next", "timestamp": 10},
        {
            "role": "toolResult",
            "toolCallId": "c1",
            "toolName": "read",
            "content": [],
            "isError": False,
            "timestamp": 11,
        },  # fmt: skip
    ]
    for k, message in enumerate(steps):
        result = services.append_message(session, None, message, leaf_id=tip, source="test")
        tip = result.entry.entry_id
        session = Session.objects.get(pk=session.pk)
        kept = queries.unmatched_tool_results(session)
        assert kept == _whole_line_check(session), k
    # the first new result names a call a1 never made; the last one names a1's call, but
    # a user's message lies between (the pairing rule looks for a result's call within
    # its turn: ``analysis.tool_pairs.find_call``)
    assert [f["detail"] for f in kept][2:] == [
        "no assistant call c-new above it",
        "no assistant call c1 above it",
    ]
    cache.clear()  # a fresh build gives the same list
    assert queries.unmatched_tool_results(Session.objects.get(pk=session.pk)) == kept
