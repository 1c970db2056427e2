"""The import path's own behaviour: progress in entries and bytes while a file streams, an
empty file among several, a shorter re-upload, duplicate ids explained, and the search index
filled by the importer's own pass."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from explorer import files, services
from explorer.models import EntryText, Session
from tests.conftest import SMALL_SESSION

pytestmark = pytest.mark.django_db

TOKEN = "0123456789abcdef0123456789abcdef"


def _upload(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def _progress(client, token: str = TOKEN) -> dict:
    response = client.get(reverse("explorer:import_progress", args=[token]))
    assert response.status_code == 200
    return json.loads(response.content)


def test_an_empty_file_among_several_gets_its_own_card_not_a_second_page(admin_client):
    other = SMALL_SESSION.replace(b"0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a2b", b"other-session-id")
    response = admin_client.post(
        reverse("explorer:import"),
        {
            "files": [
                _upload("a.jsonl", SMALL_SESSION),
                _upload("empty.jsonl", b""),
                _upload("b.jsonl", other),
            ]
        },
        HTTP_X_UPLOAD="1",
    )
    text = response.content.decode()
    assert response.status_code == 422  # one of them was refused
    assert "<html" not in text and 'id="import-form"' not in text
    assert text.count('class="upload-item"') == 3
    assert "empty.jsonl is empty (0 bytes)" in text
    assert Session.objects.count() == 2


def test_an_empty_file_alone_from_the_page_gets_a_card(admin_client):
    response = admin_client.post(
        reverse("explorer:import"), {"files": _upload("empty.jsonl", b"")}, HTTP_X_UPLOAD="1"
    )
    text = response.content.decode()
    assert response.status_code == 422
    assert "<html" not in text and "Rejected — nothing imported" in text and "empty" in text


def test_an_invalid_form_from_the_page_answers_with_a_card_not_the_page(admin_client):
    response = admin_client.post(reverse("explorer:import"), {}, HTTP_X_UPLOAD="1")
    text = response.content.decode()
    assert response.status_code == 400
    assert "<html" not in text and 'id="import-form"' not in text
    assert "Rejected — nothing imported" in text


def test_a_shorter_re_upload_says_so_instead_of_nothing_new(admin_client):
    admin_client.post(reverse("explorer:import"), {"files": _upload("s.jsonl", SMALL_SESSION)})
    cut = SMALL_SESSION[: SMALL_SESSION.rindex(b"\n", 0, len(SMALL_SESSION) - 1) + 1]
    response = admin_client.post(
        reverse("explorer:import"), {"files": _upload("s.jsonl", cut)}, HTTP_X_UPLOAD="1"
    )
    text = response.content.decode()
    assert response.status_code == 200
    assert "Shorter than the stored copy" in text and "nothing new" in text
    assert "Already imported" not in text
    assert f"{len(cut):,} bytes, shorter than the stored copy" in text
    session = Session.objects.get()
    assert session.entry_count == 8 and session.source_size == len(SMALL_SESSION)


def test_duplicate_ids_explain_why_the_file_is_not_imported(admin_client):
    line = SMALL_SESSION.split(b"\n")[1]
    response = admin_client.post(
        reverse("explorer:import"),
        {"files": _upload("d.jsonl", SMALL_SESSION + line + b"\n")},
        HTTP_X_UPLOAD="1",
    )
    text = response.content.decode()
    assert response.status_code == 422
    assert "a1b2c3d4" in text and "line 10" in text
    assert "Why a file with duplicate entry ids is not imported" in text
    assert "index keeps the later line" in text
    assert Session.objects.count() == 0


def test_a_bom_file_from_the_page_names_the_bom(admin_client):
    response = admin_client.post(
        reverse("explorer:import"),
        {"files": _upload("bom.jsonl", b"\xef\xbb\xbf" + SMALL_SESSION)},
        HTTP_X_UPLOAD="1",
    )
    assert response.status_code == 422
    assert "byte order mark" in response.content.decode()


def test_the_page_polls_entries_and_bytes_of_its_upload(admin_client):
    assert _progress(admin_client)["phase"] == "waiting"
    response = admin_client.post(
        reverse("explorer:import"),
        {"files": _upload("p.jsonl", SMALL_SESSION)},
        HTTP_X_UPLOAD="1",
        HTTP_X_UPLOAD_TOKEN=TOKEN,
    )
    assert response.status_code == 200
    state = _progress(admin_client)
    assert state["phase"] == "done" and state["name"] == "p.jsonl"
    assert state["entries"] == 8
    assert state["bytes"] == state["total"] == len(SMALL_SESSION)


def test_another_admin_does_not_see_the_progress(admin_client, django_user_model):
    admin_client.post(
        reverse("explorer:import"),
        {"files": _upload("p.jsonl", SMALL_SESSION)},
        HTTP_X_UPLOAD_TOKEN=TOKEN,
    )
    from django.test import Client

    from explorer.permissions import set_role

    other = django_user_model.objects.create_user("grace", password="x")
    set_role(other, "admin")
    client = Client()
    client.force_login(other)
    assert _progress(client)["phase"] == "waiting"
    assert _progress(admin_client)["phase"] == "done"


def test_a_malformed_token_is_never_a_cache_key(admin_client):
    response = admin_client.get(reverse("explorer:import_progress", args=["not-hex!"]))
    assert json.loads(response.content)["phase"] == "waiting"


def test_the_importer_reports_as_it_streams(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_bytes(SMALL_SESSION)
    seen: list[tuple[str, int, int]] = []
    progress = files.ImportProgress(
        total=len(SMALL_SESSION), report=lambda p: seen.append((p.phase, p.entries, p.bytes))
    )
    progress.every = 0.0  # every line
    result = services.import_file(str(path), progress=progress)
    assert result.ok and result.added == 8
    entries = [e for _phase, e, _b in seen]
    assert entries == sorted(entries) and entries[-1] == 8
    assert seen[-1][0] == "finishing" and seen[-1][2] == len(SMALL_SESSION)
    assert len({b for _p, _e, b in seen}) > 3  # figures move while the file is read


def test_the_search_index_comes_from_the_import_pass(tmp_path):
    result = services.import_bytes(SMALL_SESSION)
    session = result.session
    rows = sorted(
        EntryText.objects.filter(session=session).values_list("entry_id", "type", "role", "text")
    )
    assert rows and any("summarise" in text for *_x, text in rows)
    # The same rows a separate pass over the stored lines would write.
    EntryText.objects.filter(session=session).delete()
    assert files.index_new_entries(session) == len(rows)
    again = sorted(
        EntryText.objects.filter(session=session).values_list("entry_id", "type", "role", "text")
    )
    assert again == rows


def test_a_rewritten_copy_adds_only_its_new_entries_in_file_order(tmp_path):
    """Merged by id in two passes over the file (digests, not the stored lines, in memory)."""
    first = services.import_bytes(SMALL_SESSION)
    lines = SMALL_SESSION.split(b"\n")
    extra = (
        b'{"type":"message","id":"ffff0001","parentId":"a1b2c3d4","timestamp":"t",'
        b'"message":{"role":"user","content":"a later question","timestamp":1}}'
    )
    # A blank line early on changes the prefix, so the file is not a plain growth.
    rewritten = b"\n".join([lines[0], lines[1], b"", *lines[2:-1], extra]) + b"\n"
    result = services.import_bytes(rewritten)
    assert result.ok and not result.created and result.added == 1
    session = Session.objects.get(pk=first.session.pk)
    assert session.entry_count == 9
    assert EntryText.objects.filter(session=session, entry_id="ffff0001").exists()
    changed = rewritten.replace(b"Read demo.txt", b"Read other.txt")
    refused = services.import_bytes(changed)
    assert not refused.ok and any(p.code == "conflict" for p in refused.errors)


def test_the_command_line_reports_entries_and_bytes(tmp_path):
    import io

    from django.core.management import call_command

    path = tmp_path / "s.jsonl"
    path.write_bytes(SMALL_SESSION)
    err = io.StringIO()
    call_command("import_sessions", str(path), "--progress", stdout=io.StringIO(), stderr=err)
    text = err.getvalue()
    assert "finishing: 8 entries" in text
    assert f"{len(SMALL_SESSION):,} of {len(SMALL_SESSION):,} bytes (100%)" in text
