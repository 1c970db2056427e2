"""What the Compactions tab and the leaf picker keep across appends equal a fresh build.

The list of a route's compactions and each compaction's detail are kept per compaction
(they depend only on the route up to it), so a route that grew reuses them; the newest
leaves are extended by the appended rows. Generated
sessions are stored in part, then grown one entry at a time with every entry type (a
compaction among them, branches back to earlier entries); after each append the kept
answer is compared with one built from scratch without the kept state.
"""

from __future__ import annotations

import json
import random
import uuid

import pytest
from django.core.cache import cache
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer import queries, services
from explorer.analysis.compactions import compaction_ranges
from explorer.models import Entry
from explorer.session.describe import entry_title
from explorer.views import compaction_view

pytestmark = pytest.mark.django_db


def _header() -> dict:
    """A new session each time (an import of a known id would grow that session)."""
    return {
        "type": "session",
        "version": 3,
        "id": str(uuid.uuid4()),
        "timestamp": "2025-03-04T05:06:07.089Z",
        "cwd": "/home/ana/proj",
    }


KINDS = (
    "user",
    "assistant",
    "tool",
    "compaction",
    "context_edit",
    "label",
    "session_info",
    "model_change",
    "thinking_level_change",
    "branch_summary",
    "custom_message",
)


def _usage(n: int) -> dict:
    cost = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
    return {"input": n, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": n + 5, "cost": cost}  # fmt: skip


def _entries(seed: int, count: int, every_from: int) -> list[dict]:
    """``count`` entries of every kind: mostly a growing route, sometimes a branch back to
    an earlier entry; compactions keep a recent entry of their route (or one off it). From
    ``every_from`` on, each kind comes once (in a random order) before the random ones."""
    rng = random.Random(seed)
    each = rng.sample(KINDS, len(KINDS))
    out: list[dict] = []
    parent_of: dict[str, str | None] = {}
    leaf: str | None = None
    for n in range(count):
        eid = f"{seed % 97:02x}{n:06x}"
        if out and rng.random() < 0.08:
            leaf = rng.choice(out)["id"]  # navigate back: a new branch
        route = []
        cur = leaf
        while cur is not None:
            route.append(cur)
            cur = parent_of[cur]
        kind = rng.choice(KINDS) if n > 3 else "user"
        if every_from <= n < every_from + len(each):
            kind = each[n - every_from]
        base = {"id": eid, "parentId": leaf, "timestamp": f"2025-03-04T05:{n // 60 % 60:02d}:{n % 60:02d}.000Z"}  # fmt: skip
        ts = 1741064768000 + n
        if kind == "user":
            e = {"type": "message", "message": {"role": "user", "content": f"fix src/mod{n}.py now", "timestamp": ts}}  # fmt: skip
        elif kind == "assistant":
            e = {"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": f"done `git diff` {n}"}], "api": "anthropic-messages", "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": _usage(100 + n), "stopReason": "stop", "timestamp": ts}}  # fmt: skip
        elif kind == "tool":
            e = {"type": "message", "message": {"role": "toolResult", "toolCallId": f"c{n}", "toolName": "read", "content": [{"type": "text", "text": f"/tmp/f{n}.txt ok"}], "isError": False, "timestamp": ts}}  # fmt: skip
        elif kind == "compaction":
            kept = route[rng.randrange(0, min(len(route), 6))] if route else eid
            if rng.random() < 0.15:
                kept = "ffffffff"  # not on the route
            e = {"type": "compaction", "summary": f"Worked on src/mod{n}.py", "firstKeptEntryId": kept, "tokensBefore": 1000 + n}  # fmt: skip
        elif kind == "context_edit":
            target = rng.choice(route) if route else eid
            e = {"type": "context_edit", "targetId": target, "replacement": None if rng.random() < 0.5 else {"content": "shorter"}}  # fmt: skip
        elif kind == "label":
            e = {"type": "label", "targetId": rng.choice(route) if route else eid, "label": f"l{n}"}  # fmt: skip
        elif kind == "session_info":
            e = {"type": "session_info", "name": f"name {n}"}
        elif kind == "model_change":
            e = {"type": "model_change", "provider": "anthropic", "modelId": "claude-opus-4"}
        elif kind == "thinking_level_change":
            e = {"type": "thinking_level_change", "thinkingLevel": "high"}
        elif kind == "branch_summary":
            e = {"type": "branch_summary", "fromId": leaf or eid, "summary": f"tried {n}"}
        else:
            e = {"type": "custom_message", "customType": "note", "content": f"note {n}", "display": True}  # fmt: skip
        entry = {**base, **e}
        entry = {"type": entry.pop("type"), **entry}
        out.append(entry)
        parent_of[eid] = leaf
        leaf = eid
    return out


def _line(entry: dict) -> str:
    return json.dumps(entry, separators=(",", ":"))


def _fresh_compactions(session, light) -> list[dict]:
    """The list as the tab built it before anything was kept: ranges over the whole route."""
    data = queries.load_entries(session, [e.entry_id for e in light if e.type == "compaction"])
    stub = [
        {
            "id": e.entry_id,
            "type": e.type,
            **(
                {"firstKeptEntryId": data.get(e.entry_id, {}).get("firstKeptEntryId")}
                if e.type == "compaction"
                else {}
            ),
        }  # fmt: skip
        for e in light
    ]
    out = []
    for ci, start, fk in compaction_ranges(stub):
        comp = data.get(light[ci].entry_id, {})
        out.append(
            {
                "id": light[ci].entry_id,
                "index": ci,
                "start": start,
                "first_kept_index": fk,
                # the replaced stretch without the earlier compactions lying in it
                "replaced_count": sum(
                    1
                    for e in light[start : (fk if fk is not None else ci)]
                    if e.type != "compaction"
                ),
                "kept_count": (ci - fk) if fk is not None else 0,
                "tokens_before": comp.get("tokensBefore"),
                "first_kept": comp.get("firstKeptEntryId"),
                "off_path": fk is None and comp.get("firstKeptEntryId") != light[ci].entry_id,
                "timestamp": comp.get("timestamp", ""),
            }
        )
    return out


def _fresh_leaf_choices(session, limit: int = 200) -> list[dict]:
    """The leaf picker as read from the child counts, without anything kept."""
    rows = (
        Entry.objects.filter(session=session, child_count=0)
        .order_by("-position")
        .values_list("entry_id", "type", "role")[:limit]
    )
    data = queries.load_entries(session, [r[0] for r in rows])
    out = [{"id": r[0], "title": f"{r[0]} · {r[2] or r[1]} · {entry_title(data.get(r[0], {}), 50)}"} for r in rows]  # fmt: skip
    out += [{"id": t, "title": f"\u2691 {text} ({t})"} for t, text in queries.current_labels(session).items()]  # fmt: skip
    return out


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 10_000), stored=st.integers(5, 40))
def test_kept_compaction_lists_leaves_and_details_equal_a_fresh_build(
    make_session, monkeypatch, seed, stored
):
    monkeypatch.setattr(queries.leaves, "LEAVES_KEPT", 6)  # a kept list shorter than the leaves
    entries = _entries(seed, stored + 40, stored)
    data = ("\n".join(_line(e) for e in [_header(), *entries[:stored]]) + "\n").encode()
    session = make_session(data)
    cache.clear()
    for k in range(stored, len(entries)):
        leaf = entries[k - 1]["id"]
        light = queries.light_path(session, leaf)
        kept = queries.route_compactions(session, light)
        assert kept == _fresh_compactions(session, light)
        assert queries.leaf_choices(session) == _fresh_leaf_choices(session)
        assert queries.leaf_choices(session, 2) == _fresh_leaf_choices(session, 2)
        assert services.append_lines_verbatim(session, [_line(entries[k])], [entries[k]["id"]], source="test") == 1  # fmt: skip
        session.refresh_from_db()
    light = queries.light_path(session, entries[-1]["id"])
    assert queries.route_compactions(session, light) == _fresh_compactions(session, light)


def _compaction_session(count: int) -> bytes:
    """A linear session with a compaction every ten entries."""
    lines = [_header()]
    parent = None
    for n in range(count):
        eid = f"e{n:07d}"
        if n % 10 == 9:
            e = {"type": "compaction", "id": eid, "parentId": parent, "timestamp": "2025-03-04T05:06:08.000Z", "summary": f"up to {n}", "firstKeptEntryId": f"e{n - 3:07d}", "tokensBefore": 10 * n}  # fmt: skip
        else:
            e = {"type": "message", "id": eid, "parentId": parent, "timestamp": "2025-03-04T05:06:08.000Z", "message": {"role": "user", "content": f"step {n} in src/a{n}.py", "timestamp": 1741064768000}}  # fmt: skip
        lines.append(e)
        parent = eid
    return ("\n".join(_line(e) for e in lines) + "\n").encode()


def test_the_compactions_page_lists_the_newest_and_loads_older_ones(viewer_client, make_session):
    from django.urls import reverse

    session = make_session(_compaction_session(400))  # 40 compactions
    url = reverse("explorer:compactions", args=[session.pk])
    page = viewer_client.get(url).content.decode()
    listed = page.count('<li class="chosen">') + page.count('<li class="">')
    assert listed == compaction_view.LIST_SHOWN
    assert "e0000399" in page and "e0000009" not in page.split('id="compaction-detail"')[0]
    assert f"show {compaction_view.LIST_SHOWN} older" in page and "of 30" in page
    # "Show older" (htmx) answers the ten before, and offers the rest again.
    older = viewer_client.get(url, {"older": "30"}, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in older and "e0000299" in older and "e0000209" in older
    assert "e0000199" not in older and "of 20" in older and "autofocus" in older
    # Without script the link lists every compaction.
    every = viewer_client.get(url, {"older": "all"}).content.decode()
    assert all(f"e{n:07d}" in every for n in range(9, 400, 10))
    # The JSON lists them all, as before.
    data = viewer_client.get(url, {"format": "json"}).json()
    assert len(data["compactions"]) == 40 and data["detail"]["item"]["id"] == "e0000399"
    assert "start" not in data["compactions"][0]


def test_the_compactions_page_weighs_the_same_for_few_and_many(viewer_client, make_session):
    """Page weight bounded: 40 compactions on the route cost about what 12 do."""
    from django.urls import reverse

    sizes = []
    for count in (120, 400):
        session = make_session(_compaction_session(count))
        body = viewer_client.get(reverse("explorer:compactions", args=[session.pk])).content
        sizes.append(len(body))
        services.delete_session(session, None)
    assert sizes[1] < sizes[0] * 1.1, sizes


def test_the_listed_stretch_stays_the_same_size_however_many_compactions():
    from explorer.analysis.compactions import list_window

    assert list_window(4, 10, chosen=3, before=None, every=False) == (0, 4)
    assert list_window(400, 10, chosen=399, before=None, every=False) == (390, 400)
    assert list_window(400, 10, chosen=385, before=None, every=False) == (385, 400)
    assert list_window(400, 10, chosen=None, before=390, every=False) == (380, 390)
    assert list_window(400, 10, chosen=None, before=5, every=False) == (0, 5)
    assert list_window(400, 10, chosen=None, before=None, every=True) == (0, 400)


def test_kept_labels_follow_every_label_entry(make_session):
    """The labels kept as the session grows equal a fresh read after each label entry:
    a new label, a relabel, a cleared one, one on an entry appended meanwhile."""
    from django.core.cache import cache

    from explorer import services
    from explorer.models import Session

    session = make_session()
    assert queries.current_labels(session) == {"a1b2c3d4": "start"}
    steps = [("b2c3d4e5", "tool call"), ("a1b2c3d4", "first"), ("b2c3d4e5", None)]
    for target, text in steps:
        services.set_label(session, None, target, text)
        session = Session.objects.get(pk=session.pk)
        kept = queries.current_labels(session)
        fresh = queries._read_labels(session, {}, -1, queries.last_position(session))
        assert kept == fresh
    assert kept == {"a1b2c3d4": "first"}
    kept["x"] = "changed by a caller"  # a caller's copy, not the kept map
    assert "x" not in queries.current_labels(session)
    cache.clear()
    assert queries.current_labels(Session.objects.get(pk=session.pk)) == {"a1b2c3d4": "first"}
