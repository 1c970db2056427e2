"""The timeline's one-walk figures against the engine's answer per prefix, and a timeline
extended after an append against a fresh build."""

from __future__ import annotations

import json

from benchmarks.gen_session import generate_session
from explorer.analysis.timeline import (
    TimelineState,
    extend_timeline,
    sampled_points,
    timeline,
)
from explorer.session.context import build_session_path, projection_from_path
from explorer.session.describe import finite
from explorer.session.tokens import estimate_projected_context


def _route(tmp_path, entries: int = 4000) -> list[dict]:
    path = generate_session(tmp_path / "s.jsonl", entries=entries, branch_points=20, seed=5)
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    body = [e for e in lines if e.get("type") != "session"]
    return build_session_path(body)


def test_points_are_the_engine_estimate_of_each_prefix(tmp_path):
    route = _route(tmp_path)
    kinds = {e.get("type") for e in route}
    assert {"compaction", "context_edit"} <= kinds  # the route exercises both
    points, marks = timeline(route)
    assert 100 < len(points) <= 241
    assert {m.kind for m in marks} >= {"compaction", "edit"}
    for p in points:
        prefix = route[: p.index + 1]
        expected = estimate_projected_context(projection_from_path(prefix), prefix).tokens
        assert p.projected == int(finite(expected)), p
        assert p.entry_id == route[p.index]["id"]


def test_extending_after_an_append_equals_a_fresh_build(tmp_path):
    route = _route(tmp_path, 2500)
    fresh = extend_timeline(TimelineState(), route)
    for cut in (1, len(route) // 3, len(route) - 1):
        grown = extend_timeline(TimelineState(), route[:cut])
        before = list(grown.points)
        extend_timeline(grown, route[cut:])
        assert grown.points[: len(before)] == before
        assert grown.points == fresh.points
        assert grown.marks == fresh.marks
    assert sampled_points(fresh.points, 50)[-1] == fresh.points[-1]
    assert len(sampled_points(fresh.points, 50)) <= 51
