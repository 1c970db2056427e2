"""manage.py import_sessions / export_session / demo."""

from __future__ import annotations

import shutil

import pytest
from django.core.management import CommandError, call_command

from explorer import files
from explorer.models import Entry, Session
from tests.conftest import PI_FIXTURES, SMALL_SESSION

pytestmark = pytest.mark.django_db


@pytest.mark.pi_fixtures
def test_it_imports_a_pi_sessions_directory_keeping_cwd_groups(tmp_path, capsys):
    root = tmp_path / "sessions"
    (root / "--home-ana-proj--").mkdir(parents=True)
    (root / "--srv-other--").mkdir()
    (root / "--home-ana-proj--" / "2025-03-04T05-06-07-089Z_a.jsonl").write_bytes(SMALL_SESSION)
    shutil.copy(PI_FIXTURES / "large-session.jsonl", root / "--srv-other--" / "x.jsonl")
    (root / "--srv-other--" / "notes.txt").write_text("not a session")
    call_command("import_sessions", str(root))
    assert Session.objects.count() == 2
    assert set(Session.objects.values_list("cwd", flat=True)) == {
        "/home/ana/proj",
        "/Users/badlogic/workspaces/pi-mono",
    }
    out = capsys.readouterr().out
    assert "2 new, 0 grown, 0 unchanged, 0 rejected" in out
    call_command("import_sessions", str(root))
    assert "0 new, 0 grown, 2 unchanged, 0 rejected" in capsys.readouterr().out


def test_a_rejected_file_makes_the_command_fail(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"type":"message"}\n')
    with pytest.raises(CommandError):
        call_command("import_sessions", str(bad))
    assert "line 1" in capsys.readouterr().err
    assert Session.objects.count() == 0


def test_export_session_writes_the_stored_bytes(make_session, tmp_path):
    session = make_session()
    target = tmp_path / "out.jsonl"
    call_command("export_session", session.session_id, "-o", str(target))
    assert target.read_bytes() == SMALL_SESSION
    with pytest.raises(CommandError):
        call_command("export_session", "no-such-id", "-o", str(target))


def test_demo_sessions_show_every_feature(capsys):
    call_command("demo")
    call_command("demo")  # idempotent
    assert Session.objects.count() == 2
    login = Session.objects.get(name="Fix the flaky login test")
    types = set(Entry.objects.filter(session=login).values_list("type", flat=True))
    assert {
        "message",
        "compaction",
        "branch_summary",
        "label",
        "context_edit",
        "session_info",
        "model_change",
        "thinking_level_change",
    } <= types
    assert login.leaf_count >= 2 and login.compaction_count == 1
    compaction = Entry.objects.get(session=login, type="compaction").data()
    assert compaction["firstKeptEntryId"] != compaction["id"]  # a kept tail
    raw = files.export_bytes(login).decode()
    assert '"type":"image"' in raw and '"type":"thinking"' in raw and '"toolResult"' in raw
    from explorer.session.manager import SessionManager

    engine = SessionManager.load_readonly(files.export_bytes(login))
    assert engine.get_session_name() == "Fix the flaky login test"
    assert not [p for p in login.problems.all() if p.severity == "error"]


def test_a_rejected_file_lists_its_warnings_too(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(
        b'{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/x"}\n'
        b'{"type":"label","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","targetId":"a1","label":"x"}\n'
        b"{not json\n"
        b'{"type":"label","id":"a1","parentId":null,"timestamp":"2025-01-01T00:00:02.000Z","targetId":"a1","label":"y"}\n'
    )
    with pytest.raises(CommandError):
        call_command("import_sessions", str(bad))
    err = capsys.readouterr().err
    assert "line 4: error: duplicate id" in err
    assert "line 3: warning" in err
    assert Session.objects.count() == 0
