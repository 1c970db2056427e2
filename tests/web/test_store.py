"""Import → store → export: byte-identical round trips, incremental and idempotent import,
atomic rejection, and the stored projection equal to the engine's."""

from __future__ import annotations

import pytest

from explorer import files, queries, services, storage
from explorer.files import imports as file_imports
from explorer.files import scan as file_scan
from explorer.models import Entry, ExtraLine, Session
from explorer.session import ids, jsonfmt
from explorer.session.manager import SessionManager
from tests.conftest import PI_FIXTURES, SMALL_SESSION, pi_fixture_files

pytestmark = pytest.mark.django_db

PI_FILES = pi_fixture_files()


@pytest.mark.pi_fixtures
def test_fixture_files_are_present():
    assert len(PI_FILES) >= 2


def test_it_round_trips_a_v3_file_byte_for_byte(make_session):
    session = make_session()
    assert files.export_bytes(session) == SMALL_SESSION
    assert session.entry_count == 8
    assert session.name == "Demo of a small session"
    assert session.compaction_count == 0
    assert session.context_edit_count == 1
    # a1 has two children; leaves: d4 (→ label → edit → info chain) and e5
    assert session.leaf_count == 2


def test_it_keeps_malformed_blank_and_odd_lines_verbatim(db):
    data = (
        SMALL_SESSION.split(b"\n", 1)[0]
        + b"\n"
        + b'\n   \n{not json\n5\n"text"\nnull\n'
        + b'{"type":"message","id":"x1","parentId":null,"timestamp":"t","message":{"role":"user","content":"caf\xff"}}\r\n'
        + b'{"no":"id"}\n'
        + b'{"type":"custom","customType":"k","id":"x2","parentId":"x1","timestamp":"t"}'
    )
    result = services.import_bytes(data, source_path="/tmp/odd.jsonl")
    assert result.ok, result.problems
    codes = {p.code for p in result.problems}
    assert {"malformed-line", "non-object-line", "invalid-utf8", "bad-id"} <= codes
    assert any(p.code == "missing-final-newline" for p in result.problems)
    session = result.session
    assert files.export_bytes(session) == data
    assert Entry.objects.filter(session=session).count() == 2
    assert ExtraLine.objects.filter(session=session, kind="malformed").count() == 1
    assert queries.path_to(session, "x2")[0]["id"] == "x1"


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("path", PI_FILES, ids=lambda p: p.name)
def test_it_stores_legacy_fixtures_in_the_form_pi_rewrites_them(path, tmp_path):
    data = path.read_bytes()
    seed = b"fixture-seed"
    result = services.import_bytes(data, source_path=str(path), rng=ids.deterministic_rng(seed))
    assert result.ok, [str(p) for p in result.errors]
    session = result.session
    assert session.source_version == 1
    # Pi's own behaviour on open: migrate and rewrite. Same id source → same bytes.
    copy = tmp_path / path.name
    copy.write_bytes(data)
    SessionManager.open(str(copy), rng=ids.deterministic_rng(seed))
    assert files.export_bytes(session) == copy.read_bytes()
    # The original bytes are kept, and importing the file again adds nothing.
    assert bytes(session.source_original) == data
    again = services.import_bytes(data, source_path=str(path))
    assert again.ok and again.unchanged and again.added == 0


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("path", PI_FILES, ids=lambda p: p.name)
def test_exported_fixtures_round_trip_byte_identically(path):
    first = services.import_bytes(path.read_bytes(), source_path=str(path))
    exported = files.export_bytes(first.session)
    first.session.delete()
    second = services.import_bytes(exported, source_path="again.jsonl")
    assert second.ok
    assert second.session.source_version == 3
    assert files.export_bytes(second.session) == exported


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("path", PI_FILES, ids=lambda p: p.name)
def test_stored_projection_equals_the_engine_projection(path):
    data = path.read_bytes()
    result = services.import_bytes(data, source_path=str(path))
    session = result.session
    exported = files.export_bytes(session)
    engine = SessionManager.load_readonly(exported)
    leaf = queries.default_leaf_id(session)
    assert leaf == engine.get_leaf_id()
    from explorer.session.context import projection_from_path

    stored = projection_from_path(queries.path_to(session, leaf))
    assert stored.to_json() == engine.build_session_projection().to_json()


def test_it_is_idempotent(make_session):
    session = make_session()
    again = services.import_bytes(SMALL_SESSION)
    assert again.ok and again.unchanged and again.added == 0
    assert again.session.pk == session.pk
    assert Entry.objects.filter(session=session).count() == 8


def test_it_appends_only_the_new_entries_of_a_grown_file(make_session):
    session = make_session()
    more = (
        b'{"type":"message","id":"77777777","parentId":"1b2c3d4e","timestamp":"2025-03-04T05:11:00.000Z",'
        b'"message":{"role":"user","content":"more","timestamp":1741065060000}}\n'
    )
    result = services.import_bytes(SMALL_SESSION + more)
    assert result.ok and result.added == 1 and not result.created
    session.refresh_from_db()
    assert session.entry_count == 9
    assert files.export_bytes(session) == SMALL_SESSION + more
    assert queries.default_leaf_id(session) == "77777777"
    new = Entry.objects.get(session=session, entry_id="77777777")
    assert new.depth == 7 and new.line_no == 10


def test_a_bad_file_leaves_nothing_behind(db):
    bad = (
        SMALL_SESSION
        + b'{"type":"label","id":"a1b2c3d4","parentId":null,"timestamp":"t","targetId":"x","label":"dup"}\n'
    )
    result = services.import_bytes(bad)
    assert not result.ok
    err = result.errors[0]
    assert err.line == 10 and err.code == "duplicate-id" and "a1b2c3d4" in err.message
    assert Session.objects.count() == 0 and Entry.objects.count() == 0


def test_a_file_that_is_not_a_session_is_rejected(db):
    result = services.import_bytes(b'{"hello":"world"}\n')
    assert not result.ok and result.errors[0].line == 1
    assert Session.objects.count() == 0


def test_a_parent_cycle_is_rejected(db):
    head = SMALL_SESSION.split(b"\n", 1)[0] + b"\n"
    data = head + (
        b'{"type":"custom","customType":"k","id":"aa","parentId":"bb","timestamp":"t"}\n'
        b'{"type":"custom","customType":"k","id":"bb","parentId":"aa","timestamp":"t"}\n'
    )
    result = services.import_bytes(data)
    assert not result.ok
    assert any(p.code == "parent-cycle" for p in result.errors)
    assert Session.objects.count() == 0


def test_depth_is_settled_when_a_parent_comes_later(db):
    head = SMALL_SESSION.split(b"\n", 1)[0] + b"\n"
    data = head + (
        b'{"type":"custom","customType":"k","id":"cc","parentId":"bb","timestamp":"t"}\n'
        b'{"type":"custom","customType":"k","id":"bb","parentId":"aa","timestamp":"t"}\n'
        b'{"type":"custom","customType":"k","id":"aa","parentId":null,"timestamp":"t"}\n'
        b'{"type":"custom","customType":"k","id":"dd","parentId":"zz","timestamp":"t"}\n'
    )
    result = services.import_bytes(data)
    assert result.ok
    depths = dict(Entry.objects.values_list("entry_id", "depth"))
    assert depths == {"cc": 2, "bb": 1, "aa": 0, "dd": 0}
    assert any(p.code == "dangling-parent" for p in result.warnings)
    assert [e["id"] for e in queries.path_to(result.session, "cc")] == ["aa", "bb", "cc"]


def test_an_oversized_file_gets_a_clear_message(db, settings):
    settings.SESSIONS_MAX_UPLOAD_BYTES = 100
    result = services.import_bytes(SMALL_SESSION)
    assert not result.ok and "SESSIONS_MAX_UPLOAD_BYTES" in result.errors[0].message


def test_children_and_paths_use_the_index(make_session):
    session = make_session()
    assert [e.entry_id for e in queries.children_of(session, "a1b2c3d4")] == [
        "b2c3d4e5",
        "e5f6a7b8",
    ]
    assert [e.entry_id for e in queries.children_of(session, None)] == ["a1b2c3d4"]
    assert [e["id"] for e in queries.path_to(session, "e5f6a7b8")] == ["a1b2c3d4", "e5f6a7b8"]
    assert queries.path_to(session, "nope") == []


def test_appends_go_through_the_engine_and_record_the_author(make_session, editor_user):
    session = make_session()
    services.move_cursor(session, editor_user, "e5f6a7b8")
    result = services.set_label(session, editor_user, "e5f6a7b8", "other route")
    entry = result.entry
    assert entry.author == editor_user and entry.parent_id == "e5f6a7b8"
    assert entry.data()["label"] == "other route"
    session.refresh_from_db()
    assert session.entry_count == 9
    exported = files.export_bytes(session)
    assert exported.startswith(SMALL_SESSION)
    assert exported.endswith((jsonfmt.dumps(entry.data()) + "\n").encode())
    assert services.cursor_for(session, editor_user).entry_id == entry.entry_id
    # the file's own leaf is its last entry
    assert queries.default_leaf_id(session) == entry.entry_id


def test_fork_copies_every_entry_under_a_new_header(make_session, editor_user):
    session = make_session()
    fork = services.fork_session(session, editor_user, cwd="/elsewhere")
    assert fork.session_id != session.session_id
    assert fork.cwd == "/elsewhere" and fork.entry_count == session.entry_count
    header = fork.header()
    assert header["parentSession"] == "db:" + session.session_id


def test_branch_download_holds_one_route(make_session):
    session = make_session()
    data = files.branch_bytes(session, "e5f6a7b8")
    lines = [jsonfmt.loads(x) for x in data.decode().splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["parentSession"]
    ids_ = [e["id"] for e in lines[1:3]]
    assert ids_ == ["a1b2c3d4", "e5f6a7b8"]
    # the label on a1b2c3d4 is re-created
    assert lines[-1]["type"] == "label" and lines[-1]["label"] == "start"


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("path", PI_FILES, ids=lambda p: p.name)
def test_stored_index_columns_match_the_tree(path):
    from collections import Counter

    session = services.import_bytes(path.read_bytes(), source_path=str(path)).session
    rows = list(
        Entry.objects.filter(session=session).values_list(
            "entry_id", "parent_id", "depth", "child_count"
        )
    )
    children = Counter(parent for _id, parent, _d, _c in rows if parent)
    depth = {}
    for entry_id, parent, _d, _c in rows:  # parents precede children in these files
        depth[entry_id] = depth[parent] + 1 if parent in depth else 0
    for entry_id, _parent, d, count in rows:
        assert count == children.get(entry_id, 0)
        assert d == depth[entry_id]
    assert session.leaf_count == sum(1 for r in rows if r[3] == 0)
    assert session.entry_count == len(rows)


def test_child_counts_follow_incremental_imports_and_appends(make_session, editor_user):
    session = make_session()
    more = (
        b'{"type":"message","id":"88888888","parentId":"a1b2c3d4","timestamp":"2025-03-04T05:11:00.000Z",'
        b'"message":{"role":"user","content":"third route","timestamp":1741065060000}}\n'
    )
    services.import_bytes(SMALL_SESSION + more)
    assert Entry.objects.get(session=session, entry_id="a1b2c3d4").child_count == 3
    services.move_cursor(session, editor_user, "88888888")
    services.rename_session(session, editor_user, "renamed")
    session.refresh_from_db()
    assert Entry.objects.get(session=session, entry_id="88888888").child_count == 1
    assert session.leaf_count == 3 and session.name == "renamed"


def test_a_grown_file_whose_new_lines_were_already_appended_live_adds_nothing_twice(make_session):
    session = make_session()
    line1 = (
        b'{"type":"custom","customType":"k","id":"99999991","parentId":"1b2c3d4e",'
        b'"timestamp":"2025-03-04T05:12:00.000Z"}\n'
    )
    line2 = (
        b'{"type":"custom","customType":"k","id":"99999992","parentId":"99999991",'
        b'"timestamp":"2025-03-04T05:13:00.000Z"}\n'
    )
    storage.append_lines(session, line1)  # e.g. the follower stored it as Pi wrote it
    result = services.import_bytes(SMALL_SESSION + line1 + line2)
    assert result.ok, result.problems
    assert result.added == 1
    assert files.export_bytes(session) == SMALL_SESSION + line1 + line2
    changed = line2.replace(b'"k"', b'"other"')
    conflict = services.import_bytes(SMALL_SESSION + line1 + changed + b"\n")
    assert not conflict.ok and conflict.errors[0].code == "conflict"


def test_big_files_take_the_line_by_line_path_with_the_same_result(tmp_path, monkeypatch):
    # every file counts as big: read by import_file (which source) and the report (which checks)
    monkeypatch.setattr(file_imports, "FULL_VALIDATION_LIMIT", 100)
    monkeypatch.setattr(file_scan, "FULL_VALIDATION_LIMIT", 100)
    odd = (
        SMALL_SESSION
        + b"{broken\n"
        + (
            b'{"type":"custom","customType":"k","id":"c0ffee00","parentId":"1b2c3d4e","timestamp":"t"}'
        )
    )
    path = tmp_path / "big.jsonl"
    path.write_bytes(odd)
    result = services.import_file(str(path))
    assert result.ok, result.problems
    assert {"malformed-line", "missing-final-newline"} <= {p.code for p in result.warnings}
    session = result.session
    assert files.export_bytes(session) == odd
    # grown on disk: only the new line is added, still line by line
    grown = (
        odd
        + b"\n"
        + (
            b'{"type":"custom","customType":"k","id":"c0ffee01","parentId":"c0ffee00","timestamp":"t"}\n'
        )
    )
    path.write_bytes(grown)
    again = services.import_file(str(path))
    assert again.ok and again.added == 1
    session.refresh_from_db()
    assert files.export_bytes(session) == grown
    assert services.import_file(str(path)).unchanged


def test_an_unfinished_last_line_can_wait_for_the_writer(db):
    partial = SMALL_SESSION + b'{"type":"custom","customType":"k","id":"c0'
    result = services.import_bytes(partial, defer_incomplete_tail=True)
    assert result.ok and result.added == 8
    assert files.export_bytes(result.session) == SMALL_SESSION
    done = SMALL_SESSION + (
        b'{"type":"custom","customType":"k","id":"c0ffee00","parentId":"1b2c3d4e","timestamp":"t"}\n'
    )
    later = services.import_bytes(done, defer_incomplete_tail=True)
    assert later.ok and later.added == 1
    assert files.export_bytes(later.session) == done


def test_every_leaf_of_a_stored_session_projects_like_the_engine(db):
    from explorer.demo import data_pipeline_session, flaky_login_session
    from explorer.session.context import projection_from_path

    for build in (flaky_login_session, data_pipeline_session):
        data = build()
        session = services.import_bytes(data).session
        engine = SessionManager.load_readonly(data)
        leaves = Entry.objects.filter(session=session, child_count=0).values_list(
            "entry_id", flat=True
        )
        assert len(leaves) >= 2
        for leaf in leaves:
            engine.branch(leaf)
            expected = engine.build_session_projection().to_json()
            assert projection_from_path(queries.path_to(session, leaf)).to_json() == expected
            assert [e["id"] for e in queries.path_to(session, leaf)] == [
                e["id"] for e in engine.get_branch(leaf)
            ]


@pytest.mark.pi_fixtures
def test_a_legacy_file_rewritten_by_pi_is_not_merged_twice(tmp_path):

    path = PI_FIXTURES / "large-session.jsonl"
    first = services.import_bytes(path.read_bytes(), source_path=str(path))
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(path.read_bytes())
    SessionManager.open(str(copy))  # Pi's open migrates and rewrites with new ids
    again = services.import_bytes(copy.read_bytes())
    assert not again.ok and again.errors[0].code == "legacy-changed"
    assert Entry.objects.filter(session=first.session).count() == first.added


def test_another_history_under_the_same_id_is_refused(make_session):
    session = make_session()
    head = SMALL_SESSION.split(b"\n", 1)[0] + b"\n"
    other = (
        head
        + b'{"type":"custom","customType":"k","id":"ffffffff","parentId":null,"timestamp":"t"}\n'
    )
    result = services.import_bytes(other)
    assert not result.ok and result.errors[0].code == "conflict"
    assert Entry.objects.filter(session=session).count() == 8


def _custom(eid: str, parent: str | None) -> bytes:
    line = {"type": "custom", "customType": "k", "id": eid, "parentId": parent, "timestamp": "t"}
    return jsonfmt.dumps(line).encode() + b"\n"


def test_a_batch_of_lines_stores_the_depths_and_counts_a_fresh_import_computes(make_session):
    """One append of many lines (the follower's batches) is set-based; its depths, child
    counts and leaf count must be those an import of the same bytes computes."""
    session = make_session()
    batch = (
        _custom("77777771", "1b2c3d4e")  # under the stored tip
        + _custom("77777772", "77777771")  # under a line of this batch
        + _custom("77777773", "77777771")  # its second child: a branch inside the batch
        + _custom("77777774", "a1b2c3d4")  # under a stored entry that has children already
        + _custom("77777775", "0000dead")  # a dangling parent
        + _custom("77777776", None)  # a new root
    )
    created = storage.append_lines(session, batch)
    assert [r.entry_id for r in created] == [f"7777777{i}" for i in range(1, 7)]

    def shape(s):
        s.refresh_from_db()
        rows = Entry.objects.filter(session=s).order_by("position")
        entries = [(e.entry_id, e.position, e.depth, e.child_count) for e in rows]
        return entries, s.entry_count, s.leaf_count

    appended = shape(session)
    data = files.export_bytes(session)
    session.delete()
    fresh = services.import_bytes(data).session
    assert fresh is not None and shape(fresh) == appended


def test_a_batch_with_a_taken_or_repeated_id_stores_nothing(make_session):
    session = make_session()
    before = Entry.objects.filter(session=session).count()
    for batch, taken in (
        (_custom("66666661", "1b2c3d4e") + _custom("a1b2c3d4", "66666661"), "a1b2c3d4"),
        (_custom("66666662", "1b2c3d4e") + _custom("66666662", "1b2c3d4e"), "66666662"),
    ):
        with pytest.raises(storage.IdCollision) as refused:
            storage.append_lines(session, batch)
        assert str(refused.value) == taken
    assert Entry.objects.filter(session=session).count() == before
