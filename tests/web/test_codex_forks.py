"""A Codex fork file joins its parent's stored tree as a branch, its replayed prefix stored
once, while each file's original bytes are kept and exported unchanged (`pisession` still
reads each file on its own)."""

from __future__ import annotations

import json
import shutil

import pytest
from django.core.management import call_command

from explorer.models import CodexFork, Entry, Session
from explorer.session.formats import load_foreign
from tests.conftest import FIXTURES_DIR

pytestmark = [pytest.mark.django_db, pytest.mark.agent_fixtures]

CODEX_OWN = FIXTURES_DIR / "codex" / "own" / "sessions" / "2026" / "10" / "12"
PARENT = "rollout-2026-10-12T10-00-00-019a2000-0000-7000-8000-0000000000e1.jsonl"
FORK = "rollout-2026-10-12T10-30-00-019a2000-0000-7000-8000-0000000000e2.jsonl"
FORK_ID = "019a2000-0000-7000-8000-0000000000e2"


def _copy(tmp_path):
    parent, fork = tmp_path / PARENT, tmp_path / FORK
    shutil.copyfile(CODEX_OWN / PARENT, parent)
    shutil.copyfile(CODEX_OWN / FORK, fork)
    return parent, fork


def _line(text: str) -> bytes:
    payload = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    record = {"timestamp": "2026-10-12T11:00:00.000Z", "type": "response_item", "payload": payload}
    return json.dumps(record).encode() + b"\n"


def _own_entries(session: Session) -> list[tuple[str, str]]:
    return list(
        Entry.objects.filter(session=session, entry_id__startswith=f"{FORK_ID}:")
        .order_by("position")
        .values_list("entry_id", "parent_id")
    )


def _download(client, session: Session, query: str = "") -> bytes:
    response = client.get(f"/sessions/{session.pk}/export.jsonl{query}")
    assert response.status_code == 200
    return b"".join(response.streaming_content)


def _assert_joined(parent_file, fork_file, admin_client) -> Session:
    session = Session.objects.get()  # one session: the fork is a branch of the parent's tree
    parent = load_foreign(str(parent_file))
    assert session.session_id == f"codex:{parent.session_id}"
    # The fork's own turn hangs from the parent's last replayed message; its prefix is the
    # parent's entries, stored once.
    assert _own_entries(session) == [(f"{FORK_ID}:L8", "L12"), (f"{FORK_ID}:L11", f"{FORK_ID}:L8")]
    assert session.entry_count == len(parent.entries()) + 2
    assert session.leaf_count == len(parent.leaves()) + 1
    # Both files' bytes are kept and exported unchanged.
    assert _download(admin_client, session) == parent_file.read_bytes()
    assert _download(admin_client, session, f"?fork={FORK_ID}") == fork_file.read_bytes()
    fork = CodexFork.objects.get()
    assert fork.session == session and bytes(fork.original) == fork_file.read_bytes()
    return session


def test_a_fork_joins_its_parents_tree_and_both_files_export_unchanged(
    tmp_path, admin_client, viewer_client
):
    parent_file, fork_file = _copy(tmp_path)
    call_command("import_sessions", str(tmp_path))
    session = _assert_joined(parent_file, fork_file, admin_client)
    leaf = f"{FORK_ID}:L11"
    page = viewer_client.get(f"/sessions/{session.pk}/context/", {"leaf": leaf}).content.decode()
    assert "Entry added under 1.4." in page and "write it in German" in page
    tabs = viewer_client.get(f"/sessions/{session.pk}/").content.decode()
    assert f"?fork={FORK_ID}" in tabs and "Codex forks joined here" in tabs
    # pisession still reads the fork file on its own: its prefix is part of it.
    alone = load_foreign(str(fork_file))
    assert len(alone.route(alone.current_leaf)) == 5


def test_importing_either_file_again_adds_nothing(tmp_path, admin_client, capsys):
    parent_file, fork_file = _copy(tmp_path)
    call_command("import_sessions", str(tmp_path))
    capsys.readouterr()
    call_command("import_sessions", str(fork_file))
    call_command("import_sessions", str(parent_file))
    call_command("import_sessions", str(tmp_path))
    out = capsys.readouterr().out
    assert "0 new, 0 grown, 1 unchanged, 0 rejected" in out
    assert "0 new, 0 grown, 2 unchanged, 0 rejected" in out
    assert "shorter" not in out
    _assert_joined(parent_file, fork_file, admin_client)


def test_a_fork_imported_before_its_parent_joins_when_the_parent_arrives(tmp_path, admin_client):
    parent_file, fork_file = _copy(tmp_path)
    call_command("import_sessions", str(fork_file))
    alone = Session.objects.get()
    assert alone.session_id == f"codex:{FORK_ID}"
    assert _download(admin_client, alone) == fork_file.read_bytes()
    call_command("import_sessions", str(parent_file))
    _assert_joined(parent_file, fork_file, admin_client)
    assert not Session.objects.filter(pk=alone.pk).exists()


def test_a_separate_fork_session_with_site_data_is_kept(tmp_path, editor_client):
    from explorer import services

    parent_file, fork_file = _copy(tmp_path)
    call_command("import_sessions", str(fork_file))
    alone = Session.objects.get()
    services.rename_session(alone, editor_client.user, "my fork")
    call_command("import_sessions", str(parent_file))
    assert Session.objects.filter(pk=alone.pk).exists()
    joined = Session.objects.exclude(pk=alone.pk).get()
    assert len(_own_entries(joined)) == 2


def test_a_joined_fork_and_its_parent_both_grow(tmp_path, admin_client, capsys):
    parent_file, fork_file = _copy(tmp_path)
    call_command("import_sessions", str(tmp_path))
    session = Session.objects.get()
    before = session.entry_count
    with parent_file.open("ab") as fh:
        fh.write(_line("parent goes on"))
    fork_lines = fork_file.read_bytes().count(b"\n")
    with fork_file.open("ab") as fh:
        fh.write(_line("fork goes on"))
    call_command("import_sessions", str(parent_file))
    call_command("import_sessions", str(fork_file))
    session.refresh_from_db()
    assert session.entry_count == before + 2
    assert Entry.objects.get(session=session, entry_id="L41").parent_id == "L38"
    grown = Entry.objects.get(session=session, entry_id=f"{FORK_ID}:L{fork_lines + 1}")
    assert grown.parent_id == f"{FORK_ID}:L11"
    assert _download(admin_client, session) == parent_file.read_bytes()
    assert _download(admin_client, session, f"?fork={FORK_ID}") == fork_file.read_bytes()
    capsys.readouterr()
    call_command("import_sessions", str(tmp_path))
    assert "0 new, 0 grown, 2 unchanged, 0 rejected" in capsys.readouterr().out
    assert Session.objects.count() == 1


def test_an_unknown_fork_download_is_not_found(tmp_path, admin_client):
    _copy(tmp_path)
    call_command("import_sessions", str(tmp_path))
    session = Session.objects.get()
    response = admin_client.get(f"/sessions/{session.pk}/export.jsonl?fork=nope")
    assert response.status_code == 404
