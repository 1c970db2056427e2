"""The Timeline's turns stored with a big session (`queries._TIMELINE_STATE`).

A cold reader (a new worker, a cleared cache) of a big session's tip adopts the turns the
import stored with the default route instead of walking the route, parsing its entries and
running the estimate along it; after appends it extends them. What must stay true: the
figures it gives are exactly those built from the rows, at the tip, after appends, on
another branch and on a clipped route.
"""

from __future__ import annotations

import pytest
from django.core.cache import cache

from explorer import queries, services, shared_copies, stored_figures
from explorer.models import Session, StoredFigure

from . import crafted

pytestmark = pytest.mark.django_db


@pytest.fixture
def store_small(monkeypatch):
    """Store the figures of the test sessions too (they are far under the real bound)."""
    monkeypatch.setattr(stored_figures, "STORE_FROM", 1)
    monkeypatch.setattr(stored_figures, "STORE_LAG", 2)


def _cold_worker() -> None:
    """What a new worker process starts with: no shared cache, no copies of its own."""
    shared_copies.flush()
    cache.clear()
    queries._GROWN.clear()
    queries._TIMELINES.clear()
    queries._ROUTES.clear()


def _slow(session: Session, cursor: str | None) -> dict:
    """The figures built from the rows, with nothing kept or stored anywhere."""
    _cold_worker()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stored_figures, "load", lambda *a: None)
        mp.setattr(stored_figures, "store", lambda *a: False)
        figures = queries.timeline_figures(session, cursor)
    _cold_worker()
    return figures


def _parsed(monkeypatch) -> list[int]:
    """Count the route entries a reader parses (each call's length)."""
    calls: list[int] = []
    original = queries.full_path

    def counting(session, light):
        calls.append(len(light))
        return original(session, light)

    for module in (queries.entries, queries.timeline):  # context_path and the timeline read it
        monkeypatch.setattr(module, "full_path", counting)
    return calls


def _tip(session: Session) -> str | None:
    return queries.default_leaf_id(session)


def _stored_upto(session: Session) -> int:
    return stored_figures.position(
        session, f"{queries._TIMELINE_STATE}|{queries.mask_key(session)}:{session.secrets_rules}"
    )


def _reply(eid: str, parent: str | None, n: int) -> dict:
    return crafted.message(eid, parent, "assistant", f"reply {n} " * 30, n, usage=crafted.usage(90))


def _append_reply(session: Session, text: str, leaf: str | None) -> None:
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": "p",
        "model": "m",
        "usage": {"input": 900, "output": 5, "cacheRead": 0, "cacheWrite": 0},
        "stopReason": "stop",
        "timestamp": 1_760_000_000_000,
    }
    services.append_message(session, None, message, leaf_id=leaf)
    session.refresh_from_db()


def test_the_import_stores_the_tips_turns_and_a_cold_reader_adopts_them(
    make_session, store_small, monkeypatch
):
    session = make_session()
    tip = _tip(session)
    assert _stored_upto(session) == queries.last_position(session)
    expected = _slow(session, tip)
    assert expected["turns"] > 0
    parsed = _parsed(monkeypatch)
    walks: list[int] = []
    original_walk = queries._walk_up
    monkeypatch.setattr(queries.routes, "_walk_up", lambda *a: walks.append(1) or original_walk(*a))
    assert queries.timeline_figures(session, tip) == expected
    assert parsed == [] and walks == []  # no entry parsed, no route walked


def test_a_session_under_the_bound_stores_no_timeline(make_session, monkeypatch):
    monkeypatch.setattr(stored_figures, "STORE_FROM", 10**9)
    session = make_session()
    queries.timeline_figures(session, _tip(session))
    assert not StoredFigure.objects.filter(session=session).exists()


def test_a_route_too_big_to_hold_parsed_stores_no_timeline(make_session, store_small, monkeypatch):
    """The stored turns hold the window's entries parsed: a route of more JSON than
    STORED_TIMELINE_CHARS is neither stored by the import nor by a reader of its tip, and
    its figures are the rows' all the same."""
    monkeypatch.setattr(queries.timeline, "STORED_TIMELINE_CHARS", 1000)  # 12 replies: 4,000+
    big = make_session(crafted.session_bytes(crafted.header("0195-too-big"), _replies(12)))
    assert _stored_upto(big) == -1
    for k in range(3):
        _append_reply(big, f"more {k}", _tip(big))
    _cold_worker()
    tip = _tip(big)
    figures = queries.timeline_figures(big, tip)
    assert _stored_upto(big) == -1  # three positions behind, and still too big
    assert figures == _slow(big, tip) and figures["turns"] == 15
    monkeypatch.setattr(queries.timeline, "STORED_TIMELINE_CHARS", 10**9)
    assert (
        _stored_upto(make_session(crafted.session_bytes(crafted.header("0195-ok"), _replies(12))))
        >= 0
    )


def _replies(n: int) -> list[dict]:
    entries, parent = [], None
    for k in range(n):
        entries.append(_reply(f"r{k:03d}", parent, k))
        parent = entries[-1]["id"]
    return entries


def test_after_appends_the_stored_turns_are_extended_and_stored_again(
    make_session, store_small, monkeypatch
):
    session = make_session()
    stored_at = _stored_upto(session)
    _append_reply(session, "one", _tip(session))  # one position behind: under STORE_LAG
    _cold_worker()
    tip = _tip(session)
    with pytest.MonkeyPatch.context() as mp:
        parsed = _parsed(mp)
        figures = queries.timeline_figures(session, tip)
    assert parsed == [1]  # only the appended entry was parsed
    assert _stored_upto(session) == stored_at  # not yet STORE_LAG behind
    assert figures == _slow(session, tip)
    assert figures["points"][-1].entry_id == tip

    _append_reply(session, "two", _tip(session))
    _append_reply(session, "three", _tip(session))
    tip = _tip(session)
    _cold_worker()
    figures = queries.timeline_figures(session, tip)  # three behind: written again
    assert _stored_upto(session) == queries.last_position(session)
    assert figures == _slow(session, tip)
    _cold_worker()
    parsed = _parsed(monkeypatch)
    assert queries.timeline_figures(session, tip) == figures
    assert parsed == []


def test_another_branch_is_built_and_gives_the_rows_figures(make_session, store_small):
    session = make_session()
    old_tip = _tip(session)
    route = queries.light_path(session, old_tip)
    fork = [e.entry_id for e in route if e.type == "message"][-3]
    # A sibling branch, now the file's last entry and longer than the stored route: the
    # stored turns (of the old tip) are not its prefix although they are shorter.
    _append_reply(session, "elsewhere", fork)
    while len(queries.light_path(session, _tip(session))) <= len(route) + 1:
        _append_reply(session, "on", _tip(session))
    _cold_worker()
    new_tip = _tip(session)
    assert new_tip != old_tip
    for cursor in (new_tip, old_tip, fork):
        expected = _slow(session, cursor)
        _cold_worker()
        assert queries.timeline_figures(session, cursor) == expected, cursor
        # and with the process holding the stored turns adopted for another route
        assert queries.timeline_figures(session, new_tip) == _slow(session, new_tip)


def _long_entries(pairs: int) -> list[dict]:
    out, parent = [], None
    for k in range(pairs):
        out.append(crafted.message(f"u{k:05d}", parent, "user", "word " * 80, k + 1))
        out.append(_reply(f"a{k:05d}", f"u{k:05d}", k + 1))
        parent = f"a{k:05d}"
    return out


def test_a_clipped_route_gives_the_rows_figures_as_its_window_moves(store_small, monkeypatch):
    monkeypatch.setattr(queries.timeline, "TIMELINE_MAX_PATH", 20)
    monkeypatch.setattr(queries.timeline, "TIMELINE_STEP", 10)
    head = crafted.header("3c9b1f40-6a2e-4d8b-b7c1-5e0f2a9d8c64")
    session = crafted.imported(crafted.session_bytes(head, _long_entries(14)), "clip.jsonl")
    tip = _tip(session)
    expected = _slow(session, tip)
    assert expected["clipped"] > 0
    assert queries.timeline_figures(session, tip) == expected
    clipped = expected["clipped"]
    for k in range(12):  # past the next window step
        _append_reply(session, f"more {k}", _tip(session))
        _cold_worker() if k % 3 == 0 else None
        tip = _tip(session)
        assert queries.timeline_figures(session, tip) == _slow(session, tip), k
    assert _slow(session, tip)["clipped"] > clipped  # the window moved on


@pytest.mark.parametrize("change", ["mask", "rules"])
def test_a_stored_copy_of_another_masking_is_not_adopted(
    make_session, store_small, monkeypatch, change
):
    session = make_session()
    tip = _tip(session)
    _cold_worker()
    if change == "mask":  # a finding marked false positive since
        for module in (queries.keep, queries.timeline):  # the cache key and the stored copy's
            monkeypatch.setattr(module, "mask_key", lambda s: "another-mask")
    else:  # findings made again under other secret rules
        session.secrets_rules = "other-rules"
    parsed = _parsed(monkeypatch)
    queries.timeline_figures(session, tip)
    assert sum(parsed) == len(queries.light_path(session, tip))  # built from the rows
