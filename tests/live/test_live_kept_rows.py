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

from explorer import html, items, queries, services, shared_copies
from explorer.models import Entry, Session

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"|"X-CSRFToken": "[^"]+"')


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


def _appends(tip: str, elsewhere: str, hide: str) -> list[dict]:
    """Entries in append order, each naming its parent: at the ``tip``, then elsewhere (the
    branches start at the tip's parent and at ``elsewhere``, an older entry of the route);
    ``hide``: an older message of the route that an edit hides (its rows get a mark)."""
    call = [{"type": "toolCall", "id": "call_9", "name": "read", "arguments": {"path": "x"}}]
    result = [{"type": "text", "text": "the result"}]
    return [
        _msg("aa000001", tip, "user", "Read x, please"),
        {
            "type": "context_edit",
            "id": "aa0000e1",
            "parentId": "aa000001",
            "timestamp": "2025-03-04T06:00:30.000Z",
            "targetId": hide,
            "replacement": None,
        },
        _msg("aa000002", "aa0000e1", "assistant", call),
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
        # A branch further up the route.
        _msg("aa000008", elsewhere, "assistant", [{"type": "text", "text": "Elsewhere."}]),
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


@pytest.fixture(params=["small", "generated"])
def stored(request, make_session, tmp_path):
    """The small session, or a generated one long enough for the text tree to fold its
    route into chains and page it around the cursor (the rows kept by what they show)."""
    if request.param == "small":
        return make_session()
    from benchmarks.gen_session import generate_session

    path = tmp_path / "long.jsonl"
    generate_session(str(path), entries=400, branch_points=3, seed=3)
    return make_session(path.read_bytes())


def _walk(client, session) -> list[tuple[str, str, str]]:
    """(entry, kept page, fresh page) after each append, the kept page asked for first."""
    out = []
    _page(client, session)  # the caches as a reader left them before the first append
    rmap = queries.route_map(session, queries.default_leaf_id(session))
    route = rmap.ids
    # A message well before the tip: on a long route, one the text tree unfolds around the
    # cursor, rendered (and kept) before the edit marks it.
    older = route[: max(2, len(route) - 25)]
    messages = [e for e, t in zip(older, rmap.types, strict=False) if t == "message"]
    for entry in _appends(route[-1], route[max(0, len(route) - 30)], messages[-1]):
        session = _append(session, entry)
        shared_copies.flush()  # the copies the request before queued are written
        kept = _page(client, session)
        again = _page(client, session)  # warm: from the per-version caches
        fresh = _fresh_page(client, session)
        out.append((entry["id"], kept, fresh))
        assert again == kept, entry["id"]
    # The reader's cursor moves up the route and back (nothing appended): the rows it
    # leaves and reaches change, the others are the kept ones.
    route = queries.route_map(session, queries.default_leaf_id(session)).ids
    for back in (6, 5, 1):
        services.move_cursor(session, client.user, route[-back])
        shared_copies.flush()
        kept = _page(client, session)
        out.append((f"cursor {route[-back]}", kept, _fresh_page(client, session)))
    return out


@pytest.mark.parametrize("page_rows", [60, 4])
def test_the_live_page_after_each_append_is_a_fresh_render(
    stored, viewer_client, monkeypatch, page_rows
):
    monkeypatch.setattr("explorer.views.live.PAGE", page_rows)  # 4: the window slides
    seen = []
    for eid, kept, fresh in _walk(viewer_client, stored):
        assert kept == fresh, eid
        seen.append(fresh)
    # The walk did reach what it meant to: the pairing, the marks, the switcher, the label.
    every = "".join(seen)
    assert 'id="r-aa000003"' in every and "t-edited" in every
    assert "t-replaced" in every and "kept tail of compaction" in every
    assert "t-switch" in every and "⚑ kept" in every


def test_the_comparison_sees_a_stale_transcript_row(stored, viewer_client, monkeypatch):
    """Rows kept under their entry id alone (not what they show) go stale when the tool
    result arrives: the walk must say so."""
    monkeypatch.setattr(items, "_item_digest", lambda it: it["id"])
    stale = [eid for eid, kept, fresh in _walk(viewer_client, stored) if kept != fresh]
    assert "aa000003" in stale


def test_the_comparison_sees_a_stale_text_tree_row(
    make_session, tmp_path, viewer_client, monkeypatch
):
    """Text-tree rows kept under their entry id alone go stale when an edit hides an older
    message of the route (its row lacks the "hidden" tag): the walk must say so."""
    from benchmarks.gen_session import generate_session

    path = tmp_path / "long.jsonl"
    generate_session(str(path), entries=400, branch_points=3, seed=3)
    session = make_session(path.read_bytes())
    monkeypatch.setattr(html, "_route_row_key", lambda eid, role, title, args: eid)
    stale = [eid for eid, kept, fresh in _walk(viewer_client, session) if kept != fresh]
    assert "aa0000e1" in stale
