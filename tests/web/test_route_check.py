"""The on-route check of a context edit (``explorer.route_check``) gives the route walk's
answer whichever way it is reached: the stored segments, a short walk down the depth column,
or the whole route read again; across compactions, on other branches, and on entry rows the
import would refuse (loops, dangling and later parents)."""

from __future__ import annotations

import random

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis.extra.django import TestCase as HypothesisTestCase

from benchmarks.gen_session import generate_session
from explorer import queries, route_check, segment_store, services
from explorer.models import Entry, SegmentEntry
from explorer.queries import routes as route_queries
from explorer.session.errors import SessionError
from tests.web.test_segments import _store_rows, records

pytestmark = pytest.mark.django_db


@pytest.fixture
def branchy(make_session, tmp_path):
    path = generate_session(
        tmp_path / "branchy.jsonl", entries=1200, branch_points=12, seed=5, compact_after=40_000
    )
    return make_session(path.read_bytes())


def _forget_routes() -> None:
    with route_queries._ROUTES_LOCK:
        route_queries._ROUTES.clear()


def _route(session, leaf: str) -> list[str]:
    return [e.entry_id for e in route_queries.light_path(session, leaf)]


@pytest.mark.parametrize("short_walk", [None, 0, 5, 10_000])
def test_the_answer_is_the_route_walks_whatever_way_it_is_reached(branchy, monkeypatch, short_walk):
    """``None``: the segments answer; else they are set aside and the depth column (with
    walks of at most ``short_walk`` links) or the whole route does."""
    if short_walk is not None:
        monkeypatch.setattr(route_check, "SHORT_WALK", short_walk)
        monkeypatch.setattr(segment_store, "on_route", lambda *a: None)
    leaves = [c["id"] for c in queries.leaf_choices(branchy)][:4]
    routes = {leaf: _route(branchy, leaf) for leaf in leaves}
    ids = list(Entry.objects.filter(session=branchy).values_list("entry_id", flat=True))
    rng = random.Random(7)
    checked = {True: 0, False: 0}
    for leaf in leaves:
        on = set(routes[leaf])
        # On the route (near the leaf and far up), elsewhere, and unknown ids.
        sample = routes[leaf][-3:] + rng.sample(routes[leaf], 20) + rng.sample(ids, 40)
        for cold in (True, False):
            for target in [*sample, "no-such-entry"]:
                if cold:
                    _forget_routes()
                got = route_check.on_route(branchy, target, leaf)
                assert got == (target in on), (target, leaf, cold)
                checked[got] += 1
    assert checked[True] > 50 and checked[False] > 50


def test_a_target_before_a_compaction_is_on_the_route(branchy, editor_user):
    leaf = queries.default_leaf_id(branchy)
    route = _route(branchy, leaf)
    types = dict(
        Entry.objects.filter(session=branchy, entry_id__in=route).values_list("entry_id", "type")
    )
    compaction = next(i for i, e in enumerate(route) if types[e] == "compaction")
    before = next(
        e.entry_id
        for e in Entry.objects.filter(
            session=branchy, entry_id__in=route[:compaction], type="message"
        ).order_by("-position")
        if e.role in ("user", "assistant")
    )
    _forget_routes()
    assert route_check.on_route(branchy, before, leaf)
    _forget_routes()
    edit = services.add_context_edit(branchy, editor_user, before, None, leaf_id=leaf).entry
    assert edit.parent_id == leaf and edit.data()["targetId"] == before


def test_an_edit_off_the_route_is_refused_with_a_cold_and_a_warm_memo(branchy, editor_user):
    leaves = [c["id"] for c in queries.leaf_choices(branchy)]
    a = leaves[0]
    on_a = set(_route(branchy, a))
    b = next(x for x in leaves[1:] if x not in on_a)
    target = next(
        e.entry_id
        for e in Entry.objects.filter(
            session=branchy, entry_id__in=[x for x in _route(branchy, b) if x not in on_a]
        )
        if e.type == "message" and e.role in ("user", "assistant")
    )
    count = Entry.objects.filter(session=branchy).count()
    for cold in (True, False):
        if cold:
            _forget_routes()
        with pytest.raises(SessionError, match="not on the active branch"):
            services.add_context_edit(branchy, editor_user, target, None, leaf_id=a)
    assert Entry.objects.filter(session=branchy).count() == count


def test_the_segments_answer_without_walking_the_route(branchy):
    """On a session an agent wrote, the check reads the two entries' places and the leaf's
    chain of segments: no walk over parent links, however far up the target is."""
    leaf = queries.default_leaf_id(branchy)
    route = _route(branchy, leaf)
    _forget_routes()
    for target in (route[0], route[len(route) // 2], "no-such-entry"):
        with CaptureQueriesContext(connection) as queries_run:
            got = route_check.on_route(branchy, target, leaf)
        assert got == (target in route)
        walks = [q["sql"] for q in queries_run.captured_queries if "walk" in q["sql"]]
        assert walks == [], walks
    assert segment_store.on_route(branchy, route[0], leaf) is True


class RawRows(HypothesisTestCase):
    """Entry rows with self-parents, dangling and later parents and loops (which the import
    refuses), as the segment backfill places them: the segments' answer is the route walk's,
    and they give one whenever both entries are in the tree (loops elsewhere or not)."""

    @settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
    @given(records())
    def test_raw(self, rows):
        session = _store_rows(rows)
        session.entry_count = len(rows)  # the route walk's bound, as the import sets it
        session.save(update_fields=["entry_count"])
        segment_store.rebuild_segments(session.pk)
        ids = [eid for eid, _parent in rows]
        out = set(
            SegmentEntry.objects.filter(session=session, segment=None).values_list(
                "entry__entry_id", flat=True
            )
        )
        for leaf in ids:
            # The walk over parent links is the reference (light_path reads the segments).
            on = {e.entry_id for e in route_queries._walk_up(session, leaf, len(rows) + 1)}
            for target in [*ids, "gone"]:
                settled = segment_store.on_route(session, target, leaf)
                if target == "gone" or target in out or leaf in out:
                    assert settled is None
                else:
                    assert settled == (target in on), (rows, target, leaf)
        session.delete()
