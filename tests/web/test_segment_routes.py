"""Routes read from the stored segments (``queries.segment_routes``) are the walked routes.

For every entry of generated sessions (late parents, dangling parents, parent loops,
repeated ids refused), imported in small batches, grown and appended to line by line, and
of Pi's own files and generated sessions with branches and compactions: the segments'
answer, when they give one, equals the walk up the parent links (``routes._walk_up``),
and they give one for every entry of a well-formed session. ``light_path`` uses it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase as HypothesisTestCase

from benchmarks.gen_session import generate_session
from explorer import services, storage
from explorer.files import store as files_store
from explorer.models import Entry, Session
from explorer.queries import routes, segment_routes
from tests.conftest import pi_fixture_files
from tests.session.test_route_figures import sessions

HEADER = b'{"type":"session","version":3,"id":"s-routes","timestamp":"t","cwd":"/w"}\n'


def _lines(entries: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in entries)


def assert_routes(session: Session) -> tuple[int, int]:
    """(entries, of them answered by the segments): each answer is the walk's."""
    session.refresh_from_db()
    ids = Entry.objects.filter(session=session).values_list("entry_id", flat=True)
    answered = 0
    for entry_id in ids:
        walked = routes._walk_up(session, entry_id, session.entry_count + 1)
        read = segment_routes.segment_route(session, entry_id)
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


@pytest.mark.django_db
def test_light_path_reads_the_segments_and_walks_where_they_do_not_settle(tmp_path):
    """A loop below a root (no segment there): the walk answers; elsewhere the segments."""
    msg = lambda i, parent: {  # noqa: E731
        "type": "message", "id": f"m{i}", "parentId": parent, "timestamp": "t",
        "message": {"role": "user", "content": f"m{i}"},
    }  # fmt: skip
    session = services.import_bytes(
        HEADER + _lines([msg(0, None), msg(1, "m0"), msg(2, "m1"), msg(3, "m0")])
    ).session
    walked: list[str] = []
    real = routes._walk_up

    def walk(session, entry_id, limit):
        walked.append(entry_id)
        return real(session, entry_id, limit)

    with mock.patch.object(routes, "_walk_up", walk):
        routes._ROUTES.clear()
        assert [e.entry_id for e in routes.light_path(session, "m3")] == ["m0", "m3"]
        routes._ROUTES.clear()
        assert [e.entry_id for e in routes.light_path(session, "m2")] == ["m0", "m1", "m2"]
    assert walked == []
    with mock.patch.object(segment_routes, "segment_route", lambda s, e: None):
        routes._ROUTES.clear()
        assert [e.entry_id for e in routes.light_path(session, "m2")] == ["m0", "m1", "m2"]


@pytest.mark.django_db
def test_branches_far_apart_in_the_file_are_walked():
    """A branch whose entries lie far apart in the file (ranges much larger than the
    route): the segments decline, the walk answers."""
    msg = lambda i, parent: {  # noqa: E731
        "type": "message", "id": f"m{i}", "parentId": parent, "timestamp": "t",
        "message": {"role": "user", "content": f"m{i}"},
    }  # fmt: skip
    # Two chains interleaved line by line: each segment's range holds the other's entries.
    entries = [msg(0, None)]
    for i in range(1, 400):
        entries.append(msg(i, f"m{i - 2}" if i > 2 else "m0"))
    session = services.import_bytes(HEADER + _lines(entries)).session
    with (
        mock.patch.object(segment_routes, "SLACK", 0),
        mock.patch.object(segment_routes, "SPREAD", 1),
    ):
        assert segment_routes.segment_route(session, "m399") is None
    assert segment_routes.segment_route(session, "m399") is not None
    assert assert_routes(session)[1] == 400


@pytest.mark.pi_fixtures
@pytest.mark.django_db
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_pi_files(path: Path):
    session = services.import_bytes(path.read_bytes(), source_path=str(path)).session
    total, answered = assert_routes(session)
    assert answered == total
