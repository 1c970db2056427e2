"""Writes through services: the engine builds every entry, the single writer stores it,
broadcasts follow the commit."""

from __future__ import annotations

import threading

import pytest

from explorer import broadcast, files, services
from explorer.models import Entry
from explorer.session.errors import SessionError
from explorer.session.manager import SessionManager
from explorer.session.tokens import CompactionSettings

pytestmark = pytest.mark.django_db


def _engine(session):
    return SessionManager.load_readonly(files.export_bytes(session))


def test_a_context_edit_is_appended_at_the_cursor(make_session, editor_user):
    session = make_session()
    services.move_cursor(session, editor_user, "d4e5f6a7")
    result = services.add_context_edit(session, editor_user, "b2c3d4e5", {"content": "shorter"})
    data = result.entry.data()
    assert data["type"] == "context_edit" and data["parentId"] == "d4e5f6a7"
    # the engine normalises assistant replacements to a block list
    assert data["replacement"] == {"content": [{"type": "text", "text": "shorter"}]}
    engine = _engine(session)
    assert engine.get_leaf_id() == result.entry.entry_id
    session.refresh_from_db()
    assert session.context_edit_count == 2


def test_engine_errors_write_nothing(make_session, editor_user):
    session = make_session()
    services.move_cursor(session, editor_user, "e5f6a7b8")
    with pytest.raises(SessionError, match="is not on the active branch"):
        services.add_context_edit(session, editor_user, "c3d4e5f6", None)
    with pytest.raises(SessionError, match="Entry nope not found"):
        services.set_label(session, editor_user, "nope", "x")
    assert Entry.objects.filter(session=session).count() == 8


def test_moving_a_cursor_appends_nothing(make_session, editor_user, viewer_user):
    session = make_session()
    services.move_cursor(session, editor_user, "e5f6a7b8")
    assert services.cursor_for(session, editor_user).entry_id == "e5f6a7b8"
    assert services.cursor_for(session, viewer_user).entry_id == "1b2c3d4e"  # file's leaf
    assert Entry.objects.filter(session=session).count() == 8
    with pytest.raises(SessionError):
        services.move_cursor(session, editor_user, "missing")


def test_a_null_cursor_starts_a_new_root(make_session, editor_user):
    session = make_session()
    result = services.rename_session(session, editor_user, "fresh", leaf_id=None)
    assert result.entry.parent_id is None and result.entry.depth == 0
    session.refresh_from_db()
    assert session.name == "fresh"


def test_branch_with_summary_records_where_the_user_came_from(make_session, editor_user):
    session = make_session()
    result = services.branch_with_summary(session, editor_user, "a1b2c3d4", "what we learned")
    data = result.entry.data()
    assert data["type"] == "branch_summary" and data["fromId"] == "1b2c3d4e"
    assert data["parentId"] == "a1b2c3d4"


def test_compaction_runs_on_the_stored_path(make_session, editor_user):
    from explorer.demo import flaky_login_session

    session = make_session(flaky_login_session())
    before = Entry.objects.filter(session=session).count()
    settings = CompactionSettings(True, 16384, 50)
    result = services.compact_now(session, editor_user, settings=settings)
    entry = result.entry.data()
    assert entry["type"] == "compaction" and entry["fromHook"] is False
    assert Entry.objects.filter(session=session).count() == before + 1
    # The stored result equals what the engine computes on the exported file.
    engine = _engine(session)
    assert engine.get_leaf_id() == entry["id"]
    with pytest.raises(SessionError, match="Already compacted"):
        services.compact_now(session, editor_user, settings=settings)


def test_broadcasts_follow_the_commit(
    make_session, editor_user, django_capture_on_commit_callbacks, sent_broadcasts
):
    session = make_session()
    with django_capture_on_commit_callbacks(execute=False) as pending:
        result = services.set_label(session, editor_user, "a1b2c3d4", "again")
    assert sent_broadcasts == []  # nothing reaches a viewer before the commit
    for callback in pending:
        callback()
    with django_capture_on_commit_callbacks(execute=True):
        services.move_cursor(session, editor_user, "a1b2c3d4")
    seen = [
        ("append", [e["id"] for e in m["entries"]], m["source"])
        if m["type"] == "live.entries"
        else ("move", m["entry_id"], m["user_name"])
        for m in sent_broadcasts
    ]
    assert seen[0] == ("append", [result.entry.entry_id], "edit")
    assert seen[1] == ("move", result.entry.entry_id, "eddie")
    assert seen[2] == ("move", "a1b2c3d4", "eddie")


def test_an_import_broadcasts_its_new_entries(
    db, small_session_bytes, django_capture_on_commit_callbacks, sent_broadcasts
):
    with django_capture_on_commit_callbacks(execute=True):
        services.import_bytes(small_session_bytes)
    assert [(len(m["entries"]), m["source"]) for m in sent_broadcasts] == [(8, "import")]


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_keep_one_writer(small_session_bytes, django_user_model, monkeypatch):
    from explorer.permissions import set_role

    user = django_user_model.objects.create_user("w", password="pw")
    set_role(user, "editor")
    session = services.import_bytes(small_session_bytes).session
    errors = []
    # The test database is SQLite in memory with a shared cache, where a reader in another
    # thread (live broadcasting reacts to every append) makes a writer fail at once instead
    # of waiting; only the writers themselves are under test here.
    monkeypatch.setattr(broadcast, "entries_appended", lambda *args, **kwargs: None)
    monkeypatch.setattr(broadcast, "cursor_moved", lambda *args, **kwargs: None)

    def worker(n):
        from django.db import connection

        try:
            for i in range(3):
                services.set_label(session, user, "a1b2c3d4", f"t{n}-{i}", leaf_id="1b2c3d4e")
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    positions = list(
        Entry.objects.filter(session=session)
        .order_by("position")
        .values_list("position", flat=True)
    )
    assert positions == list(range(1, 18))
    session.refresh_from_db()
    assert session.entry_count == 17
    assert Entry.objects.get(session=session, entry_id="1b2c3d4e").child_count == 9
