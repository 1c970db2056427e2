"""The Live tab's tail window is read without the whole route, and is the Transcript tab's
window of the route's map all the same.

``queries.tail_window`` reads a placed leaf's last entries by depth over its chain of
segments, the route's compactions and the edits naming the window's entries; the whole
route's map (``queries.route_map``, then ``queries.window_of_map``) is the reference: the
window (ids, types, the entry above it, compaction marks and counts, edit marks), and the
Live tab's rows, earlier link, route length and tip, must be equal on generated sessions
(branches, compactions, context edits) and on crafted ones (an undo, an edit of a
compaction, an edit above the window naming an entry of it, compactions whose first kept
entry is missing, after them or on another branch, a leaf whose parents loop).
"""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache

from benchmarks.gen_session import generate_session
from explorer import queries, route_parts, segment_store, services, shared_copies
from explorer.queries import routes, transcript
from explorer.views import live
from explorer.views.transcript import PAGE

pytestmark = pytest.mark.django_db

PAGES = (1, 7, PAGE, 300)


def _cold() -> None:
    """What a new worker starts with: no shared cache, no routes kept."""
    shared_copies.flush()
    cache.clear()
    queries._ROUTES.clear()


def _by_map(session, leaf: str | None, page: int) -> queries.RouteWindow:
    rmap = queries.route_map(session, leaf)
    n = len(rmap.ids)
    return queries.window_of_map(rmap, max(0, n - page), n)


def _assert_tail_is_the_maps(session, leaves, monkeypatch) -> int:
    """Each leaf's tail window, bounded and by the map, for several page sizes; and the Live
    tab's window (rows, earlier link, length, tip) read both ways. The count of leaves whose
    window was read bounded (placed ones)."""
    placed = 0
    for leaf in leaves:
        if route_parts.chain(session.pk, leaf) is not None:
            placed += 1
        for page in PAGES:
            _cold()
            want = _by_map(session, leaf, page)
            _cold()
            assert queries.tail_window(session, leaf, page) == want, (leaf, page)
        _cold()
        got = live._tail_window(session, leaf)
        with monkeypatch.context() as m:
            m.setattr(route_parts, "chain", lambda *a, **k: None)  # the map's way
            _cold()
            want_ctx = live._tail_window(session, leaf)
        assert got["rows_html"] == want_ctx["rows_html"], leaf
        assert (got["route_length"], got["tip"]) == (want_ctx["route_length"], want_ctx["tip"])
        assert got["route_length"] == len(queries.light_path(session, leaf))
    return placed


def _route_to(session, leaf: str) -> list[str]:
    return [e.entry_id for e in queries.light_path(session, leaf)]


@pytest.fixture
def generated(make_session, editor_user, tmp_path):
    """Seed 6: four compactions, two context edits, six branch points; then a hide, a
    replacement, a replacement undone and an edit of an entry far above the tip, appended
    through the app on the default route."""
    src = generate_session(tmp_path / "gen.jsonl", entries=1500, branch_points=6, seed=6)
    session = make_session(src.read_bytes())
    route = queries.light_path(session, queries.default_leaf_id(session))
    messages = [e.entry_id for e in route if e.type == "message"]
    for target, replacement in (
        (messages[-3], None),
        (messages[-5], {"content": "changed"}),
        (messages[-7], {"content": "changed"}),
        (messages[5], None),  # far above any tail window
    ):
        services.add_context_edit(session, editor_user, target, replacement)
        session.refresh_from_db()
    data = queries.load_entries(session, [messages[-7]])[messages[-7]]
    original = data["message"]["content"]
    services.add_context_edit(session, editor_user, messages[-7], {"content": original})  # undo
    session.refresh_from_db()
    return session


def test_generated_tails_are_the_maps_windows(generated, monkeypatch):
    session = generated
    tip = queries.default_leaf_id(session)
    route = _route_to(session, tip)
    assert len(route) > 300
    leaves = [c["id"] for c in queries.leaf_choices(session)]
    # Every 37th entry of the default route as a leaf too: windows starting and ending
    # at every kind of entry, below and above the compactions.
    leaves += route[::37]
    assert _assert_tail_is_the_maps(session, leaves, monkeypatch) == len(leaves)
    window = queries.tail_window(session, tip, PAGE)
    assert window.start == len(route) - PAGE and window.ids == tuple(route[-PAGE:])
    # The three edits near the tip: a hide and a replacement marked, the undone one not.
    assert sorted(state for state, _by in window.edits.values()) == ["hidden", "replaced"]
    assert any(_comp_in(session, leaf) for leaf in leaves)  # a window held a compaction


def _comp_in(session, leaf: str) -> bool:
    return bool(queries.tail_window(session, leaf, 300).counts)


def _line(kind: str, eid: str, parent: str | None, **extra) -> dict:
    return {
        "type": kind,
        "id": eid,
        "parentId": parent,
        "timestamp": "2025-01-01T00:00:00Z",
        **extra,
    }


def _comp(eid: str, parent: str | None, first_kept: str | None) -> dict:
    kept = {"firstKeptEntryId": first_kept} if first_kept else {}
    return _line("compaction", eid, parent, summary=f"summary {eid}", tokensBefore=900, **kept)


def _user(eid: str, parent: str | None, text: str = "hello") -> dict:
    return _line("message", eid, parent, message={"role": "user", "content": text, "timestamp": 1})


def _crafted() -> tuple[bytes, dict[str, str]]:
    """A route of 400 entries with compactions and edits placed around its tail, and a
    side branch."""
    header = {"type": "session", "version": 3, "id": "tail-crafted", "timestamp": "2025-01-01T00:00:00Z", "cwd": "/w"}  # fmt: skip
    lines: list[dict] = [header]
    parent: str | None = None
    names: dict[str, str] = {}

    def add(line: dict) -> str:
        nonlocal parent
        lines.append(line)
        parent = line["id"]
        return line["id"]

    for k in range(400):
        eid = f"m{k:03d}"
        if k == 150:  # a compaction keeping from m120, far above the tail
            add(_comp(eid, parent, "m120"))
        elif k == 200:  # an edit above every tail window naming an entry below it
            add(_line("context_edit", eid, parent, targetId="m390", replacement=None))
        elif k == 250:  # a compaction keeping from an entry on another branch
            add(_comp(eid, parent, "side1"))
        elif k == 345:  # whose range starts after the one before it
            add(_comp(eid, parent, "m340"))
        elif k == 352:  # first kept entry after it
            add(_comp(eid, parent, "m399"))
        elif k == 358:  # no first kept entry named
            add(_comp(eid, parent, None))
        elif k == 366:  # an edit of a compaction, replaced
            add(_line("context_edit", eid, parent, targetId="m352", replacement={"content": "x"}))
        elif k == 372:  # a replacement, then its undo: no mark
            add(_line("context_edit", eid, parent, targetId="m360", replacement={"content": "x"}))
        elif k == 373:
            add(
                _line(
                    "context_edit", eid, parent, targetId="m360", replacement={"content": "hello"}
                )
            )
        elif k == 380:  # a hide of an entry above the tail window, and one of the window's
            add(_line("context_edit", eid, parent, targetId="m300", replacement=None))
        elif k == 381:
            add(_line("context_edit", eid, parent, targetId="m370", replacement=None))
        elif k == 382:  # not an id: no mark
            add(_line("context_edit", eid, parent, targetId=["m371"], replacement=None))
        elif k == 384:  # the newest edit naming an entry wins
            add(_line("context_edit", eid, parent, targetId="m370", replacement={"content": "y"}))
        elif k == 392:
            add(_comp(eid, parent, "m389"))
        else:
            add(_user(eid, parent))
        if k == 100:
            side = parent
            lines.append(_user("side1", side))
            lines.append(_user("side2", "side1"))
            parent = side
    names["tip"] = parent or ""
    names["side"] = "side2"
    data = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    return data, names


def test_crafted_tails_are_the_maps_windows(make_session, monkeypatch):
    data, names = _crafted()
    session = make_session(data)
    route = _route_to(session, names["tip"])
    assert len(route) == 400
    leaves = [names["tip"], names["side"], *route[340::3], route[150], route[63], route[64]]
    assert _assert_tail_is_the_maps(session, leaves, monkeypatch) == len(leaves)
    window = queries.tail_window(session, names["tip"], PAGE)
    # Only the window's own entries carry edit marks; m360's replacement was undone.
    assert window.edits == {
        "m390": ("hidden", "m200"),
        "m370": ("replaced", "m384"),
        "m352": ("replaced", "m366"),
    }
    assert window.marks[389] == ("kept", "m392") and window.counts[392] == (30, 3)


def _add_loop(session) -> None:
    """Two entries whose parents loop and two below them, stored as the writers store rows
    an import refuses (the segments leave them out: the routes there are walked)."""
    from explorer.models import Entry

    position = session.entry_count
    writer = segment_store.SegmentWriter(session.pk)
    rows = [("loop1", "loop2"), ("loop2", "loop1"), ("below", "loop1"), ("under", "below")]
    for k, (eid, parent) in enumerate(rows):
        raw = json.dumps(_user(eid, parent))
        Entry.objects.create(
            session=session, entry_id=eid, parent_id=parent, type="message", role="user",
            position=position + k + 1, line_no=position + k + 2, raw=raw, size=len(raw),
        )  # fmt: skip
        writer.add(eid, parent, position + k + 1)
    writer.finish()
    session.entry_count += len(rows)
    session.save(update_fields=["entry_count"])


def test_a_leaf_in_no_segment_reads_its_map(make_session, monkeypatch):
    data, names = _crafted()
    session = make_session(data)
    _add_loop(session)
    assert route_parts.chain(session.pk, "under") is None
    assert _assert_tail_is_the_maps(session, ["under", "below"], monkeypatch) == 0
    window = queries.tail_window(session, "under", PAGE)
    assert window.ids == ("loop2", "loop1", "below", "under") and window.above is None


def test_a_placed_route_is_not_walked_whole(make_session, monkeypatch):
    data, names = _crafted()
    session = make_session(data)
    tip = names["tip"]
    want = _by_map(session, tip, PAGE)
    page = live._tail_window(session, tip)

    def no_walk(*args, **kwargs):
        raise AssertionError("the whole route was read")

    _cold()
    monkeypatch.setattr(routes, "light_path", no_walk)
    monkeypatch.setattr(transcript, "light_path", no_walk)
    monkeypatch.setattr(transcript, "route_map", no_walk)
    read: list[tuple[int, int]] = []
    real = route_parts.rows_between

    def counted(route, low, high, *args, **kwargs):
        read.append((low, high))
        return real(route, low, high, *args, **kwargs)

    monkeypatch.setattr(route_parts, "rows_between", counted)
    assert queries.tail_window(session, tip, PAGE) == want
    # The window's rows and the one above it, by depth: not the route's 400.
    assert read == [(400 - PAGE - 1, 399)]
    _cold()
    assert live._tail_window(session, tip) == page
