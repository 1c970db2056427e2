"""The tree's segments (``explorer.segment_store``) describe exactly the tree the Tree tab
folds (``explorer.session.graph.TreeShape`` built from the entries' ids and parents).

After imports (in small batches, with late and dangling parents, grown by a second import),
after appends, after migration 0022 filled sessions stored at 0021, and for raw entry rows
with self-parents and parent loops (which the import refuses but the tree handles), the children lists and roots read back from the segments equal the shape's, for
every entry reachable from a root; the others (entries in or under a loop) have no segment.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.db import connection
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase as HypothesisTestCase

from explorer import route_store, segment_store, services
from explorer.files import store as files_store
from explorer.models import Entry, Segment, SegmentEntry, Session
from explorer.session.graph import TreeShape
from tests.conftest import SMALL_SESSION, pi_fixture_files
from tests.session.test_route_figures import sessions
from tests.web.migration_states import migration_states

HEADER = b'{"type":"session","version":3,"id":"s-segments","timestamp":"t","cwd":"/w"}\n'


def _lines(entries: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in entries)


def shape_of(session: Session) -> tuple[dict[str, list[str]], list[str]]:
    """The children lists and roots the Tree tab folds, for the entries reachable from a
    root (``TreeShape`` of the skeleton rows, in file order)."""
    rows = list(
        Entry.objects.filter(session=session)
        .order_by("position")
        .values_list("entry_id", "parent_id")
    )
    shape = TreeShape.build(rows)
    reached: set[str] = set()
    stack = list(shape.roots)
    while stack:
        nid = stack.pop()
        if nid in reached:
            continue
        reached.add(nid)
        stack.extend(shape.children.get(nid, ()))
    children = {p: list(k) for p, k in shape.children.items() if p in reached and k}
    return children, list(shape.roots)


def assert_segments(session: Session) -> int:
    """The segments give the shape's tree; every entry has one row; segments are chains."""
    expected = shape_of(session)
    got = segment_store.segment_children(session)
    assert got == expected
    assert (
        SegmentEntry.objects.filter(session=session).count()
        == Entry.objects.filter(session=session).count()
    )
    placed = set(
        SegmentEntry.objects.filter(session=session, segment__isnull=False).values_list(
            "entry__entry_id", flat=True
        )
    )
    reached = set(expected[1]) | {c for kids in expected[0].values() for c in kids}
    assert placed == reached
    for seg in Segment.objects.filter(session=session):
        offsets = sorted(SegmentEntry.objects.filter(segment=seg).values_list("offset", flat=True))
        assert offsets == list(range(seg.length))
        if seg.parent_segment_id is not None:
            parent = Segment.objects.get(pk=seg.parent_segment_id)
            assert seg.parent_offset is not None and 0 <= seg.parent_offset < parent.length
    assert_routes_and_sizes(session, placed)
    return len(placed)


def assert_routes_and_sizes(session: Session, placed: set[str]) -> None:
    """Every placed entry's route read from its segments is its walk up the parent links,
    and its subtree's (entries, leaves) from the segments is the shape's."""
    rows = list(
        Entry.objects.filter(session=session)
        .order_by("position")
        .values_list("entry_id", "parent_id")
    )
    shape = TreeShape.build(rows)
    tree = segment_store.SegmentTree(session)
    for eid in placed:
        walk = [eid]
        while walk[-1] in shape.parent:
            walk.append(shape.parent[walk[-1]])
        walk.reverse()
        assert tree.route_ids(eid) == walk
        spot = tree.place(eid)
        assert spot is not None and tree.size_at(*spot) == shape.sizes[eid]


def _branches(session: Session) -> int:
    """Entries with more than one child in the shape (what segments are about)."""
    return sum(1 for kids in shape_of(session)[0].values() if len(kids) > 1)


@pytest.mark.django_db
def test_the_small_session_and_its_appends():
    session = services.import_bytes(SMALL_SESSION).session
    assert assert_segments(session) == 8
    assert Segment.objects.filter(session=session).count() == 1 + _branches(session)
    services.set_label(session, None, "b2c3d4e5", "look")
    services.add_context_edit(session, None, "b2c3d4e5", {"content": "shorter"})
    services.append_message(
        session, None, {"role": "user", "content": "and now?", "timestamp": 1}, leaf_id="e5f6a7b8"
    )
    assert assert_segments(session) == 11


@pytest.mark.django_db
def test_an_append_grows_a_segment_without_touching_its_entries():
    """Appending below the tail extends the tail's segment (one length update), and its
    earlier entries' rows stay as they were."""
    session = services.import_bytes(SMALL_SESSION).session
    before = {
        r[0]: r[1:] for r in SegmentEntry.objects.filter(session=session).values_list(
            "entry_id", "segment_id", "offset")
    }  # fmt: skip
    segments = Segment.objects.filter(session=session).count()
    leaf = Entry.objects.filter(session=session).order_by("-position").first()
    assert leaf is not None
    services.append_message(
        session, None, {"role": "user", "content": "more", "timestamp": 1}, leaf_id=leaf.entry_id
    )
    after = {
        r[0]: r[1:] for r in SegmentEntry.objects.filter(session=session).values_list(
            "entry_id", "segment_id", "offset")
    }  # fmt: skip
    assert {k: after[k] for k in before} == before
    assert Segment.objects.filter(session=session).count() == segments
    assert_segments(session)


@pytest.mark.pi_fixtures
@pytest.mark.django_db
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_pi_files(path: Path):
    session = services.import_bytes(path.read_bytes(), source_path=str(path)).session
    assert assert_segments(session) > 100
    # About one segment per branch, not one per entry.
    assert Segment.objects.filter(session=session).count() <= 1 + 2 * _branches(session) + len(
        shape_of(session)[1]
    )


@pytest.mark.django_db
def test_a_grown_import_and_a_late_parent(monkeypatch):
    monkeypatch.setattr(files_store, "_BATCH_ROWS", 2)
    msg = lambda i, parent: {  # noqa: E731
        "type": "message", "id": f"m{i}", "parentId": parent, "timestamp": "t",
        "message": {"role": "user", "content": "x", "timestamp": 1},
    }  # fmt: skip
    first = [msg(0, None), msg(1, "m0"), msg(2, "m4"), msg(3, "m1"), msg(4, "m1"), msg(5, "gone")]
    data = HEADER + _lines(first)
    session = services.import_bytes(data).session
    assert assert_segments(session) == 6
    grown = data + _lines([msg(6, "m2"), msg(7, "m0"), msg(8, "m6")])
    services.import_bytes(grown)
    session.refresh_from_db()
    assert assert_segments(session) == 9
    # The parent m5 named arrives: m5 stops being a root (its segments are made again).
    assert Segment.objects.filter(session=session, missing_parent="gone").exists()
    services.import_bytes(grown + _lines([msg(9, "m8") | {"id": "gone"}]))
    assert assert_segments(session) == 10
    assert not Segment.objects.filter(session=session, missing_parent__isnull=False).exists()
    assert segment_store.segment_children(session)[1] == ["m0"]


def _store_rows(records: list[tuple[str, str | None]], name: str = "s-raw") -> Session:
    session = Session.objects.create(session_id=name, header_raw="{}")
    Entry.objects.bulk_create(
        Entry(
            session=session,
            entry_id=eid,
            parent_id=parent,
            type="message",
            position=k + 1,
            line_no=k + 2,
            raw=json.dumps({"type": "message", "id": eid, "parentId": parent}),
        )
        for k, (eid, parent) in enumerate(records)
    )
    return session


def _append_rows(session: Session, records: list[tuple[str, str | None]], start: int) -> None:
    """Rows appended after ``start`` and placed as an append places them."""
    writer = segment_store.SegmentWriter(session.pk)
    for k, (eid, parent) in enumerate(records):
        Entry.objects.create(
            session=session, entry_id=eid, parent_id=parent, type="message",
            position=start + k + 1, line_no=start + k + 2, raw="{}",
        )  # fmt: skip
        writer.add(eid, parent, start + k + 1)
    writer.finish()


IDS = [f"e{i}" for i in range(12)]


@st.composite
def records(draw):
    """(id, parent) in file order: self-parents, dangling and later parents, loops (ids are
    unique: the entry table's (session, id) key refuses a repeated one)."""
    ids = draw(st.permutations(IDS))[: draw(st.integers(1, len(IDS)))]
    return [(eid, draw(st.one_of(st.none(), st.sampled_from([*IDS, "gone"])))) for eid in ids]


def test_a_deliberate_loop():
    """No database: the reference shape itself leaves a loop unreached (what the writer's
    null segments stand for)."""
    shape = TreeShape.build([("a", None), ("b", "c"), ("c", "b"), ("d", "b")])
    assert shape.roots == ["a"] and shape.children.get("b") == ["c", "d"]


class RawRows(HypothesisTestCase):
    """Entry rows the import would refuse (loops) placed by the backfill, and
    the same rows split into a stored part and appends."""

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(records(), st.integers(0, 24))
    def test_raw(self, rows, cut):
        cut = min(cut, len(rows))
        session = _store_rows(rows)
        segment_store.rebuild_segments(session.pk)
        assert_segments(session)
        session.delete()
        grown = _store_rows(rows[:cut], "s-grown")
        segment_store.rebuild_segments(grown.pk)
        _append_rows(grown, rows[cut:], cut)
        assert_segments(grown)
        grown.delete()


class GeneratedSessions(HypothesisTestCase):
    """Generated sessions stored by the import (what it accepts), in small batches."""

    stored = 0

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        assert cls.stored > 20, "the generated sessions were hardly ever stored"

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(sessions(), st.sampled_from([None, 3, 1]))
    def test_generated(self, entries, batch):
        dicts = [e for e in entries if isinstance(e, dict)]
        ids = [e.get("id") for e in dicts]
        if len(dicts) != len(entries) or not all(isinstance(i, str) for i in ids):
            return
        if len(set(ids)) != len(ids):
            return
        with mock.patch.object(files_store, "_BATCH_ROWS", batch or files_store._BATCH_ROWS):
            result = services.import_bytes(HEADER + _lines(dicts))
        if result.session is None or not Entry.objects.filter(session=result.session).exists():
            return
        assert_segments(result.session)
        type(self).stored += 1
        result.session.delete()


@pytest.mark.django_db(transaction=True)
def test_migration_0022_fills_sessions_stored_at_0021():
    old = [("explorer", "0021_route_figures")]
    new = [("explorer", "0022_segments")]
    with migration_states() as migrate:
        apps = migrate(old)
        OldSession = apps.get_model("explorer", "Session")
        OldEntry = apps.get_model("explorer", "Entry")
        stored = OldSession.objects.create(session_id="s-0021", header_raw="{}")
        rows = [("a", None), ("b", "a"), ("c", "a"), ("late", "d"), ("d", "b"), ("e", "gone"),
                ("x", "y"), ("y", "x"), ("z", "x"), ("f", "b")]  # fmt: skip
        OldEntry.objects.bulk_create(
            OldEntry(session=stored, entry_id=eid, parent_id=parent, type="message",
                     position=k + 1, line_no=k + 2, raw="{}")
            for k, (eid, parent) in enumerate(rows)
        )  # fmt: skip
        migrate(new)
        migrate()  # today's code reads at the newest state only (Session has columns since)
        session = Session.objects.get(session_id="s-0021")
        assert assert_segments(session) == 7  # a b c late d e f; not the loop x y, nor z
        migrate(old)
        assert "explorer_segment" not in connection.introspection.table_names()


def test_route_store_hooks_the_writer():
    """The figures' writer drives the segments (imports, appends, grown imports)."""
    assert route_store.SegmentWriter is segment_store.SegmentWriter
