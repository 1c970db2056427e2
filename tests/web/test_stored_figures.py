"""Whole-session figures stored with a big session (`explorer.stored_figures`).

An import stores the skeleton, the tree checks and the other grown figures, and an append
stores them again once they are STORE_LAG positions behind (`queries.refresh_figures`, the
write paths only: no reader writes a row); a worker that has no copy (a restart, a cleared
cache) loads them and extends them in memory by the entries appended since instead of
building them from every row. What must stay true: a loaded and extended figure equals a
fresh build, a copy that fell behind is written again by the next append, never by a
reader, and a copy that no longer loads is built afresh.
"""

from __future__ import annotations

import pickle

import pytest
from django.core.cache import cache

from explorer import queries, services, shared_copies, stored_figures
from explorer.analysis.integrity import TreeFindings
from explorer.models import Session, StoredFigure
from explorer.session.graph import TreeShape

pytestmark = pytest.mark.django_db

NAMES = {
    "skeleton",
    "integrity-findings",
    "integrity-report",
    "integrity-tools-2",
    "leaves",
    "labels",
}


@pytest.fixture
def store_small(monkeypatch):
    """Store the figures of the test sessions too (they are far under the real bound)."""
    monkeypatch.setattr(stored_figures, "STORE_FROM", 1)
    monkeypatch.setattr(stored_figures, "STORE_LAG", 2)


def _cold_worker() -> None:
    """What a new worker process starts with: no shared cache, no copies of its own."""
    shared_copies.flush()
    cache.clear()
    queries._GROWN.clear()


def _tip(session: Session) -> str | None:
    return queries.default_leaf_id(session)


def _user(text: str) -> dict:
    return {"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1}


def _upto(session: Session, kind: str) -> int:
    return stored_figures.positions(session).get(kind, -1)


def _fresh_figures(session: Session) -> tuple:
    """Every stored figure, built from the rows with nothing kept anywhere."""
    _cold_worker()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stored_figures, "load", lambda *a: None)
        mp.setattr(stored_figures, "store", lambda *a: False)
        return _figures(session)


def _figures(session: Session) -> tuple:
    return (
        queries._skeleton(session),
        queries.integrity_sections(session),
        queries.unmatched_tool_results(session),
        queries.entry_costs(session),
        queries.leaf_choices(session),
        queries.current_labels(session),
    )


def test_an_import_stores_every_figure_up_to_its_last_entry(make_session, store_small):
    session = make_session()
    rows = dict(StoredFigure.objects.filter(session=session).values_list("name", "upto"))
    prefix = f"{stored_figures.FORMAT}:"
    assert all(name.startswith(prefix) for name in rows)
    # Whole-session figures only: no drawn graph (the Tree tab folds from the segments) and
    # no per-entry figure (a branch summary's detail is kept in the shared cache).
    assert {name.removeprefix(prefix).split("|")[0] for name in rows} == NAMES
    assert set(rows.values()) == {queries.last_position(session)}


def _rows(session: Session) -> set[tuple]:
    return set(StoredFigure.objects.filter(session=session).values_list("name", "upto", "data"))


def test_a_session_under_the_bound_stores_nothing(make_session, monkeypatch):
    monkeypatch.setattr(stored_figures, "STORE_FROM", 10**9)
    session = make_session()
    _figures(session)
    assert not StoredFigure.objects.filter(session=session).exists()


def test_a_cold_worker_loads_the_stored_figures_instead_of_building_them(
    make_session, store_small, monkeypatch
):
    session = make_session()
    expected = _fresh_figures(session)
    _cold_worker()

    def no_build(*args, **kwargs):
        raise AssertionError("built from the rows although a copy is stored")

    monkeypatch.setattr(TreeShape, "build", no_build)
    monkeypatch.setattr(TreeFindings, "check", no_build)
    monkeypatch.setattr(queries.skeleton, "_skeleton_rows", no_build)
    assert _figures(session) == expected


def test_stored_figures_behind_the_session_are_written_again_by_the_append(
    make_session, store_small
):
    session = make_session()
    stored_at = queries.last_position(session)
    services.append_message(session, None, _user("more 0"), leaf_id=_tip(session))
    session.refresh_from_db()
    assert _upto(session, "skeleton") == stored_at  # one position behind: not yet
    services.append_message(session, None, _user("more 1"), leaf_id=_tip(session))
    session.refresh_from_db()
    last = queries.last_position(session)
    assert last - stored_at >= stored_figures.STORE_LAG
    assert _upto(session, "skeleton") == last  # STORE_LAG behind: the append stored them
    assert _upto(session, "integrity-report") == last
    assert _upto(session, "labels") == last and _upto(session, "leaves") == last
    # Plain messages were appended: the report checked them against the entries they name,
    # and the whole findings (every stub) were neither loaded nor extended.
    assert _upto(session, "integrity-findings") == stored_at
    expected = _fresh_figures(session)
    _cold_worker()
    assert _figures(session) == expected  # the rewritten copies load as they are


def test_a_reader_extends_the_stored_copies_in_memory_and_writes_none(
    make_session, store_small, monkeypatch
):
    """Copies far behind (appends that did not store them) are loaded and extended by a
    cold reader, which answers as a fresh build does and leaves every stored row as it was;
    the next write path stores them."""
    session = make_session()
    stored_at = queries.last_position(session)
    with monkeypatch.context() as mp:
        mp.setattr(queries, "refresh_figures", lambda s: False)
        for k in range(4):
            services.append_message(session, None, _user(f"more {k}"), leaf_id=_tip(session))
            session.refresh_from_db()
    before = _rows(session)
    assert _upto(session, "skeleton") == stored_at
    expected = _fresh_figures(session)
    for _ in range(2):
        _cold_worker()
        assert _figures(session) == expected
    assert _rows(session) == before
    assert queries.refresh_figures(session)
    assert _upto(session, "skeleton") == queries.last_position(session)
    assert not queries.refresh_figures(session)  # up to date: nothing built


def test_an_append_the_report_cannot_check_alone_extends_the_whole_findings(
    make_session, store_small, monkeypatch
):
    """An edit (its checks walk the route above it) and an entry that arrives with an id
    the session was waiting for (it changes an earlier finding) go to the whole findings,
    which the append stores; the page then shows what a fresh check finds."""
    from tests.web import crafted

    monkeypatch.setattr(stored_figures, "STORE_LAG", 1)  # every append stores
    session = make_session()
    stored_at = queries.last_position(session)
    tip = _tip(session)
    services.append_message(session, None, _user("before"), leaf_id=tip)
    session.refresh_from_db()
    _cold_worker()
    assert queries.integrity_sections(session) == _fresh_figures(session)[1]
    assert _upto(session, "integrity-findings") == stored_at  # the light path
    import json

    steps = [
        lambda: services.add_context_edit(session, None, _tip(session), None, leaf_id=_tip(session)),
        lambda: services.append_lines_verbatim(
            session, [json.dumps(crafted.message("orphan", "not-yet", "user", "waits", 90))],
            ["orphan"], source="test",
        ),
        lambda: services.append_lines_verbatim(
            session, [json.dumps(crafted.message("not-yet", _tip(session), "user", "is", 91))],
            ["not-yet"], source="test",
        ),
    ]  # fmt: skip
    for step in steps:
        before = _upto(session, "integrity-findings")
        step()
        session.refresh_from_db()
        if step is steps[1]:  # a dangling parent: the report checked it alone
            assert _upto(session, "integrity-findings") == before
        else:
            assert _upto(session, "integrity-findings") == queries.last_position(session)
        expected = _fresh_figures(session)[1]
        _cold_worker()
        assert queries.integrity_sections(session) == expected
        if step is steps[1]:
            assert any(i["id"] == "orphan" for sec in expected for i in sec["items"])


def test_a_stored_copy_that_does_not_load_is_built_again(make_session, store_small, caplog):
    session = make_session()
    expected = _fresh_figures(session)
    StoredFigure.objects.filter(session=session).update(data=b"not a pickle")
    _cold_worker()
    assert _figures(session) == expected
    assert "does not load" in caplog.text


def test_a_stored_copy_ahead_of_the_session_is_not_used(make_session, store_small):
    """A copy names the position it covers; one beyond the session's last entry (written
    for other rows) must not stand in for this session's."""
    session = make_session()
    expected = _fresh_figures(session)
    StoredFigure.objects.filter(session=session, name=f"{stored_figures.FORMAT}:skeleton").update(
        upto=10**6, data=pickle.dumps([("x", None, "message", "user")])
    )
    _cold_worker()
    assert queries._skeleton(session) == expected[0]


def test_masked_figures_keep_one_stored_copy_per_kind(make_session, store_small):
    session = make_session()
    labels = f"{stored_figures.FORMAT}:labels|"
    first = StoredFigure.objects.get(session=session, name__startswith=labels).name
    assert stored_figures.store(session, "labels|other-digest", 10**6, {})
    names = list(
        StoredFigure.objects.filter(session=session, name__startswith=labels).values_list(
            "name", flat=True
        )
    )
    assert names == [labels + "other-digest"] and first != names[0]


def test_an_older_copy_never_replaces_a_newer_one(make_session, store_small):
    session = make_session()
    last = queries.last_position(session)
    assert stored_figures.store(session, "skeleton", last - 1, {"stale": 1.0})
    row = StoredFigure.objects.get(session=session, name=f"{stored_figures.FORMAT}:skeleton")
    assert row.upto == last and pickle.loads(row.data) != {"stale": 1.0}


def test_what_depends_only_on_an_entrys_ancestors_outlives_appends_not_a_clear(
    make_session, store_small
):
    """`queries.kept_below` (a branch summary's detail, its fragment): kept across appends
    in the shared cache, never stored (a reader writes no row), built again after a clear."""
    session = make_session()
    builds: list[int] = []

    def build() -> dict:
        builds.append(1)
        return {"rows": ["a", "b"], "n": len(builds)}

    tip = _tip(session)
    before = _rows(session)
    assert queries.kept_below(session, "test-figure", tip, build) == {"rows": ["a", "b"], "n": 1}
    services.append_message(session, None, _user("later"), leaf_id=tip)
    session.refresh_from_db()
    shared_copies.flush()
    assert queries.kept_below(session, "test-figure", tip, build)["n"] == 1  # an append: still
    assert queries.kept_below(session, "another-figure", tip, build)["n"] == 2  # its own name
    _cold_worker()
    assert queries.kept_below(session, "test-figure", tip, build)["n"] == 3
    assert not {r for r in _rows(session) - before if "test-figure" in r[0] or "below" in r[0]}


def _compacted(header_id: str, name: str) -> Session:
    """A five-entry session whose route holds one compaction, imported as ``name``."""
    from tests.web import crafted

    entries = [
        crafted.message("u1", None, "user", "first", 1),
        crafted.message("a1", "u1", "assistant", "one", 2),
        crafted.message("u2", "a1", "user", "second", 3),
        crafted.compaction("c1", "u2", "u2", 4, summary="what came before", tokens_before=99),
        crafted.message("a2", "c1", "assistant", "two", 5),
    ]
    return crafted.imported(crafted.session_bytes(crafted.header(header_id), entries), name)


def test_a_kept_compaction_detail_holds_its_figures_not_the_replaced_lines(store_small):
    """The detail is pickled into the shared cache by its first reader: the replaced
    entries' whole lines (hundreds of kilobytes on a long route) must not ride along."""
    from tests.web import crafted

    bulky = "bulky-tool-output " * 2000
    entries = [
        crafted.message("u1", None, "user", "first step in src/app.py", 1),
        crafted.message("a1", "u1", "assistant", bulky, 2),
        crafted.message("u2", "a1", "user", "second", 3),
        crafted.compaction("c1", "u2", "u2", 4, summary="worked on src/app.py", tokens_before=99),
        crafted.message("a2", "c1", "assistant", "two", 5),
    ]
    data = crafted.session_bytes(crafted.header("0b6f2d34-9a1e-4c7d-8e2f-3a4b5c6d7e8f"), entries)
    session = crafted.imported(data, "bulky.jsonl")
    light = queries.light_path(session, queries.default_leaf_id(session))
    newest = queries.route_compactions(session, light)[-1]
    _cold_worker()
    detail = queries.compaction_detail(session, light, newest)
    assert detail["figures"] == {
        "id": "c1",
        "first_kept": "u2",
        "summary": "worked on src/app.py",
        "tokens_before": 99,
        "tokens_after": detail["figures"]["tokens_after"],
        "read_files": [],
        "modified_files": [],
        "off_path": False,
    }
    assert detail["figures"]["tokens_after"] > 0
    assert [e["id"] for e in detail["replaced"]] == ["u1", "a1"]
    assert detail["report"].total >= 1  # the survival check still read the replaced lines
    kept = pickle.dumps(detail)
    assert kept.count(b"bulky-tool-output") < 10  # its title's start, not its line
    assert len(kept) < len(bulky) // 4


def test_a_format_change_leaves_the_old_copies_unread(make_session, store_small, monkeypatch):
    session = make_session()
    expected = _fresh_figures(session)
    StoredFigure.objects.filter(session=session).update(data=pickle.dumps("old meaning"))
    old = set(StoredFigure.objects.filter(session=session).values_list("name", flat=True))
    monkeypatch.setattr(stored_figures, "FORMAT", stored_figures.FORMAT + 1)
    _cold_worker()
    assert _figures(session) == expected
    assert queries.refresh_figures(session)  # the next write path: none stored under FORMAT
    names = set(StoredFigure.objects.filter(session=session).values_list("name", flat=True))
    assert names and not names & old  # the new copies, the old ones dropped


def _stub(eid: str, parent: str | None, kind: str = "message") -> dict:
    if kind == "message":
        return {"type": kind, "id": eid, "parentId": parent, "message": {"role": "user"}}
    return {"type": kind, "id": eid, "parentId": parent}


def test_tree_findings_unpack_their_stubs_only_to_extend():
    """A copy unpickles its problems at once; its stubs, unpacked on the first extension,
    give what a fresh check of every entry gives."""
    entries = [_stub("a", None), _stub("b", "a"), _stub("c", "gone"), _stub("d", "b", "label")]
    found = TreeFindings.check(entries, [2, 3, 4, 5])
    assert found.problems  # the dangling parent
    copy = pickle.loads(pickle.dumps(found))
    assert copy._state is None and copy.problems == found.problems  # stubs still packed
    new = [_stub("e", "d"), _stub("f", "nowhere")]
    extended = copy.extended(new, [6, 7])
    assert copy._state is not None  # unpacked to extend
    fresh = TreeFindings.check(entries + new, [2, 3, 4, 5, 6, 7])
    assert extended == fresh and extended.problems == fresh.problems
    assert pickle.loads(pickle.dumps(extended)) == fresh
