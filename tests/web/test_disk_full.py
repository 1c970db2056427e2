"""A full disk: writes say "the disk is full" (507 on the web, a one-line error from
``import_sessions``) with nothing written, and pages go on reading.

Two real full disks, no mock: the test database grown to its limit (SQLite's
``max_page_count`` on the connection, then every free page taken, so the next write fails with
SQLite's own SQLITE_FULL), and a whole site on a tmpfs filled to the last byte, where even a
new connection's WAL setup fails (``diskfull_site.py``, in a mount namespace of its own)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.urls import reverse

from explorer.models import Entry, Session

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def full_database(transactional_db):
    """A callable that fills the database; undone after the test (the connection and the
    in-memory database outlive it). SQLite rolls back the whole transaction a full disk
    interrupts, so these tests run outside pytest-django's per-test transaction."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")  # the PostgreSQL pass runs the tmpfs test below
    yield _fill_the_database
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE IF EXISTS disk_filler")
        cursor.execute("PRAGMA max_page_count = 4294967294")


def _fill_the_database() -> None:
    """Cap the database at its size and take every free page: the next write that needs a
    new page fails as it would on a full disk (SQLITE_FULL, "database or disk is full").
    The writes below are big enough to need new pages (a row never fits in a page's slack)."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE disk_filler (b BLOB)")
        cursor.execute("PRAGMA page_count")
        cursor.execute(f"PRAGMA max_page_count = {cursor.fetchone()[0]}")
        for size in (1 << 16, 1 << 12, 1 << 8):
            while True:
                try:
                    cursor.execute("INSERT INTO disk_filler VALUES (randomblob(%s))", [size])
                except Exception as exc:  # noqa: BLE001 - asserted below
                    assert "full" in str(exc)
                    break
        cursor.execute("PRAGMA freelist_count")
        assert cursor.fetchone()[0] == 0


BIG = "words " * 40_000  # 240 kB: many new pages


def test_import_sessions_says_the_disk_is_full_and_stores_nothing(
    full_database, tmp_path, small_session_bytes
):
    path = tmp_path / "s.jsonl"
    path.write_bytes(small_session_bytes.replace(b"hello world", BIG.encode()))
    full_database()
    with pytest.raises(CommandError) as info:
        call_command("import_sessions", str(path))
    assert "The disk is full" in str(info.value)
    assert not Session.objects.exists() and not Entry.objects.exists()


def test_a_write_on_a_full_disk_is_a_507_and_reads_go_on(
    full_database, editor_client, make_session
):
    session = make_session()
    before = Entry.objects.filter(session=session).count()
    full_database()
    url = reverse("explorer:edit", args=[session.pk])
    data = {"target": "d4e5f6a7", "mode": "replace", "content": BIG, "confirm": "1",
            "expected_leaf": "1b2c3d4e"}  # fmt: skip
    page = editor_client.post(url, data)
    assert page.status_code == 507 and "The disk is full" in page.content.decode()
    htmx = editor_client.post(url, data, headers={"HX-Request": "true"})
    assert htmx.status_code == 507 and "The disk is full" in htmx.content.decode()
    as_json = editor_client.post(url + "?format=json", data)
    assert as_json.status_code == 507 and as_json.json()["disk_full"] is True
    assert Entry.objects.filter(session=session).count() == before  # nothing half-way
    for tab in ("", "transcript/", "context/", "timeline/", "context/?format=json"):
        assert editor_client.get(f"/sessions/{session.pk}/{tab}").status_code == 200, tab


def test_an_upload_on_a_full_disk_is_a_507_with_nothing_stored(
    full_database, admin_client, small_session_bytes
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    data = small_session_bytes.replace(b"hello world", BIG.encode())
    full_database()
    upload = SimpleUploadedFile("s.jsonl", data, content_type="application/octet-stream")
    r = admin_client.post(reverse("explorer:import"), {"files": [upload]})
    assert r.status_code == 507 and "The disk is full" in r.content.decode()
    assert not Session.objects.exists() and not Entry.objects.exists()
    assert admin_client.get(reverse("explorer:session_list")).status_code == 200


def _can_mount_a_tmpfs() -> str:
    unshare = shutil.which("unshare")
    if unshare is None:
        return "util-linux's unshare is not installed"
    probe = subprocess.run(
        [unshare, "-rm", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return "" if probe.returncode == 0 else f"cannot mount a tmpfs here: {probe.stderr.strip()}"


def test_a_site_on_a_full_tmpfs_reads_on_and_refuses_writes_in_words(tmp_path):
    why = _can_mount_a_tmpfs()
    assert not why, why  # fail clearly: this machine cannot run the real full-disk test
    mount = tmp_path / "disk"
    mount.mkdir()
    # SQLite on the tmpfs, nothing else: no PostgreSQL, no Redis (the PostgreSQL pass too).
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
    env |= {"DJANGO_SETTINGS_MODULE": "sessions_site.settings", "PYTHONPATH": str(ROOT),
            "SESSIONS_CACHE": "locmem", "ALLOWED_HOSTS": "testserver"}  # fmt: skip
    done = subprocess.run(
        ["unshare", "-rm", sys.executable, str(Path(__file__).with_name("diskfull_site.py")),
         str(mount)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["left_open"] == []  # no connection was left to keep WAL set up
    assert report["free_bytes"] < 64 * 1024  # the disk really was full
    assert report["wal_setup_failed"]  # a plain connection could not even start
    assert report["reads"] == dict.fromkeys(report["reads"], 200)
    assert report["write_status"] == 507 and "The disk is full" in report["write_body"]
    assert report["entries_after"] == report["entries_before"]
    assert "The disk is full" in report["import_error"]
    assert report["sessions_after"] == report["sessions_before"]
