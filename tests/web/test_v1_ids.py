"""A version-1 file's ids: the app stores the ids ``pisession`` derives from the same bytes,
so an id copied from a page works on the CLI with the user's own file; the page and README
say how to get a matching file otherwise (Export JSONL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from explorer import services
from explorer.models import Entry
from tests.conftest import PI_FIXTURES

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.pi_fixtures
def test_the_stored_ids_of_a_v1_file_are_the_clis(db, tmp_path):
    path = PI_FIXTURES / "large-session.jsonl"
    copy = tmp_path / "mine.jsonl"
    copy.write_bytes(path.read_bytes())
    session = services.import_bytes(copy.read_bytes(), source_path=str(copy)).session
    assert session.source_version == 1
    stored = list(
        Entry.objects.filter(session=session)
        .order_by("position")
        .values_list("entry_id", flat=True)
    )
    done = subprocess.run(
        [sys.executable, "-m", "explorer.session", "entries", str(copy), "--json"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "NO_COLOR": "1"}, check=True,
    )  # fmt: skip
    cli = [e["id"] for e in json.loads(done.stdout)]
    assert stored == cli
    # An id copied from the page answers on the CLI.
    leaf = stored[len(stored) // 2]
    context = subprocess.run(
        [sys.executable, "-m", "explorer.session", "context", str(copy), "--leaf", leaf, "--json"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "NO_COLOR": "1"}, check=False,
    )  # fmt: skip
    assert context.returncode == 0 and json.loads(context.stdout)["leafId"] == leaf


@pytest.mark.pi_fixtures
def test_a_legacy_sessions_page_says_which_file_matches_its_ids(db, viewer_client):
    path = PI_FIXTURES / "large-session.jsonl"
    session = services.import_bytes(path.read_bytes(), source_path=str(path)).session
    html = viewer_client.get(reverse("explorer:session_detail", args=[session.pk])).content.decode()
    assert 'id="legacy-ids"' in html and "Export JSONL" in html and "pisession" in html
