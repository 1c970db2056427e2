"""Whole-session figures stored with a big session (`explorer.stored_figures`).

An import stores the skeleton, the tree checks and the other grown figures;
a worker that has no copy (a restart, a cleared cache) loads them and extends them by the
entries appended since instead of building them from every row. What must stay true: a
loaded and extended figure equals a fresh build, a copy that fell behind is written again,
and a copy that no longer loads is built afresh.
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
    "integrity-tools",
    "leaves",
    "labels",
    "opening-graph",  # drawn by the views on ``session_imported`` (``store_opening_graph``)
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


def _upto(session: Session, name: str) -> int:
    return stored_figures.position(session, name)


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
    # No per-entry figures: the Compare tab's route figures, once drawn here for the default
    # leaf, are read from the stored route rows (``RouteFigure``) now, and this session has
    # no compaction whose detail the Compactions tab would keep.
    below = {n for n in rows if n.removeprefix(prefix).startswith(stored_figures.BELOW)}
    assert below == set()
    whole = {n: upto for n, upto in rows.items() if n not in below}
    assert {name.removeprefix(prefix).split("|")[0] for name in whole} == NAMES
    assert set(whole.values()) == {queries.last_position(session)}


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


def test_stored_figures_behind_the_session_are_extended_and_written_again(
    make_session, store_small
):
    session = make_session()
    stored_at = queries.last_position(session)
    for k in range(3):  # more than STORE_LAG positions, in a process that keeps no copy
        services.append_message(session, None, _user(f"more {k}"), leaf_id=_tip(session))
        session.refresh_from_db()
        _cold_worker()
    assert _upto(session, "skeleton") == stored_at
    expected = _fresh_figures(session)
    _cold_worker()
    assert _figures(session) == expected  # loaded at the import's position, then extended
    last = queries.last_position(session)
    assert _upto(session, "skeleton") == last
    assert _upto(session, "integrity-report") == last
    # Plain messages were appended: the report checked them against the entries they name,
    # and the whole findings (every stub) were neither loaded nor extended.
    assert _upto(session, "integrity-findings") == stored_at
    _cold_worker()
    assert _figures(session) == expected  # the rewritten copies load as they are


def test_an_append_the_report_cannot_check_alone_extends_the_whole_findings(
    make_session, store_small
):
    """An edit (its checks walk the route above it) and an entry that arrives with an id
    the session was waiting for (it changes an earlier finding) go to the whole findings;
    the page then shows what a fresh check finds."""
    from tests.web import crafted

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
        expected = _fresh_figures(session)[1]
        _cold_worker()
        assert queries.integrity_sections(session) == expected
        if step is steps[1]:  # a dangling parent: the report checked it alone
            assert any(i["id"] == "orphan" for sec in expected for i in sec["items"])
            assert _upto(session, "integrity-findings") == before
        else:
            assert _upto(session, "integrity-findings") == queries.last_position(session)


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


def test_what_depends_only_on_an_entrys_ancestors_is_built_once_for_every_worker(
    make_session, store_small
):
    """`queries.kept_below` (a compaction's detail, a compared pair): stored on its first
    build, loaded by a worker that has no copy, never built again."""
    session = make_session()
    builds: list[int] = []

    def build() -> dict:
        builds.append(1)
        return {"rows": ["a", "b"], "n": len(builds)}

    tip = _tip(session)
    assert queries.kept_below(session, "test-figure", tip, build) == {"rows": ["a", "b"], "n": 1}
    _cold_worker()
    assert queries.kept_below(session, "test-figure", tip, build) == {"rows": ["a", "b"], "n": 1}
    assert len(builds) == 1
    services.append_message(session, None, _user("later"), leaf_id=tip)
    session.refresh_from_db()
    _cold_worker()
    assert queries.kept_below(session, "test-figure", tip, build)["n"] == 1  # an append: still
    other = queries.kept_below(session, "another-figure", tip, build)
    assert other["n"] == 2  # its own name, its own build


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
    """The detail is pickled into the cache and the stored figures by its first reader: the
    replaced entries' whole lines (hundreds of kilobytes on a long route) must not ride along."""
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


def _no_build(*args, **kwargs):
    raise AssertionError("built although the import stored it")


def test_a_format_change_leaves_the_old_copies_unread(make_session, store_small, monkeypatch):
    session = make_session()
    expected = _fresh_figures(session)
    StoredFigure.objects.filter(session=session).update(data=pickle.dumps("old meaning"))
    old = set(StoredFigure.objects.filter(session=session).values_list("name", flat=True))
    monkeypatch.setattr(stored_figures, "FORMAT", stored_figures.FORMAT + 1)
    _cold_worker()
    assert _figures(session) == expected
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


@pytest.mark.django_db(transaction=True)
def test_a_reader_does_not_wait_for_a_writer_holding_the_database(store_small, caplog, monkeypatch):
    """A reader's store waits READER_WAIT_MS at most while another connection writes (an
    import can hold SQLite's lock for minutes), and the connection's own wait is restored;
    the import's stores wait as long as any write."""
    import threading
    from types import SimpleNamespace

    from django.db import connection, transaction

    if connection.vendor != "sqlite":
        pytest.skip("SQLite only: PostgreSQL's writers lock rows, not the database")

    from tests.conftest import SMALL_SESSION

    session = services.import_bytes(SMALL_SESSION).session
    waits: list[int] = []
    atomic = transaction.atomic

    def watched_atomic(*args, **kwargs):
        waits.append(connection.connection.execute("PRAGMA busy_timeout").fetchone()[0])
        return atomic(*args, **kwargs)

    monkeypatch.setattr(stored_figures, "transaction", SimpleNamespace(atomic=watched_atomic))
    held, release = threading.Event(), threading.Event()

    def writer() -> None:
        from django.db import connection as theirs

        with transaction.atomic():
            Session.objects.filter(pk=session.pk).update(name="being written")
            held.set()
            release.wait(30)
        theirs.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert held.wait(30)
        connection.ensure_connection()
        before = connection.connection.execute("PRAGMA busy_timeout").fetchone()[0]
        assert not stored_figures.store(session, "costs", 10**6, {"x": 1.0})
        assert connection.connection.execute("PRAGMA busy_timeout").fetchone()[0] == before
    finally:
        release.set()
        thread.join(30)
    assert waits == [stored_figures.READER_WAIT_MS] and before > waits[0]
    assert "not written" in caplog.text
    with stored_figures.patiently():
        assert stored_figures.store(session, "costs", 10**6, {"x": 1.0})  # the lock is gone
    assert waits[-1] == before


def test_per_entry_figures_are_kept_to_a_bound_per_session(make_session, store_small, monkeypatch):
    """A compared pair or a compaction's detail is stored per entry; a session keeps the
    newest few, and one dropped is built again when asked for."""
    monkeypatch.setattr(stored_figures, "BELOW_KEPT", 3)
    from tests.web import crafted

    session = make_session()
    entries = [crafted.message("o1", None, "user", "elsewhere", 1)]
    other = crafted.imported(
        crafted.session_bytes(crafted.header("6e3d8c9f-2a4b-4d7c-8f1e-8b9c0d1e2f3a"), entries),
        "other.jsonl",
    )
    assert other.pk != session.pk
    tip = _tip(session)
    below = f"{stored_figures.FORMAT}:{stored_figures.BELOW}"

    def stored_below(s: Session) -> int:
        return StoredFigure.objects.filter(session=s, name__startswith=below).count()

    queries.kept_below(other, "kept-elsewhere", _tip(other), lambda: 1)
    before = stored_below(other)
    for k in range(6):
        queries.kept_below(session, f"pair-{k}", tip, lambda k=k: k)
    assert stored_below(session) == 3
    assert stored_below(other) == before  # another session's rows are its own
    whole = {
        n.split("|")[0]
        for n in StoredFigure.objects.filter(session=session).values_list("name", flat=True)
    }
    assert {f"{stored_figures.FORMAT}:{n}" for n in NAMES} <= whole  # the whole-session ones stay
    _cold_worker()
    assert queries.kept_below(session, "pair-0", tip, lambda: "built again") == "built again"
    assert queries.kept_below(session, "pair-5", tip, lambda: "not again") == 5


def _graph(client, session: Session, **params) -> bytes:
    from django.urls import reverse

    r = client.get(reverse("explorer:graph_svg", args=[session.pk]), params)
    assert r.status_code == 200
    return r.content


def _drawn_fresh(client, session: Session, **params) -> bytes:
    """The graph as a cold worker draws it with nothing stored."""
    _cold_worker()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stored_figures, "load", lambda *a: None)
        return _graph(client, session, **params)


def test_the_import_stores_the_graph_the_tree_tab_opens_on(
    make_session, store_small, viewer_client, monkeypatch
):
    session = make_session()
    expected = _drawn_fresh(viewer_client, session)
    assert b"<svg" in expected
    _cold_worker()
    monkeypatch.setattr(queries, "folded_tree", _no_build)  # the Tree view reads it here
    assert _graph(viewer_client, session) == expected  # the stored drawing, byte for byte
    # The Tree page reads the stored drawing too (its text tree is still built).
    monkeypatch.undo()
    from django.urls import reverse

    _cold_worker()
    page = viewer_client.get(reverse("explorer:session_detail", args=[session.pk])).content
    assert expected.decode().split("<svg", 1)[1][:2000] in page.decode()


def test_the_stored_graph_serves_only_the_version_it_was_drawn_at(
    make_session, store_small, viewer_client
):
    session = make_session()
    before = _drawn_fresh(viewer_client, session)
    services.append_message(session, None, _user("one more"), leaf_id=_tip(session))
    session.refresh_from_db()
    expected = _drawn_fresh(viewer_client, session)
    assert expected != before  # the appended entry is drawn
    _cold_worker()
    assert _graph(viewer_client, session) == expected


def test_another_cursor_or_view_is_drawn_not_read_from_the_stored_graph(
    make_session, store_small, viewer_client, viewer_user
):
    session = make_session()
    leaves = [c["id"] for c in queries.leaf_choices(session)]
    other = next(leaf for leaf in leaves if leaf != _tip(session))
    services.move_cursor(session, viewer_user, other)
    expected = _drawn_fresh(viewer_client, session)
    permalink = _drawn_fresh(viewer_client, session, leaf=_tip(session))
    from explorer.views import tree

    stored = tree._stored_graph(session, _tip(session))
    assert stored is not None and stored["svg"]  # the import's drawing, at the file's leaf
    # Each differs from the stored drawing (another route marked; links that carry the
    # leaf), so serving it would fail the comparisons below.
    assert stored["svg"] not in (expected.decode(), permalink.decode())
    _cold_worker()
    assert _graph(viewer_client, session) == expected  # the user's own cursor
    assert _graph(viewer_client, session, leaf=_tip(session)) == permalink
