"""The import page: uploads of one or many files, atomic rejection with line-numbered
errors shown in the page, warnings for what Pi tolerates, exports byte-identical."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from explorer.models import Entry, Session
from tests.conftest import SMALL_SESSION

pytestmark = pytest.mark.django_db


def _upload(name: str, data: bytes) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def test_the_import_page_offers_drag_and_drop(admin_client):
    response = admin_client.get(reverse("explorer:import"))
    assert response.status_code == 200
    assert b'id="dropzone"' in response.content and b"multiple" in response.content


def test_it_imports_several_files_at_once(admin_client):
    other = SMALL_SESSION.replace(b"0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a2b", b"other-session-id")
    response = admin_client.post(
        reverse("explorer:import"),
        {
            "files": [_upload("a.jsonl", SMALL_SESSION), _upload("b.jsonl", other)],
        },
    )
    assert response.status_code == 200
    assert Session.objects.count() == 2
    assert b"Imported 8 entries" in response.content
    assert Session.objects.get(session_id="other-session-id").imported_by.username == "ada"


def test_a_bad_line_rejects_the_file_and_shows_each_problem(admin_client):
    bad = SMALL_SESSION + (
        b'{"type":"label","id":"a1b2c3d4","parentId":null,"timestamp":"t","targetId":"x"}\n'
    )
    response = admin_client.post(reverse("explorer:import"), {"files": _upload("bad.jsonl", bad)})
    assert response.status_code == 422
    text = response.content.decode()
    assert "Rejected — nothing imported" in text
    assert "line 10" in text and "a1b2c3d4" in text and "uplicate" in text
    assert Session.objects.count() == 0 and Entry.objects.count() == 0


def test_tolerated_defects_import_with_warnings(admin_client):
    data = SMALL_SESSION + b"{oops this is not json\n"
    response = admin_client.post(
        reverse("explorer:import"), {"files": _upload("w.jsonl", data)}, HTTP_X_UPLOAD="1"
    )
    assert response.status_code == 200
    text = response.content.decode()
    assert "<html" not in text  # the XHR gets the result fragment only
    assert "line 10" in text and "not valid JSON" in text
    session = Session.objects.get()
    assert session.warning_count >= 1
    export = admin_client.get(reverse("explorer:export", args=[session.pk]))
    assert b"".join(export.streaming_content) == data
    problems = admin_client.get(reverse("explorer:problems", args=[session.pk]))
    assert b"line 10" in problems.content


def test_reimport_reports_nothing_new(admin_client, make_session):
    make_session()
    response = admin_client.post(
        reverse("explorer:import"), {"files": _upload("a.jsonl", SMALL_SESSION)}
    )
    assert b"Already imported" in response.content
    assert Entry.objects.count() == 8


def test_oversized_uploads_get_a_clear_message(admin_client, settings):
    settings.SESSIONS_MAX_UPLOAD_BYTES = 50
    response = admin_client.post(
        reverse("explorer:import"), {"files": _upload("big.jsonl", SMALL_SESSION)}
    )
    assert response.status_code in (413, 422)
    assert b"SESSIONS_MAX_UPLOAD_BYTES" in response.content
    assert Session.objects.count() == 0


def test_export_is_a_download_of_the_stored_bytes(viewer_client, make_session):
    session = make_session()
    response = viewer_client.get(reverse("explorer:export", args=[session.pk]))
    assert response["Content-Disposition"].startswith("attachment;")
    assert response["Content-Disposition"].endswith('.jsonl"')
    assert b"".join(response.streaming_content) == SMALL_SESSION


def test_branch_download_is_a_new_session_file(viewer_client, make_session):
    session = make_session()
    response = viewer_client.get(
        reverse("explorer:branch_download", args=[session.pk]), {"leaf": "e5f6a7b8"}
    )
    body = b"".join(response.streaming_content).decode()
    lines = body.splitlines()
    assert '"type":"session"' in lines[0] and "parentSession" in lines[0]
    assert len(lines) == 4  # header, two entries on the route, the re-created label
    assert session.session_id not in lines[0].split('"id":"')[1][:40]


def test_list_groups_sessions_by_working_directory(viewer_client, make_session):
    make_session()
    other = SMALL_SESSION.replace(b"0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a2b", b"s2").replace(
        b'"cwd":"/home/ana/proj"', b'"cwd":"/srv/other"'
    )
    make_session(other)
    text = viewer_client.get(reverse("explorer:session_list")).content.decode()
    assert "/home/ana/proj" in text and "/srv/other" in text
    assert text.count("Demo of a small session") == 2
    filtered = viewer_client.get(reverse("explorer:session_list"), {"q": "srv"}).content.decode()
    assert "/srv/other" in filtered and "/home/ana/proj" not in filtered


def test_uploads_spooled_to_disk_are_imported_from_the_temporary_file(admin_client, settings):
    settings.FILE_UPLOAD_MAX_MEMORY_SIZE = 10  # force a TemporaryUploadedFile
    response = admin_client.post(
        reverse("explorer:import"), {"files": _upload("spooled.jsonl", SMALL_SESSION)}
    )
    assert response.status_code == 200
    session = Session.objects.get()
    assert session.source_path == "spooled.jsonl"
    export = admin_client.get(reverse("explorer:export", args=[session.pk]))
    assert b"".join(export.streaming_content) == SMALL_SESSION


@pytest.mark.pi_fixtures
def test_a_legacy_session_also_downloads_as_originally_imported(viewer_client, make_session):
    from tests.conftest import PI_FIXTURES

    data = (PI_FIXTURES / "large-session.jsonl").read_bytes()
    session = make_session(data)
    url = reverse("explorer:export", args=[session.pk])
    migrated = b"".join(viewer_client.get(url).streaming_content)
    assert b'"version":3' in migrated.split(b"\n", 1)[0]
    original = viewer_client.get(url, {"original": "1"})
    assert b"".join(original.streaming_content) == data
    v3 = make_session()
    assert (
        viewer_client.get(reverse("explorer:export", args=[v3.pk]), {"original": "1"}).status_code
        == 404
    )
