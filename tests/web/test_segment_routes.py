"""A route read from the stored segments (``segment_store.route_rows``, what ``light_path``
reads) is the walk up the parent links, entry for entry and in order: on entry rows the
import would refuse (self-parents, dangling and later parents, loops), on rows split into a
stored part and appends, and on generated sessions grown through the append services."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase as HypothesisTestCase

from benchmarks.gen_session import generate_session
from explorer import queries, segment_store, services, storage
from explorer.files import store as files_store
from explorer.models import Entry, SegmentEntry, Session
from explorer.queries import routes
from tests.conftest import pi_fixture_files
from tests.session.test_route_figures import sessions
from tests.web.test_segments import _append_rows, _store_rows, records

pytestmark = pytest.mark.django_db


def _forget_routes() -> None:
    with routes._ROUTES_LOCK:
        routes._ROUTES.clear()


def _walked(session, leaf: str) -> list[tuple]:
    rows = routes._walk_up(session, leaf, max(session.entry_count, 1) + 1)
    return [(e.entry_id, e.parent_id, e.type, e.position, e.pk) for e in rows]


def _read(session, leaf: str) -> list[tuple]:
    _forget_routes()
    rows = routes.light_path(session, leaf)
    return [(e.entry_id, e.parent_id, e.type, e.position, e.pk) for e in rows]


def _assert_routes(session, ids: list[str]) -> int:
    """Every id's route as ``light_path`` reads it equals the walk; returns how many the
    segments answered (the others are in no segment and fall back to the walk)."""
    unplaced = set(
        SegmentEntry.objects.filter(session=session, segment=None).values_list(
            "entry__entry_id", flat=True
        )
    )
    places = dict(
        SegmentEntry.objects.filter(session=session).values_list("entry__entry_id", "segment_id")
    )
    offsets = dict(
        SegmentEntry.objects.filter(session=session).values_list("entry__entry_id", "offset")
    )
    answered = 0
    for leaf in [*ids, "gone"]:
        assert _read(session, leaf) == _walked(session, leaf), leaf
        by_segments = segment_store.route_rows(session.pk, leaf, "e.entry_id")
        chain = segment_store.route_chain(session.pk, leaf)
        if leaf == "gone" or leaf in unplaced:
            assert by_segments == [] and chain is None
        else:
            walked = [r[0] for r in _walked(session, leaf)]
            assert [r[0] for r in by_segments] == walked
            # The chain alone says which entries are on the route (the Tree JSON's flags).
            marked = {
                eid
                for eid, seg in places.items()
                if seg is not None and chain.get(seg, -1) >= offsets[eid]
            }
            assert marked == set(walked), leaf
            answered += 1
    return answered


class RawRows(HypothesisTestCase):
    answered = 0

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        assert cls.answered > 100, "the segments hardly ever answered"

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(records(), st.integers(0, 24))
    def test_raw(self, rows, cut):
        ids = [eid for eid, _parent in rows]
        session = _store_rows(rows)
        session.entry_count = len(rows)
        session.save(update_fields=["entry_count"])
        segment_store.rebuild_segments(session.pk)
        RawRows.answered += _assert_routes(session, ids)
        session.delete()
        cut = min(cut, len(rows))
        grown = _store_rows(rows[:cut], "s-grown")
        segment_store.rebuild_segments(grown.pk)
        _append_rows(grown, rows[cut:], cut)
        grown.entry_count = len(rows)
        grown.save(update_fields=["entry_count"])
        _assert_routes(grown, ids)
        grown.delete()


def test_generated_session_grown_by_appends(make_session, tmp_path, editor_user):
    path = generate_session(
        tmp_path / "s.jsonl", entries=900, branch_points=10, seed=3, compact_after=30_000
    )
    session = make_session(path.read_bytes())
    leaves = [c["id"] for c in queries.leaf_choices(session)]
    # Appends on a side branch and at the tip go through the writers' segments.
    services.set_label(session, editor_user, leaves[-1], "side", leaf_id=leaves[-1])
    for leaf in leaves[:3]:
        message = {"role": "user", "content": "a note", "timestamp": 1}
        services.append_message(session, editor_user, message, leaf_id=leaf)
    session.refresh_from_db()
    ids = list(Entry.objects.filter(session=session).values_list("entry_id", flat=True))
    assert _assert_routes(session, ids[::7] + ids[-10:]) > 100
    # The stored depth counts the same route (the Live JSON's route length reads it).
    for leaf in [*ids[::5], *ids[-10:], "gone"]:
        assert queries.route_length(session, leaf) == len(_walked(session, leaf)), leaf


def test_a_cold_route_is_one_query_over_the_segments(make_session, tmp_path):
    path = generate_session(tmp_path / "s.jsonl", entries=600, branch_points=6, seed=9)
    session = make_session(path.read_bytes())
    leaf = queries.default_leaf_id(session)
    _forget_routes()
    with CaptureQueriesContext(connection) as run:
        route = routes.light_path(session, leaf)
    walks = [q["sql"] for q in run.captured_queries if "walk" in q["sql"]]
    assert walks == [] and len(route) > 50
    assert [e.entry_id for e in route] == [r[0] for r in _walked(session, leaf)]


def test_the_timelines_rows_are_the_walked_windows(make_session, tmp_path):
    """The Timeline reads its window's replies, marks and leaf through the route's segments
    and the stored depth: for every window start, the same rows as walking the route and
    looking the window's entries up."""
    from explorer.queries import timeline

    path = generate_session(
        tmp_path / "s.jsonl", entries=400, branch_points=5, seed=4, compact_after=20_000
    )
    session = make_session(path.read_bytes())
    leaves = [c["id"] for c in queries.leaf_choices(session)][:3]
    checked = marks = 0
    for leaf in leaves:
        route = routes.light_path(session, leaf)
        depth = routes.stored_depth(session, leaf)
        assert depth == len(route) - 1
        for start in range(0, len(route), 3):
            want = timeline._walked_rows(session, route, start)
            got = timeline._segment_rows(session, leaf, depth, start)
            assert got is not None
            # A reply other than the leaf comes without its id (read with its line if drawn).
            assert all(
                g[1] == "" and g[3] == "assistant"
                for g in got
                if g[1] != route[start + g[0]].entry_id
            )
            unnamed = [
                (w[0], "", *w[2:]) if w[3] == "assistant" and w is not want[-1] else w for w in want
            ]
            assert got == unnamed, (leaf, start)
            checked += len(want) > 1
            marks += any(r[2] in timeline._MARK_KINDS for r in want)
    assert checked > 50 and marks > 10
    assert routes.stored_depth(session, "gone") is None


# -- imported, grown and appended sessions; Pi's own files ---------------------------------

HEADER = b'{"type":"session","version":3,"id":"s-routes","timestamp":"t","cwd":"/w"}\n'


def _lines(entries: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in entries)


def assert_routes(session: Session) -> tuple[int, int]:
    """(entries, of them answered by the segments): each answer is the walk's (for the
    Pi files and generated sessions imported in batches, grown and appended to)."""
    session.refresh_from_db()
    ids = Entry.objects.filter(session=session).values_list("entry_id", flat=True)
    answered = 0
    for entry_id in ids:
        walked = routes._walk_up(session, entry_id, session.entry_count + 1)
        read = routes._segment_route(session, entry_id)
        if read is not None:
            assert read == walked, entry_id
            answered += 1
    return len(ids), answered


class GeneratedRoutes(HypothesisTestCase):
    stored = 0
    answered = 0

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        assert cls.stored > 20, "the generated sessions were hardly ever stored"
        assert cls.answered > 200, "the segments hardly ever answered"

    @settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
    @given(sessions(), st.sampled_from([None, 1, 3]), st.integers(0, 8))
    def test_imported_then_appended(self, entries, rows, appended):
        dicts = [e for e in entries if isinstance(e, dict)]
        ids = [e.get("id") for e in dicts]
        if len(dicts) != len(entries) or not all(isinstance(i, str) for i in ids):
            return
        if len(set(ids)) != len(ids):
            return
        head = max(1, len(dicts) - appended)
        with mock.patch.object(files_store, "_BATCH_ROWS", rows or files_store._BATCH_ROWS):
            result = services.import_bytes(HEADER + _lines(dicts[:head]))
        session = result.session
        if session is None or not Entry.objects.filter(session=session).exists():
            return
        for value in dicts[head:]:
            with transaction.atomic():
                try:
                    storage.append_lines(session, _lines([value]))
                except ValueError:
                    break
        _total, answered = assert_routes(session)
        type(self).answered += answered
        type(self).stored += 1
        session.delete()


@pytest.mark.django_db
def test_a_generated_session_with_branches_is_read_from_its_segments(tmp_path):
    path = generate_session(
        tmp_path / "r.jsonl", entries=900, branch_points=15, seed=4, compact_after=50_000
    )
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    session = services.import_bytes(b"".join(lines[: len(lines) // 2])).session
    services.import_bytes(data)  # grown
    total, answered = assert_routes(session)
    assert total == answered == 900


@pytest.mark.pi_fixtures
@pytest.mark.django_db
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_pi_files(path: Path):
    session = services.import_bytes(path.read_bytes(), source_path=str(path)).session
    total, answered = assert_routes(session)
    assert answered == total
