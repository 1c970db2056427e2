"""Run by test_disk_full.py inside a mount namespace of its own (``unshare -rm``): a site
on a small tmpfs, filled to the last byte, then read and written through Django's test
client. Prints one JSON line with what happened.

The site is set up by a child process that exits before the disk is filled, so no
connection is left open: the next one must set up WAL on a full disk, as a server's first
request after a restart would."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

mount = Path(sys.argv[1])
os.environ["SQLITE_PATH"] = str(mount / "db.sqlite3")
os.environ["SESSIONS_VAR_DIR"] = str(mount)
SETUP = len(sys.argv) > 2 and sys.argv[2] == "setup"
if not SETUP:
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount)], check=True)
    subprocess.run([sys.executable, __file__, str(mount), "setup"], check=True)

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import CommandError, call_command  # noqa: E402
from django.db import connections  # noqa: E402
from django.test import Client  # noqa: E402

from explorer import services  # noqa: E402
from explorer.models import Entry, Session  # noqa: E402
from explorer.permissions import set_role  # noqa: E402
from tests.conftest import SMALL_SESSION  # noqa: E402

OTHER = mount.parent / "other.jsonl"
COOKIE = mount.parent / "cookie"
if SETUP:
    call_command("migrate", "--noinput", verbosity=0)
    user = get_user_model().objects.create_user("eddie", password="pw")
    set_role(user, "editor")
    services.import_bytes(SMALL_SESSION)
    login = Client()
    login.force_login(user)  # the login's row is written now, while there is room
    COOKIE.write_text(login.cookies["sessionid"].value)
    OTHER.write_bytes(SMALL_SESSION.replace(b"0195f3a2-7c41-7d2e", b"0195f3a2-7c41-7d2f"))
    connections.close_all()
    sys.exit(0)

left_open = sorted(p.name for p in mount.iterdir() if p.name.endswith(("-wal", "-shm")))
with open(mount / "filler", "wb", buffering=0) as fh:  # every byte of the disk taken
    for chunk in (65536, 1):
        try:
            while True:
                fh.write(b"\0" * chunk)
        except OSError:
            pass
stat = os.statvfs(mount)

try:
    sqlite3.connect(os.environ["SQLITE_PATH"]).execute("PRAGMA journal_mode=WAL")
    wal_setup_failed = False
except sqlite3.OperationalError:
    wal_setup_failed = True

session = Session.objects.get()
entries_before = Entry.objects.count()
sessions_before = Session.objects.count()
connections.close_all()
client = Client()
client.cookies["sessionid"] = COOKIE.read_text()
reads = {}
for url in (f"/sessions/{session.pk}/", f"/sessions/{session.pk}/transcript/",
            f"/sessions/{session.pk}/context/?format=json", "/"):  # fmt: skip
    reads[url] = client.get(url).status_code
    connections.close_all()
write = client.post(f"/sessions/{session.pk}/label/",
                    {"target": "a1b2c3d4", "label": "no room", "expected_leaf": "1b2c3d4e"})  # fmt: skip
connections.close_all()
try:
    call_command("import_sessions", str(OTHER))
    import_error = ""
except CommandError as exc:
    import_error = str(exc)
connections.close_all()
report = {
    "left_open": left_open,
    "free_bytes": stat.f_bavail * stat.f_frsize,
    "wal_setup_failed": wal_setup_failed,
    "reads": reads,
    "write_status": write.status_code,
    "write_body": write.content.decode()[:2000],
    "entries_before": entries_before,
    "sessions_before": sessions_before,
    "import_error": import_error,
}
(mount / "filler").unlink()  # room to count what is stored now
report["entries_after"] = Entry.objects.count()
report["sessions_after"] = Session.objects.count()
print(json.dumps(report))
