"""The Tree tab's fold made from the segments (``explorer.session.segfold`` over
``explorer.queries.tree_segments``) equals ``fold_tree`` on the whole skeleton: for every
leaf as the cursor (and no cursor), with small and usual budgets, labels, pins, unfolded
chains and ``root=`` subtrees, on generated sessions (branches, compactions, late and
dangling parents), raw rows with loops and the Pi fixtures. And it reads only the
segments the walk enters.

Not compared: ``root=`` an entry inside a parent loop (rows the import refuses): such an
entry is in no segment, so that view draws the whole tree, where ``fold_tree`` drew the loop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis.extra.django import TestCase as HypothesisTestCase

from explorer import segment_store, services
from explorer.models import Entry, Session
from explorer.queries.tree_segments import segment_tree
from explorer.session.graph import FoldedGraph, GraphNode, TreeShape, fold_tree
from explorer.session.segfold import fold_segments
from tests.conftest import SMALL_SESSION, pi_fixture_files
from tests.session.test_route_figures import sessions
from tests.web.test_segments import HEADER, _lines, _store_rows, records


def flat(graph: FoldedGraph) -> tuple:
    return (
        [(i.key, i.kind, i.entry_id, i.parent_key, i.count, i.last_id, i.node, i.active,
          i.leaves, i.side_branches, i.merged, i.user_turns, [c.key for c in i.children])
         for i in graph.items],
        [r.key for r in graph.roots],
        graph.total_entries,
        graph.truncated,
    )  # fmt: skip


def assert_folds(session: Session, *, every: int = 1, budgets: tuple[int, ...] = (5, 80)) -> int:
    """Compare the two folds over the session's leaves (every ``every``-th); return how many
    views were compared."""
    rows = list(
        Entry.objects.filter(session=session)
        .order_by("position")
        .values_list("entry_id", "parent_id", "type", "role")
    )
    shape = TreeShape.build(rows)
    ids = [r[0] for r in rows]
    labels = {eid: f"label {k}" for k, eid in enumerate(ids) if k % 7 == 3}
    archived = frozenset(ids[k] for k in range(0, len(ids), 11))

    def marks_of(eid: str) -> frozenset[str]:
        return frozenset({"archived"}) if eid in archived else frozenset()

    nodes = [GraphNode(r[0], r[1], r[2], r[3] or None, labels.get(r[0]), flags=marks_of(r[0]))
             for r in rows]  # fmt: skip
    reached = set(shape.sizes)
    leaves = [eid for eid in ids if eid in reached and not shape.children.get(eid)]
    cursors: list[str | None] = [None, *leaves[::every]]
    branch_points = [p for p, kids in shape.children.items() if len(kids) > 1 and p in reached]
    compared = 0
    for cursor in cursors:
        path: list[str] = []
        if cursor is not None:
            path = [cursor]
            while path[-1] in shape.parent:
                path.append(shape.parent[path[-1]])
            path.reverse()
        views: list[dict[str, Any]] = [{"max_nodes": n} for n in budgets]
        views.append({"max_nodes": 80, "pinned": sorted(archived)})
        views.append({"max_nodes": 80, "expanded": path[1::3]})
        if cursor is None:
            views += [{"max_nodes": 80, "root_id": b} for b in branch_points[:6]]
            views += [{"max_nodes": 4, "root_id": b} for b in ids[::5] if b in reached]
        for view in views:
            want = fold_tree(nodes, active_path=path, cursor_id=cursor, **view)
            tree = segment_tree(session, labels, marks_of)
            got = fold_segments(tree, active_path=path, cursor_id=cursor, **view)
            assert flat(got) == flat(want), (cursor, view)
            if not view.get("root_id"):
                kept = fold_tree(nodes, active_path=path, cursor_id=cursor, shape=shape, **view)
                assert flat(kept) == flat(want)
            compared += 1
    return compared


@pytest.mark.django_db
def test_the_small_session_and_its_appends():
    session = services.import_bytes(SMALL_SESSION).session
    assert assert_folds(session) > 10
    services.set_label(session, None, "b2c3d4e5", "look")
    services.append_message(
        session, None, {"role": "user", "content": "and now?", "timestamp": 1}, leaf_id="e5f6a7b8"
    )
    assert assert_folds(session) > 10


@pytest.mark.pi_fixtures
@pytest.mark.django_db
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_pi_files(path: Path):
    session = services.import_bytes(path.read_bytes(), source_path=str(path)).session
    assert assert_folds(session, budgets=(12, 80, 250)) > 5


@pytest.mark.django_db
def test_a_fold_reads_the_segments_it_walks_not_every_entry():
    """A long session with a side branch: folding at the main leaf reads the segment rows,
    and of the route's members and the side branch's those that can stop a folded chain,
    in a handful of queries, and no raw line."""
    msg = lambda i, parent, role="assistant": {  # noqa: E731
        "type": "message", "id": f"m{i}", "parentId": parent, "timestamp": "t",
        "message": {"role": role, "content": "x", "timestamp": 1},
    }  # fmt: skip
    entries = [msg(0, None, "user")] + [msg(i, f"m{i - 1}") for i in range(1, 300)]
    entries += [msg(300 + k, "m10" if k == 0 else f"m{299 + k}") for k in range(40)]
    session = services.import_bytes(HEADER + _lines(entries)).session
    tree = segment_tree(session, {}, lambda _e: frozenset())
    with CaptureQueriesContext(connection) as queries:
        path = segment_store.SegmentTree(session).route_ids("m299")
        graph = fold_segments(tree, active_path=path, cursor_id="m299", max_nodes=80)
    assert len(queries) <= 9
    # The plain runs between the chain's stops stay unread: of 340 entries, the stops
    # (heads, tails, the branch point, the user message, the cursor) and their neighbours.
    assert 10 < len(tree.nodes) < 30
    assert not any("raw" in q["sql"] for q in queries.captured_queries)
    assert [i.kind for i in graph.items] == [
        "entry",
        "chain",
        "entry",
        "chain",
        "entry",
        "chain",
        "entry",
    ]


class GeneratedSessions(HypothesisTestCase):
    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(sessions())
    def test_generated(self, entries):
        dicts = [e for e in entries if isinstance(e, dict)]
        ids = [e.get("id") for e in dicts]
        if len(dicts) != len(entries) or not all(isinstance(i, str) for i in ids):
            return
        if len(set(ids)) != len(ids):
            return
        result = services.import_bytes(HEADER + _lines(dicts))
        if result.session is None or not Entry.objects.filter(session=result.session).exists():
            return
        assert_folds(result.session, budgets=(3, 8, 80))
        result.session.delete()

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(records())
    def test_raw_rows_with_loops(self, rows):
        session = _store_rows(rows)
        segment_store.rebuild_segments(session.pk)
        assert_folds(session, budgets=(2, 6, 80))
        session.delete()


def test_a_session_of_one_parent_loop_folds_as_the_reference(db):
    """Every entry in one loop, so no segment and a counter never set (found by the property
    test above on one run): the fold still counts the two entries, as the reference does."""
    session = _store_rows([("e0", "e1"), ("e1", "e0")])
    segment_store.rebuild_segments(session.pk)
    assert assert_folds(session, budgets=(2, 6, 80)) > 0


def _cold() -> None:
    """A new worker: no shared cache, no copies of its own."""
    from django.core.cache import cache

    from explorer import queries, shared_copies

    shared_copies.flush()
    cache.clear()
    queries._GROWN.clear()


def _long_session() -> Session:
    """2,000 entries: a long route with user turns, two side branches."""
    msg = lambda i, parent, role="assistant": {  # noqa: E731
        "type": "message", "id": f"m{i}", "parentId": parent, "timestamp": "t",
        "message": {"role": role, "content": f"text {i}", "timestamp": 1},
    }  # fmt: skip
    entries = [msg(0, None, "user")]
    entries += [msg(i, f"m{i - 1}", "user" if i % 10 == 0 else "assistant") for i in range(1, 1900)]
    entries += [msg(1900 + k, "m50" if k == 0 else f"m{1899 + k}") for k in range(50)]
    entries += [msg(1950 + k, "m700" if k == 0 else f"m{1949 + k}") for k in range(50)]
    return services.import_bytes(HEADER + _lines(entries)).session


@pytest.mark.parametrize("url", ["explorer:session_detail", "explorer:graph_svg"])
def test_a_cold_tree_request_writes_nothing_and_parses_only_what_it_shows(
    viewer_client, monkeypatch, url
):
    from django.urls import reverse

    from explorer.queries import entries as entry_queries

    session = _long_session()
    _cold()
    parsed: list[str] = []
    real = entry_queries._parse_into
    monkeypatch.setattr(
        entry_queries, "_parse_into", lambda out, eid, *a: parsed.append(eid) or real(out, eid, *a)
    )
    from explorer.queries import skeleton

    def no_skeleton(*args: object) -> None:
        raise AssertionError("the whole skeleton was read")

    monkeypatch.setattr(skeleton, "_skeleton_rows", no_skeleton)
    with CaptureQueriesContext(connection) as queries:
        response = viewer_client.get(reverse(url, args=[session.pk]))
    assert response.status_code == 200
    sqls = [q["sql"].lstrip().upper() for q in queries.captured_queries]
    writes = [s for s in sqls if s.startswith(("INSERT", "UPDATE", "DELETE"))]
    assert writes == []
    # The stored lines parsed are the shown entries' (titles of the drawn items, the short
    # side chains the text tree lists), not the route's 1,900 nor the session's 2,000; an
    # entry inside the route's folded run is not read. (The SVG alone may come from the
    # drawing stored at the import: then nothing is parsed.)
    assert len(parsed) <= 300 and "m305" not in parsed
