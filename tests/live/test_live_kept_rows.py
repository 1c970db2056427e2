"""The Live tab after each append: what it keeps across appends (transcript rows kept by
their item, text-tree rows kept by what they show) must give the page a fresh render gives.

Entries are appended one by one, at the tip and on other branches, each chosen to change
rows that were rendered before it: a tool result pairs with the call above it, a context
edit marks a row, a new sibling gives rows a branch switcher, a compaction marks the rows it
replaces and keeps, a label tags a text-tree row, and the small window drops a paired call
off its start. After each, the page as the caches left it must equal the page rendered
after clearing every cache; a kept row that went stale fails it (the last test proves the
comparison sees one).
"""

from __future__ import annotations

import json
import re

import pytest
from django.core.cache import cache
from django.urls import reverse

from explorer import items, services, shared_copies
from explorer.models import Entry, Session

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"|"X-CSRFToken": "[^"]+"')
TIP = "1b2c3d4e"  # the small session's newest entry


def _msg(eid: str, parent: str, role: str, content, **extra) -> dict:
    message = {"role": role, "content": content, "timestamp": 1741064800000, **extra}
    if role == "assistant":
        message |= {"api": "anthropic-messages", "provider": "anthropic", "model": "m",
                    "usage": {"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0,
                              "totalTokens": 12, "cost": {"input": 0, "output": 0, "cacheRead": 0,
                                                          "cacheWrite": 0, "total": 0.001}},
                    "stopReason": "stop"}  # fmt: skip
    return {"type": "message", "id": eid, "parentId": parent,
            "timestamp": "2025-03-04T06:00:00.000Z", "message": message}  # fmt: skip


def _appends() -> list[dict]:
    """Entries in append order, each naming its parent: at the tip, then elsewhere."""
    call = [{"type": "toolCall", "id": "call_9", "name": "read", "arguments": {"path": "x"}}]
    result = [{"type": "text", "text": "the result"}]
    return [
        _msg("aa000001", TIP, "user", "Read x, please"),
        _msg("aa000002", "aa000001", "assistant", call),
        # Pairs with the call above: the call's row now shows it.
        _msg(
            "aa000003",
            "aa000002",
            "toolResult",
            result,
            toolCallId="call_9",
            toolName="read",
            isError=False,
        ),
        # Marks the result (and so the call's row) as hidden from the model.
        {
            "type": "context_edit",
            "id": "aa000004",
            "parentId": "aa000003",
            "timestamp": "2025-03-04T06:01:00.000Z",
            "targetId": "aa000003",
            "replacement": None,
        },
        _msg("aa000005", "aa000004", "assistant", [{"type": "text", "text": "Done **now**."}]),
        # A sibling of the result: the newest route leaves the tip, and rows get a switcher.
        _msg(
            "aa000006",
            "aa000002",
            "toolResult",
            result,
            toolCallId="call_9",
            toolName="read",
            isError=True,
        ),
        # Back at the old tip: the route there now passes a branch point.
        _msg("aa000007", "aa000005", "user", "And y?"),
        # A third root-level branch (a sibling of the first assistant reply).
        _msg("aa000008", "a1b2c3d4", "assistant", [{"type": "text", "text": "Elsewhere."}]),
        _msg("aa000009", "aa000007", "assistant", [{"type": "text", "text": "y is fine."}]),
        # Replaces everything before aa000005 and keeps the rest.
        {
            "type": "compaction",
            "id": "aa00000a",
            "parentId": "aa000009",
            "timestamp": "2025-03-04T06:02:00.000Z",
            "summary": "All of it, *briefly*.",
            "firstKeptEntryId": "aa000005",
            "tokensBefore": 4242,
        },
        {
            "type": "label",
            "id": "aa00000b",
            "parentId": "aa00000a",
            "timestamp": "2025-03-04T06:03:00.000Z",
            "targetId": "aa000005",
            "label": "kept",
        },
        _msg("aa00000c", "aa00000b", "user", "Thanks"),
    ]


def _page(client, session) -> str:
    body = client.get(reverse("explorer:live", args=[session.pk])).content.decode()
    return TOKEN.sub("T", body)


def _fresh_page(client, session) -> str:
    shared_copies.flush()
    cache.clear()
    return _page(client, session)


def _append(session, entry: dict) -> Session:
    ids = [entry["id"]]
    assert services.append_lines_verbatim(session, [json.dumps(entry)], ids, source="test") == 1
    fresh = Session.objects.get(pk=session.pk)
    # What the broadcast renders for the new entry goes into the same kept rows.
    items.entry_fragments(list(Entry.objects.filter(session=fresh, entry_id__in=ids)), fresh)
    return fresh


def _walk(client, session) -> list[tuple[str, str, str]]:
    """(entry, kept page, fresh page) after each append, the kept page asked for first."""
    out = []
    _page(client, session)  # the caches as a reader left them before the first append
    for entry in _appends():
        session = _append(session, entry)
        shared_copies.flush()  # the copies the request before queued are written
        kept = _page(client, session)
        again = _page(client, session)  # warm: from the per-version caches
        fresh = _fresh_page(client, session)
        out.append((entry["id"], kept, fresh))
        assert again == kept, entry["id"]
    return out


@pytest.mark.parametrize("page_rows", [60, 4])
def test_the_live_page_after_each_append_is_a_fresh_render(
    make_session, viewer_client, monkeypatch, page_rows
):
    monkeypatch.setattr("explorer.views.live.PAGE", page_rows)  # 4: the window slides
    session = make_session()
    seen = []
    for eid, kept, fresh in _walk(viewer_client, session):
        assert kept == fresh, eid
        seen.append(fresh)
    # The walk did reach what it meant to: the pairing, the marks, the switcher, the label.
    every = "".join(seen)
    assert 'id="r-aa000003"' in every and "t-edited" in every
    assert "t-replaced" in every and "kept tail of compaction" in every
    assert "t-switch" in every and "⚑ kept" in every


def test_the_comparison_sees_a_stale_kept_row(make_session, viewer_client, monkeypatch):
    """Rows kept under their entry id alone (not what they show) go stale when the tool
    result arrives: the walk must say so."""
    monkeypatch.setattr(items, "_item_digest", lambda it: it["id"])
    session = make_session()
    stale = [eid for eid, kept, fresh in _walk(viewer_client, session) if kept != fresh]
    assert "aa000003" in stale
