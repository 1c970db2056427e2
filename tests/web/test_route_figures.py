"""Compare reads stored rows (``queries.compare``): the common ancestor from the two
routes' index rows, each side's figures after it from the stored route figures and entry
costs, the projected estimates stored with each leaf. What it shows must be what parsing
both tails and both live ranges whole gives (the engine's figures), for every kind of pair
(siblings, a leaf and its own ancestor, the same leaf twice, different roots, Pi's own
files); and a cold Compare parses no line outside what the page lists and what the
projection difference aligns."""

from __future__ import annotations

import itertools
import json

import pytest

from benchmarks.gen_session import generate_session
from explorer import queries, services
from explorer.analysis.compare import (
    collapse_shared,
    common_ancestor_index,
    listed_lines,
    projection_diff,
)
from explorer.analysis.projection import projected_estimate
from explorer.session import exactsum
from explorer.session.describe import cost_of, files_touched, tool_calls_of, total_tokens_of
from tests.conftest import pi_fixture_files

pytestmark = pytest.mark.django_db


def _stats(entries: list[dict]) -> dict:
    """A tail's figures added up entry by entry, the plain way (the reference)."""
    files = files_touched(entries)
    return {
        "entries": len(entries),
        "messages": sum(1 for e in entries if e.get("type") == "message"),
        "tokens": sum((total_tokens_of(e) for e in entries), 0.0),
        # The engine's part cost: exactly summed, rounded once (``exactsum.total``; added
        # in route order it differed in the last bits, 0.44800699999999993 against 0.448007).
        "cost": exactsum.total(cost_of(e) for e in entries),
        "tool_calls": sum(len(tool_calls_of(e)) for e in entries),
        "files_read": files["read"],
        "files_modified": files["modified"],
    }


def _reference(session, a: str, b: str) -> dict:
    """The pair as parsing both routes whole gives it."""
    la, lb = queries.light_path(session, a), queries.light_path(session, b)
    k = common_ancestor_index([e.entry_id for e in la], [e.entry_id for e in lb])
    ra, rb = queries.full_path(session, la[k + 1 :]), queries.full_path(session, lb[k + 1 :])
    pa, _ = queries.context_path(session, la)
    pb, _ = queries.context_path(session, lb)
    diff = projection_diff(pa, pb)
    data = {e["id"]: e for e in (*ra, *rb)}
    return {
        "ancestor": la[k].entry_id if k >= 0 else None,
        "len_a": len(ra),
        "len_b": len(rb),
        "route_a": queries._route_rows(la[k + 1 :][-queries.ROUTE_SHOWN :], data, {}),
        "route_b": queries._route_rows(lb[k + 1 :][-queries.ROUTE_SHOWN :], data, {}),
        "stats_a": _stats(ra),
        "stats_b": _stats(rb),
        "projected_a": projected_estimate(pa),
        "projected_b": projected_estimate(pb),
        "diff": listed_lines(collapse_shared(diff), queries.DIFF_SHOWN),
        "diff_counts": {
            **{s: sum(1 for d in diff if d.side == s) for s in ("both", "a", "b")},
            "content": sum(1 for d in diff if d.source_b),  # shared by equal content
        },
    }


@pytest.fixture
def branched(make_session, tmp_path):
    # Compactions, context edits and branch summaries along routes of a few hundred entries.
    path = generate_session(
        tmp_path / "b.jsonl", entries=900, branch_points=12, seed=5, compact_after=60_000
    )
    return make_session(path.read_bytes())


def _edited(session, leaf: str) -> str:
    """A new leaf below ``leaf`` that hides one message of its live range and replaces
    another: the two routes then differ in what the model sees of shared entries."""
    from explorer import services

    live, _ = queries.context_light(session, queries.light_path(session, leaf))
    users = [e.entry_id for e in live if e.type == "message"]
    hidden = services.add_context_edit(session, None, users[-2], None, leaf_id=leaf)
    replacement = {"content": [{"type": "text", "text": "(shortened)"}]}
    replaced = services.add_context_edit(
        session, None, users[-4], replacement, leaf_id=hidden.entry.entry_id
    )
    session.refresh_from_db()
    return replaced.entry.entry_id


def test_every_pair_shows_what_parsing_both_routes_whole_shows(branched):
    """Siblings, edited routes, a leaf and its own ancestor, the same leaf twice: the
    figures read from stored rows are the engine's from both routes parsed whole."""
    leaves = [c["id"] for c in queries.leaf_choices(branched)]
    assert len(leaves) >= 6
    edited = _edited(branched, leaves[1])
    assert any(e.type == "compaction" for e in queries.light_path(branched, leaves[0]))
    route = queries.light_path(branched, leaves[0])
    inner = route[len(route) // 2].entry_id  # an entry on A's own route
    pairs = list(itertools.combinations(leaves[:6], 2)) + [
        (leaves[1], edited),
        (edited, leaves[0]),
        (leaves[0], leaves[0]),
        (leaves[0], inner),
        (inner, leaves[0]),
    ]
    for a, b in pairs:
        shown = queries.compare_routes(branched, a, b, leaves[0])
        want = _reference(branched, a, b)
        assert {k: shown[k] for k in want} == want, (a, b)
    # The edits show: the edited route's context differs from its parent's in two lines.
    counts = queries.compare_routes(branched, leaves[1], edited, leaves[0])["diff_counts"]
    assert counts["a"] == 2 and counts["b"] == 1, counts


def test_an_id_no_entry_has_compares_as_an_empty_route(branched):
    leaf = queries.default_leaf_id(branched)
    shown = queries.compare_routes(branched, leaf, "no-such-id", leaf)
    assert shown["ancestor"] is None and shown["len_b"] == 0 and shown["route_b"] == []
    assert shown["stats_b"]["entries"] == 0 and shown["diff_counts"]["b"] == 0
    assert shown["len_a"] == len(queries.light_path(branched, leaf))


def _pairs(session, n: int = 6) -> list[tuple[str, str]]:
    leaves = [c["id"] for c in queries.leaf_choices(session)][:n]
    route = queries.light_path(session, leaves[0])
    inner = route[len(route) // 2].entry_id
    return [*itertools.combinations(leaves, 2), (leaves[0], inner), (inner, leaves[0])]


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_pairs_of_pi_s_own_files_show_the_engine_s_figures(path):
    session = services.import_bytes(path.read_bytes(), source_path=str(path)).session
    for a, b in _pairs(session):
        shown = queries.compare_routes(session, a, b, a)
        want = _reference(session, a, b)
        assert {k: shown[k] for k in want} == want, (a, b)


@pytest.mark.parametrize("seed", [1, 2, 7])
def test_pairs_of_generated_sessions_show_the_engine_s_figures(make_session, tmp_path, seed):
    path = generate_session(
        tmp_path / "g.jsonl", entries=600, branch_points=10, seed=seed, compact_after=40_000
    )
    session = make_session(path.read_bytes())
    for a, b in _pairs(session, 5):
        shown = queries.compare_routes(session, a, b, b)
        want = _reference(session, a, b)
        assert {k: shown[k] for k in want} == want, (seed, a, b)


def test_a_cold_compare_parses_only_what_it_lists_or_aligns(branched, monkeypatch):
    """Every line a cold Compare parses is one it lists (the newest ROUTE_SHOWN of each
    tail, the ancestor), one the projection difference aligns (each leaf's live range) or
    a reply whose tool calls name the files: no tool result or message outside those."""
    from django.core.cache import cache

    from explorer.queries import entries

    leaves = [c["id"] for c in queries.leaf_choices(branched)]
    a, b = leaves[0], leaves[3]
    monkeypatch.setattr(queries.compare, "ROUTE_SHOWN", 5)
    parsed: list[str] = []
    real = entries.jsonfmt.loads

    def loads(raw, *args, **kwargs):
        value = real(raw, *args, **kwargs)
        if isinstance(value, dict):
            parsed.append(str(value.get("id")))
        return value

    cache.clear()
    monkeypatch.setattr(entries.jsonfmt, "loads", loads)
    queries.compare_routes(branched, a, b, a)
    monkeypatch.undo()
    la, lb = queries.light_path(branched, a), queries.light_path(branched, b)
    k = common_ancestor_index([e.entry_id for e in la], [e.entry_id for e in lb])
    allowed = {la[k].entry_id} if k >= 0 else set()
    for route in (la, lb):
        allowed |= {e.entry_id for e in route[k + 1 :][-5:]}
        allowed |= {e.entry_id for e in queries.context_light(branched, route)[0]}
        tail = queries.full_path(branched, route[k + 1 :])
        allowed |= {e["id"] for e in tail if tool_calls_of(e)}
    assert parsed and set(parsed) <= allowed
    outside = {e.entry_id for r in (la, lb) for e in r} - allowed
    assert outside  # the routes hold lines the Compare did not parse


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_a_whole_route_s_figures_are_pisession_s(path):
    """Against an id no entry has, a side is its whole route: its cost is what ``pisession
    stats`` records for that leaf (the command line run as a process) and its projected
    figure the engine's estimate of the route (``pisession context --leaf``)."""
    from explorer.session.context import projection_from_path
    from explorer.session.tokens import estimate_projected_context_tokens
    from tests.session.test_agent_generated import pisession

    session = services.import_bytes(path.read_bytes(), source_path=str(path)).session
    lines = pisession("stats", path, "--all-leaves", "--json").stdout.splitlines()
    engine = {r["leafId"]: r for r in map(json.loads, lines)}
    assert engine
    for leaf, record in engine.items():
        shown = queries.compare_routes(session, leaf, "no-such-id", leaf)
        assert shown["stats_a"]["cost"] == record["cost"]["recorded"], leaf
        branch = queries.full_path(session, queries.light_path(session, leaf))
        assert shown["stats_a"]["entries"] == len(branch), leaf
        estimate = estimate_projected_context_tokens(projection_from_path(branch), branch)
        assert shown["projected_a"] == int(estimate), leaf
