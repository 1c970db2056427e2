"""The timeline's one-walk figures against the engine's answer per prefix, and a timeline
extended after an append against a fresh build."""

from __future__ import annotations

import json

from benchmarks.gen_session import generate_session
from explorer.analysis.timeline import (
    PENDING,
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
    assert len(sampled_points(fresh.points, 50)) <= 52  # 50 spread evenly, the last, the peak


def _reply(text: str) -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "provider": "p",
        "model": "m",
        "usage": {"input": 900, "output": 5, "cacheRead": 0, "cacheWrite": 0},
        "stopReason": "stop",
        "timestamp": 1_760_000_000_000,
    }


def test_an_append_at_the_tip_extends_the_kept_timeline(db, make_session):
    from django.core.cache import cache

    from explorer import queries, services

    session = make_session()
    leaf = queries.default_leaf_id(session)
    before = queries.timeline_figures(session, leaf)
    (kept,) = queries._session_timelines(session)
    route = queries.light_path(session, leaf)
    first_user = next(e.entry_id for e in route if e.type == "message")
    services.append_message(session, None, _reply("x" * 400), leaf_id=leaf)
    services.add_context_edit(
        session, None, first_user, None, leaf_id=queries.default_leaf_id(session)
    )
    services.append_message(session, None, _reply("done"), leaf_id=queries.default_leaf_id(session))
    tip = queries.default_leaf_id(session)
    after = queries.timeline_figures(session, tip)
    # The kept figures were extended by the three entries, not built again.
    assert queries._session_timelines(session) == [kept]
    assert kept.fed == len(queries.light_path(session, tip)) == len(route) + 3
    assert after["points"][: len(before["points"])] == before["points"]
    assert len(after["points"]) == len(before["points"]) + 2
    assert after["marks"][-1].kind == "edit"
    cache.clear()  # forget everything: a fresh build gives the same figures
    fresh = queries.timeline_figures(session, tip)
    assert queries._session_timelines(session) != [kept]
    assert fresh == after


def test_the_window_start_moves_in_steps():
    from explorer.queries.timeline import TIMELINE_MAX_PATH, TIMELINE_STEP, timeline_window

    assert timeline_window(TIMELINE_MAX_PATH) == 0
    assert timeline_window(TIMELINE_MAX_PATH + 1) == TIMELINE_STEP
    assert timeline_window(TIMELINE_MAX_PATH + TIMELINE_STEP - 1) == TIMELINE_STEP
    assert timeline_window(TIMELINE_MAX_PATH + TIMELINE_STEP) == 2 * TIMELINE_STEP
    for n in range(TIMELINE_MAX_PATH + 1, TIMELINE_MAX_PATH + 3 * TIMELINE_STEP, 97):
        assert TIMELINE_MAX_PATH - TIMELINE_STEP < n - timeline_window(n) <= TIMELINE_MAX_PATH


def test_a_route_with_a_repeated_id_computes_only_the_turns_shown(tmp_path):
    route = [dict(e) for e in _route(tmp_path, 1500)]
    route[len(route) // 2]["id"] = route[3]["id"]  # the engine's per-prefix answer from here
    state = extend_timeline(TimelineState(), route)
    assert state.run.exact
    pending = [p for p in state.points if p.projected == PENDING]
    assert pending and pending[0].index > len(route) // 2
    points, _marks = timeline(route, max_points=40)
    assert all(p.projected != PENDING for p in points)
    for p in points:
        prefix = route[: p.index + 1]
        expected = estimate_projected_context(projection_from_path(prefix), prefix).tokens
        assert p.projected == int(finite(expected))
