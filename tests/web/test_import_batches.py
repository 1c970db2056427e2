"""A new session's import commits in batches while it stays hidden: other writers keep
writing meanwhile, nothing of a refused or killed import is left behind, and nobody sees a
half-imported session."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading

import pytest
from django.db import connections
from django.utils import timezone

from explorer import files, queries, services
from explorer.files import imports, store
from explorer.models import Entry, EntryText, Session

pytestmark = pytest.mark.django_db(transaction=True)

LAST_ID = "1b2c3d4e"  # the small session's last entry
ROWS = 40  # rows per batch here, so a small file makes several batches


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    monkeypatch.setattr(store, "_BATCH_ROWS", ROWS)  # read by the batch writer


def _file(session_id: str, count: int, *, duplicate_last: bool = False) -> bytes:
    head = {"type": "session", "version": 3, "id": session_id, "timestamp": "2025-03-04T05:06:07Z",
            "cwd": "/w"}  # fmt: skip
    lines = [json.dumps(head)]
    parent = None
    for k in range(count):
        eid = f"{k:08x}"
        entry = {"type": "message", "id": eid, "parentId": parent,
                 "timestamp": "2025-03-04T05:06:08Z",
                 "message": {"role": "user", "content": f"line {k} quokka", "timestamp": 1}}  # fmt: skip
        lines.append(json.dumps(entry))
        parent = eid
    if duplicate_last:
        lines.append(lines[1])  # the first entry again, after many committed batches
    return ("\n".join(lines) + "\n").encode()


def _in_thread(fn) -> object:
    """Run ``fn`` on another thread, with its own database connection, and return its
    result (or raise its exception): a second writer, as another request would be."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed back to the test
            box["error"] = exc
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


def test_other_writers_write_while_an_import_runs_and_see_no_half_session(
    make_session, editor_user
):
    other = make_session()
    seen: list[tuple] = []

    def during_import(progress: files.ImportProgress) -> None:
        if seen or progress.entries < 3 * ROWS:
            return
        # Mid-import, from another connection: a label on another session is written...
        label = _in_thread(
            lambda: services.set_label(other, editor_user, LAST_ID, "reviewed").entry.entry_id
        )
        # ...and the session being imported is nobody's to see yet.
        visible = _in_thread(lambda: Session.objects.filter(session_id="big-one").exists())
        hidden = _in_thread(
            lambda: list(Session.every.filter(session_id="big-one").values_list("state", "pk"))
        )
        found = _in_thread(lambda: queries.search_entries("quokka")["total"])
        # ...though whole batches of its rows are already committed (small batches here).
        committed = _in_thread(lambda: Entry.objects.filter(session__session_id="big-one").count())
        seen.append((label, visible, hidden, found, committed))

    progress = files.ImportProgress(report=during_import, every=0)
    with files.reporting(progress):
        result = services.import_bytes(_file("big-one", 10 * ROWS))
    assert result.ok and result.added == 10 * ROWS
    ((label, visible, hidden, found, committed),) = seen
    assert committed >= ROWS and committed % ROWS == 0
    assert found == 0  # its batches are indexed, but search does not list them yet
    assert Entry.objects.filter(session=other, entry_id=label, type="label").exists()
    assert visible is False
    assert hidden and hidden[0][0] == Session.IMPORTING and hidden[0][1] == result.session.pk
    session = Session.objects.get(session_id="big-one")
    assert session.state == Session.READY and session.entry_count == 10 * ROWS
    assert session.import_owner == "" and session.import_heartbeat is None
    assert EntryText.objects.filter(session=session).count() == 10 * ROWS
    assert queries.search_entries("quokka")["total"] == 10 * ROWS


def test_a_session_page_answers_404_while_its_import_runs(client, admin_user):
    client.force_login(admin_user)
    answers: list[int] = []

    def during_import(progress: files.ImportProgress) -> None:
        if answers or progress.entries < 2 * ROWS:
            return
        pk = _in_thread(lambda: Session.every.get(session_id="paged").pk)
        answers.append(client.get(f"/sessions/{pk}/").status_code)
        answers.append(client.get("/?format=json").content.count(b"paged"))

    with files.reporting(files.ImportProgress(report=during_import, every=0)):
        assert services.import_bytes(_file("paged", 5 * ROWS)).ok
    assert answers == [404, 0]


def test_a_blocking_problem_after_committed_batches_leaves_nothing_behind():
    before = (Session.every.count(), Entry.objects.count(), EntryText.objects.count())
    result = services.import_bytes(_file("dup-late", 6 * ROWS, duplicate_last=True))
    assert not result.ok and [p.code for p in result.errors] == ["duplicate-id"]
    assert result.session is None
    assert (Session.every.count(), Entry.objects.count(), EntryText.objects.count()) == before
    # The file fixed, it imports whole.
    assert services.import_bytes(_file("dup-late", 6 * ROWS)).ok


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_an_import_whose_process_died_is_removed_and_the_file_imports_again():
    data = _file("killed", 3 * ROWS)
    header, index, line, _ = files.find_header(data)
    stale = imports._new_session(header, index, line, None, "", state=Session.IMPORTING,
                                 import_owner=f"{socket.gethostname()}:{_dead_pid()}")  # fmt: skip
    Entry.objects.create(session=stale, entry_id="half", position=1, line_no=2, raw="{}")
    assert not Session.objects.filter(pk=stale.pk).exists()
    result = services.import_bytes(data)  # the next import clears it first
    assert result.ok and result.added == 3 * ROWS
    assert not Session.every.filter(pk=stale.pk).exists()
    assert not Entry.objects.filter(entry_id="half").exists()


def test_a_running_import_of_the_same_file_is_not_entered_twice():
    data = _file("twice", 2 * ROWS)
    header, index, line, _ = files.find_header(data)
    imports._new_session(header, index, line, None, "", state=Session.IMPORTING,
                         import_owner=files.import_owner(),
                         import_heartbeat=timezone.now())  # fmt: skip
    result = services.import_bytes(data)
    assert not result.ok and [p.code for p in result.errors] == ["import-running"]
    assert "being imported by another process" in str(result.errors[0])
    assert files.clear_abandoned() == 0  # alive and recent: left alone


def test_serve_setup_removes_unfinished_imports(capsys, monkeypatch):
    from django.core.management import call_command

    # ``serve`` sets these for the server it starts; put them back for the rest of the run.
    for name in ("SESSIONS_LOCAL_SERVE", "DEBUG"):
        monkeypatch.setenv(name, os.environ.get(name, ""))
        monkeypatch.delenv(name)

    data = _file("left-over", ROWS)
    header, index, line, _ = files.find_header(data)
    imports._new_session(header, index, line, None, "", state=Session.IMPORTING,
                         import_owner=f"{socket.gethostname()}:{_dead_pid()}")  # fmt: skip
    call_command("serve", "--setup-only", "--no-demo")
    assert "Removed 1 unfinished import" in capsys.readouterr().out
    assert not Session.every.filter(session_id="left-over").exists()
