"""Method hygiene, deployment settings, Pi-faithful JSON edge cases, deterministic reports."""

from __future__ import annotations

import subprocess
import sys

import pytest
from django.urls import reverse

from explorer import files
from explorer.session import jsonfmt
from tests.web.test_permissions import _run_check

READ_ONLY = [
    "session_detail", "graph_svg", "tree_chain", "entry", "context", "compactions", "compare",
    "timeline", "session_search", "integrity", "live", "problems", "session_stats", "export",
]  # fmt: skip


@pytest.mark.parametrize("name", READ_ONLY)
def test_a_post_to_a_read_only_page_is_405(editor_client, make_session, name):
    session = make_session()
    response = editor_client.post(reverse(f"explorer:{name}", args=[session.pk]))
    assert response.status_code == 405


@pytest.mark.parametrize("name", ["session_list", "search"])
def test_a_post_to_a_read_only_list_is_405(editor_client, name):
    assert editor_client.post(reverse(f"explorer:{name}")).status_code == 405


@pytest.mark.parametrize("key", ["a" * 64, "ab" * 40, "django-insecure-" + "x1y2z3w4" * 6])
def test_the_secret_key_check_is_as_strict_as_check_deploy(key):
    result = _run_check({"DEBUG": "false", "SECRET_KEY": key, "ALLOWED_HOSTS": "x.example"})
    assert result.returncode != 0
    assert "at least 5 different characters" in result.stderr


def test_hsts_preload_is_off_by_default():
    import secrets

    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from django.conf import settings; print(settings.SECURE_HSTS_PRELOAD, settings.SECURE_HSTS_SECONDS)",
        ],
        env={
            "DJANGO_SETTINGS_MODULE": "sessions_site.settings",
            "DEBUG": "false",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "x.example",
            "PATH": "/usr/bin:/bin",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.stdout.split() == ["False", "31536000"], result.stderr


def test_every_html_page_carries_the_policy(viewer_client, make_session):
    session = make_session()
    page = viewer_client.get(reverse("explorer:session_detail", args=[session.pk]))
    policy = page["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "script-src 'self'" in policy
    assert "object-src 'none'" in policy and "frame-ancestors 'none'" in policy
    svg = viewer_client.get(reverse("explorer:graph_svg", args=[session.pk]))
    assert svg["Content-Security-Policy"].startswith("default-src 'none'")  # its own, kept


def test_sqlite_writes_are_synchronous_full(db):
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")  # the PostgreSQL pass has no such pragma
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA synchronous")
        assert cursor.fetchone()[0] == 2  # FULL


# -- JSON as Pi reads it ----------------------------------------------------------------------

HEADER = (
    b'{"type":"session","version":3,"id":"h","timestamp":"2025-03-04T05:06:07.089Z","cwd":"/"}\n'
)


def _msg(entry_id: str, parent: str | None, extra: str) -> bytes:
    parent_json = "null" if parent is None else f'"{parent}"'
    return (
        f'{{"type":"message","id":"{entry_id}","parentId":{parent_json},'
        f'"timestamp":"2025-03-04T05:06:08.000Z",{extra}"message":{{"role":"user",'
        '"content":"x","timestamp":1}}\n'
    ).encode()


def test_numbers_javascript_reads_as_infinity_keep_their_entries(make_session):
    data = HEADER + _msg("u1", None, '"n":1e999999,') + _msg("u2", "u1", f'"n":{"7" * 5000},')
    session = make_session(data)
    assert sorted(session.entries.values_list("entry_id", flat=True)) == ["u1", "u2"]
    assert not session.problems.exists()
    assert files.export_bytes(session) == data
    assert jsonfmt.loads("[" + "1" * 5000 + "]") == [float("inf")]
    assert jsonfmt.loads("[-" + "9" * 500 + "]") == [float("-inf")]
    assert jsonfmt.dumps(jsonfmt.loads('{"a":1e999999}')) == '{"a":null}'  # as JSON.stringify


def test_a_byte_order_mark_is_named_in_the_error(db):
    result = files.import_bytes(b"\xef\xbb\xbf" + HEADER + _msg("u1", None, ""))
    assert not result.ok
    assert any("byte order mark" in p.message for p in result.problems)


CYCLE_SCRIPT = """
from explorer.files.scan import _Scan
from explorer.files.store import _resolve_pending
scan = _Scan()
ids = ["c%d" % i for i in range(12)]
for i, e in enumerate(ids):
    scan.ids[e] = ids[(i + 1) % len(ids)]
    scan.first_line[e] = i + 2
    scan.pending_depth.add(e)
_resolve_pending(None, scan)
print([(p.line, p.message) for p in scan.problems])
"""


def test_the_parent_cycle_report_is_the_same_in_every_run():
    import os

    outputs = set()
    for seed in ("1", "2", "3", "4"):
        env = {
            **os.environ,
            "PYTHONHASHSEED": seed,
            "DJANGO_SETTINGS_MODULE": "sessions_site.settings",
        }
        run = subprocess.run(
            [sys.executable, "-c", "import django; django.setup()\n" + CYCLE_SCRIPT],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        outputs.add(run.stdout)
    [report] = outputs
    assert "(2, 'Parent cycle: c0 → c1" in report
