"""Cached values are named by the code that made them (sessions_site/fingerprint.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sessions_site.fingerprint import code_fingerprint

ROOT = Path(__file__).resolve().parents[2]


def test_any_source_change_gives_another_fingerprint(tmp_path):
    (tmp_path / "explorer" / "views").mkdir(parents=True)
    (tmp_path / "templates").mkdir()
    view = tmp_path / "explorer" / "views" / "page.py"
    view.write_text("LIMIT = 150\n")
    (tmp_path / "templates" / "page.html").write_text("<ol></ol>\n")
    first = code_fingerprint(tmp_path)
    assert len(first) == 12 and code_fingerprint(tmp_path) == first  # the same code, the same
    view.write_text("LIMIT = 151\n")
    changed = code_fingerprint(tmp_path)
    assert changed != first
    (tmp_path / "templates" / "page.html").write_text("<ul></ul>\n")
    assert code_fingerprint(tmp_path) not in (first, changed)
    (tmp_path / "templates" / "page.html").rename(tmp_path / "templates" / "other.html")
    renamed = code_fingerprint(tmp_path)
    (tmp_path / "notes.txt").write_text("not code")  # what is not a source leaves it alone
    assert code_fingerprint(tmp_path) == renamed


def test_the_file_and_redis_caches_are_keyed_by_the_running_code():
    probe = (
        "import django; django.setup();"
        "from django.conf import settings as s;"
        "print(s.CACHES['default']['KEY_PREFIX']); print(s.CODE_FINGERPRINT)"
    )
    seen = {}
    for kind, extra in (("file", {}), ("redis", {"REDIS_URL": "redis://127.0.0.1:1/0"})):
        env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "DATABASE_URL")}
        env.update(DJANGO_SETTINGS_MODULE="sessions_site.settings", SESSIONS_CACHE=kind, **extra)
        out = subprocess.run(
            [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr
        prefix, fingerprint = out.stdout.split()
        assert fingerprint == code_fingerprint(ROOT)
        seen[kind] = prefix
    assert seen["file"] == code_fingerprint(ROOT)
    assert seen["redis"].endswith(":cache:" + code_fingerprint(ROOT))
