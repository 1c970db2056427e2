"""Compare works a pair out from each route's kept figures (``queries.route_figure_set``):
what it shows must be what parsing both tails and both live ranges whole gives, for every
kind of pair (siblings, a leaf and its own ancestor, the same leaf twice, different roots),
and the import stores the default leaf's figures so a first Compare reads only the other
route."""

from __future__ import annotations

import itertools
from dataclasses import asdict

import pytest

from benchmarks.gen_session import generate_session
from explorer import queries, stored_figures
from explorer.analysis.compare import (
    collapse_shared,
    common_ancestor_index,
    listed_lines,
    projection_diff,
    route_figures,
    stats_after,
)
from explorer.analysis.projection import projected_estimate
from explorer.models import Entry
from explorer.session.describe import cost_of, files_touched, tool_calls_of, total_tokens_of

pytestmark = pytest.mark.django_db


def _stats(entries: list[dict]) -> dict:
    """A tail's figures added up entry by entry, the plain way (the reference)."""
    files = files_touched(entries)
    return {
        "entries": len(entries),
        "messages": sum(1 for e in entries if e.get("type") == "message"),
        "tokens": sum((total_tokens_of(e) for e in entries), 0.0),
        "cost": sum((cost_of(e) for e in entries), 0.0),
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
        "route_a": queries._route_rows(la[k + 1 :], data),
        "route_b": queries._route_rows(lb[k + 1 :], data),
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


@pytest.mark.parametrize("part_bytes", [queries.PARSE_PART_BYTES, 1, 3000])
def test_every_pair_shows_what_parsing_both_routes_whole_shows(branched, part_bytes, monkeypatch):
    """Whatever size of part the lines outside the live range are read in (one line at a
    time, a few, or all of them), the pair is the same."""
    monkeypatch.setattr(queries.compare, "PARSE_PART_BYTES", part_bytes)
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


def test_a_tail_s_figures_are_the_sum_of_its_entries_to_the_last_bit(branched):
    leaf = queries.default_leaf_id(branched)
    path = queries.full_path(branched, queries.light_path(branched, leaf))
    figures = route_figures(path)
    assert figures.spends and any(s.files for s in figures.spends)
    for k in range(-1, len(path)):
        assert asdict(stats_after(figures, k)) == _stats(path[k + 1 :]), k


def test_an_id_no_entry_has_compares_as_an_empty_route(branched):
    leaf = queries.default_leaf_id(branched)
    shown = queries.compare_routes(branched, leaf, "no-such-id", leaf)
    assert shown["ancestor"] is None and shown["len_b"] == 0 and shown["route_b"] == []
    assert shown["stats_b"]["entries"] == 0 and shown["diff_counts"]["b"] == 0
    assert shown["len_a"] == len(queries.light_path(branched, leaf))


def _first_compare_after_import(make_session, tmp_path, monkeypatch):
    """A big session imported, then its first Compare in a new worker (cache cleared):
    the pair of its default leaf and another, the shown figures and the routes built."""
    from django.core.cache import cache

    from explorer import shared_copies

    n = stored_figures.STORE_FROM + 300
    path = generate_session(tmp_path / "big.jsonl", entries=n, branch_points=20, seed=3)
    session = make_session(path.read_bytes())
    leaves = [c["id"] for c in queries.leaf_choices(session)]
    a, b = queries.default_leaf_id(session), leaves[len(leaves) // 2]
    assert a != b
    shared_copies.flush()
    cache.clear()
    built: list[str] = []
    real = queries._route_figure_set
    monkeypatch.setattr(
        queries.compare,
        "_route_figure_set",
        lambda s, light: built.append(light[-1].entry_id if light else "") or real(s, light),
    )
    shown = queries.compare_routes(session, a, b, a)
    monkeypatch.undo()
    return session, a, b, shown, built


def test_the_import_stores_the_default_leaf_s_figures(make_session, tmp_path, monkeypatch):
    """A big session's first Compare after its import works out only the other route; the
    default leaf's was stored by the import."""
    session, a, b, shown, built = _first_compare_after_import(make_session, tmp_path, monkeypatch)
    assert built == [b]
    want = _reference(session, a, b)
    assert {k: shown[k] for k in want} == want


def test_parts_keep_the_order_and_stay_within_the_budget():
    sizes = dict(enumerate([5, 5, 20, 1, 1, 1, 9], 1))
    rows = [queries.LightEntry(f"e{i}", None, "message", "", i, 0, 0, "", i + 1) for i in range(7)]
    parts = list(queries._parts_by_size(rows, sizes, 10))
    assert [e for p in parts for e in p] == rows
    assert [[sizes[e.pk] for e in p] for p in parts] == [[5, 5], [20], [1, 1, 1], [9]]
    assert list(queries._parts_by_size([], sizes, 10)) == []


def test_line_sizes_are_the_stored_bytes_of_each_line(branched):
    light = queries.light_path(branched, queries.default_leaf_id(branched))
    sizes = queries._line_sizes(light)
    raw = dict(Entry.objects.filter(pk__in=[e.pk for e in light]).values_list("pk", "raw"))
    assert sizes == {pk: len(line.encode()) for pk, line in raw.items()} and len(sizes) == len(
        light
    )


def test_a_live_range_too_big_to_hold_parsed_is_not_stored_at_import(
    make_session, tmp_path, monkeypatch
):
    """The import bounds its memory: the default leaf's figures are stored only when its
    live range is small enough to parse whole; the first Compare then builds both routes,
    with the same answer."""
    monkeypatch.setattr(queries.figures, "STORED_ROUTE_LIVE_BYTES", 0)
    session, a, b, shown, built = _first_compare_after_import(make_session, tmp_path, monkeypatch)
    assert sorted(built) == sorted([a, b])
    want = _reference(session, a, b)
    assert {k: shown[k] for k in want} == want


def test_after_an_append_the_process_keeps_both_routes_sets(branched, monkeypatch):
    """A Compare after each append (its figures are per session version) takes both route
    sets from this process's copies, not from the shared cache (two unpickles of about
    200 KB on a big session); a cleared cache disowns the copies."""
    from django.core.cache import cache

    from explorer import services

    leaves = [c["id"] for c in queries.leaf_choices(branched)]
    a, b = leaves[0], leaves[3]
    first = queries.compare_routes(branched, a, b, a)
    read: list[str] = []
    real = queries.kept_below
    monkeypatch.setattr(
        queries.compare,
        "kept_below",
        lambda s, name, eid, build: (
            (read.append(eid) if name == queries._ROUTE_FIGURES else None)
            or real(s, name, eid, build)
        ),
    )
    services.rename_session(branched, None, "after", leaf_id=queries.default_leaf_id(branched))
    branched.refresh_from_db()
    again = queries.compare_routes(branched, a, b, a)
    assert read == []
    assert {k: again[k] for k in ("stats_a", "stats_b", "diff", "route_a", "route_b")} == {
        k: first[k] for k in ("stats_a", "stats_b", "diff", "route_a", "route_b")
    }
    cache.clear()
    queries.compare_routes(branched, a, b, a)
    assert sorted(read) == sorted([a, b])
