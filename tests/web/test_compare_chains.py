"""Compare read from the routes' chains of segments (``queries.compare._compare_by_chains``:
the common ancestor where the chains part, each route's part after it by (segment, offset)
ranges, of the shared prefix only what the live ranges and the costs need) shows exactly
what reading both routes whole shows (``queries.compare.compare_walked``, the reference):
on generated sessions imported whole, grown by appends, and on entry rows the import would
refuse (dangling and later parents, loops, unplaced entries), for random pairs (a leaf and
its own ancestor, the same leaf twice, different roots, unknown ids) under random cursors.
An ancestor one entry off makes it fail."""

from __future__ import annotations

import random
from typing import Any
from unittest import mock

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase as HypothesisTestCase

from benchmarks.gen_session import generate_session
from explorer import route_parts, segment_store, services, storage
from explorer.models import Entry, Session
from explorer.queries import compare, routes
from tests.session.test_route_figures import sessions
from tests.web.test_route_store import HEADER, _lines
from tests.web.test_segments import _append_rows, _store_rows, records

pytestmark = pytest.mark.django_db


def _forget_routes() -> None:
    with routes._ROUTES_LOCK:
        routes._ROUTES.clear()


def _pairs(ids: list[str], seed: int, n: int = 6) -> list[tuple[str, str, str | None]]:
    """(a, b, cursor): random ones, plus a leaf with itself, with its parent's entry, with
    the first entry (often another root), and an unknown id."""
    rng = random.Random(seed)
    names = [*ids, "gone"]
    out = [(rng.choice(ids), rng.choice(ids), rng.choice([*names, None])) for _ in range(n)]
    last = ids[-1]
    out += [(last, last, last), (ids[0], last, None), (last, "gone", last)]
    if len(ids) > 1:
        out.append((last, ids[len(ids) // 2], ids[len(ids) // 2]))
    return out


def assert_chains_agree(session: Session, pairs: list[tuple[str, str, str | None]]) -> int:
    """Each pair's Compare by the chains equals the walked one; returns how many the
    chains answered (the others fell back to the walk)."""
    answered = 0
    for a, b, cursor in pairs:
        _forget_routes()
        walked = compare.compare_walked(session, a, b, cursor)
        _forget_routes()
        by_chains = compare._compare_by_chains(session, a, b, cursor)
        if by_chains is not None:
            answered += 1
            assert by_chains == walked, (a, b, cursor)
        assert compare.compare_routes(session, a, b, cursor) == walked, (a, b, cursor)
    return answered


class GeneratedSessions(HypothesisTestCase):
    """Sessions of every kind of entry the figures know (compactions with kept entries
    anywhere, edits, model changes, branch summaries, dangling and late parents), imported
    whole or a head imported and the rest appended one line at a time."""

    answered = 0

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        assert cls.answered > 60, "the chains hardly ever answered"

    @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
    @given(sessions(), st.integers(0, 12), st.integers(0, 10**6))
    def test_generated(self, entries, head, seed):
        dicts = [e for e in entries if isinstance(e, dict)]
        ids = [e.get("id") for e in dicts]
        if len(dicts) != len(entries) or not all(isinstance(i, str) for i in ids):
            return
        if len(set(ids)) != len(ids):
            return
        later = {eid: k for k, eid in enumerate(ids)}
        appends = head > 0 and all(
            later.get(d.get("parentId"), -1) <= k for k, d in enumerate(dicts)
        )
        first = dicts[:head] if appends else dicts
        result = services.import_bytes(HEADER + _lines(first))
        session = result.session
        if session is None or not Entry.objects.filter(session=session).exists():
            return
        if appends:
            for value in dicts[head:]:
                with transaction.atomic():
                    try:
                        storage.append_lines(session, _lines([value]))
                    except ValueError:
                        break
        session.refresh_from_db()
        stored = list(Entry.objects.filter(session=session).values_list("entry_id", flat=True))
        type(self).answered += assert_chains_agree(session, _pairs(stored, seed))
        session.delete()


class RawRows(HypothesisTestCase):
    """Entry rows the import would refuse (self-parents, dangling and later parents, loops:
    entries in no segment), placed by the backfill and by appends."""

    answered = 0

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        assert cls.answered > 50, "the chains hardly ever answered"

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(records(), st.integers(0, 24), st.integers(0, 10**6))
    def test_raw(self, rows, cut, seed):
        ids = [eid for eid, _parent in rows]
        cut = min(cut, len(rows))
        session = _store_rows(rows[:cut], "s-grown") if cut else _store_rows(rows)
        segment_store.rebuild_segments(session.pk)
        if cut:
            _append_rows(session, rows[cut:], cut)
        session.entry_count = len(rows)
        session.save(update_fields=["entry_count"])
        type(self).answered += assert_chains_agree(session, _pairs(ids, seed))
        session.delete()


def _branched(make_session: Any, tmp_path: Any) -> tuple[Session, list[tuple[str, str, str]]]:
    path = generate_session(
        tmp_path / "s.jsonl", entries=600, branch_points=8, seed=5, compact_after=20_000
    )
    session = make_session(path.read_bytes())
    ids = list(Entry.objects.filter(session=session).values_list("entry_id", flat=True))
    return session, [(a, b, c) for a, b, c in _pairs(ids, 7, 20) if c]


def test_a_generated_session_with_branches_and_compactions(make_session, tmp_path):
    session, pairs = _branched(make_session, tmp_path)
    assert assert_chains_agree(session, pairs) >= len(pairs) - 1


@pytest.mark.parametrize("shift", [-1, 1])
def test_an_ancestor_one_entry_off_fails(make_session, tmp_path, shift):
    """The property is not vacuous: the chains' ancestor moved by one entry changes what
    Compare shows for some pair of the generated session."""
    session, pairs = _branched(make_session, tmp_path)
    real = route_parts.ancestor_depth

    def off(x, y):
        k = real(x, y)
        return max(-1, min(k + shift, x.end, y.end))

    with mock.patch.object(route_parts, "ancestor_depth", off), pytest.raises(AssertionError):
        assert_chains_agree(session, pairs)


def test_a_long_part_is_read_as_rows_only_where_the_page_lists_or_aligns(
    make_session, tmp_path, monkeypatch
):
    """The parts after the ancestor are summed from sparse rows (``SparseTail``): full rows
    are built only for the live ranges and the listed newest entries, never for a whole
    part, and the answer stays the walked one (with a short listing, so the parts are
    longer than what is read)."""
    from explorer.queries import chain_context, compare_tails

    session, pairs = _branched(make_session, tmp_path)
    monkeypatch.setattr(compare, "ROUTE_SHOWN", 5)
    built: list[int] = []
    lives: list[int] = []
    real_rows, real_live_range = compare_tails.tail_rows, chain_context.live_range

    def counted(route, low, high):
        rows = real_rows(route, low, high)
        built.append(len(rows))
        return rows

    def live(session, route, prefix, tail):
        out = real_live_range(session, route, prefix, tail)
        lives.append(len(out))
        return out

    monkeypatch.setattr(compare_tails, "tail_rows", counted)
    monkeypatch.setattr(chain_context, "live_range", live)
    longer = 0
    for a, b, cursor in pairs:
        built.clear()
        lives.clear()
        shown = compare._compare_by_chains(session, a, b, cursor)
        if shown is None:
            continue
        assert shown == compare.compare_walked(session, a, b, cursor), (a, b, cursor)
        assert sum(built) <= sum(lives) + 2 * 5, (a, b, cursor)
        longer += shown["len_a"] + shown["len_b"] > sum(built) + 20
    assert longer, "no pair's parts were longer than what was read"
