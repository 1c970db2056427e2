"""Raw vs projected: an alignment extended after an append equals a fresh one.

``align_projection`` keeps the rows of an alignment of the route before an append when the
appended entries cannot change them, and aligns only those entries; the view and its
summary must still be exactly what a fresh alignment gives.
"""

from __future__ import annotations

import copy
import json

from benchmarks.gen_session import generate_session
from explorer.analysis import projection as analysis
from explorer.analysis.projection import align_projection, summarize_view
from explorer.session.tokens import CompactionSettings

# --- the engine-side alignment alone -------------------------------------------------------


def _route(tmp_path) -> list[dict]:
    from explorer.session.context import build_session_path

    src = generate_session(tmp_path / "r.jsonl", entries=1000, branch_points=4, seed=5)
    lines = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    return build_session_path([e for e in lines if e.get("type") != "session"])


def test_align_projection_reuse_equals_a_fresh_alignment_at_every_prefix(tmp_path):
    route = _route(tmp_path)
    first = 380  # every prefix from here on: the route's compaction and an edit follow
    kinds = {e.get("type") for e in route[first:]}
    assert {"compaction", "context_edit", "message"} <= kinds
    settings = CompactionSettings(reserve_tokens=16_384)
    prev = align_projection(route[:first], context_window=60_000, settings=settings)
    prev_rows = summarize_view(prev, prev.rows)["rows"]
    reused = 0
    for k in range(first + 1, len(route) + 1):
        path = route[:k]
        fresh = align_projection(path, context_window=60_000, settings=settings)
        ext = align_projection(path, context_window=60_000, settings=settings, reuse=prev)
        assert ext == fresh, k
        if ext.rows[0] is prev.rows[0]:
            reused += 1
            assert analysis._appendable(path[-1])
        summary = summarize_view(ext, ext.rows, (prev.rows, prev_rows))
        assert summary == summarize_view(fresh, fresh.rows), k
        prev, prev_rows = ext, summary["rows"]
    assert reused > (len(route) - first) // 2  # most appends are plain messages


def test_reuse_is_refused_when_the_rows_are_not_of_this_path(tmp_path):
    route = _route(tmp_path)[:300]
    old = align_projection(route[:-1])
    # The same entries, but other objects: the kept rows are not trusted.
    copied = copy.deepcopy(route)
    copied[10]["message"] = {"role": "user", "content": "changed"}
    view = align_projection(copied, reuse=old)
    assert view == align_projection(copied)
    assert view.rows[0] is not old.rows[0]
    # A longer kept view than the path, or none: a fresh alignment.
    assert align_projection(route[:50], reuse=old) == align_projection(route[:50])
