"""Pi 1.6.0 parity: navigating with a summary to a target that is not a usable entry (an id
only a line that is not a JSON object carries, or a message entry without a message body)
sends no summarization request; the navigation is refused and the file is unchanged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from explorer.session.branch_summary import navigate_tree
from explorer.session.errors import SessionError
from explorer.session.manager import SessionManager
from tests.fakes.stub_summarizer import StubSummarizer

ROOT = Path(__file__).resolve().parents[2]
HEADER = {"type": "session", "version": 3, "id": "0195f3a2-0000-7000-8000-00000000b5b5",
          "timestamp": "2025-03-04T05:06:07.089Z", "cwd": "/w"}  # fmt: skip


def _m(i: str, parent: str | None, role: str, text: str) -> dict:
    content = text if role == "user" else [{"type": "text", "text": text}]
    return {"type": "message", "id": i, "parentId": parent, "timestamp": "2025-03-04T05:06:08.000Z",
            "message": {"role": role, "content": content, "timestamp": 1}}  # fmt: skip


def _file(tmp_path: Path) -> Path:
    lines = [
        json.dumps(HEADER),
        json.dumps(_m("u1", None, "user", "start")),
        json.dumps(_m("a1", "u1", "assistant", "ok")),
        json.dumps(
            {
                "type": "message",
                "id": "nobody1",
                "parentId": "a1",
                "timestamp": "2025-03-04T05:06:09.000Z",
            }
        ),  # fmt: skip
        '["ghost1", {"id": "ghost1", "parentId": "a1"}]',  # not a JSON object: no entry
        json.dumps(_m("u2", "a1", "user", "another way")),
        json.dumps(_m("a2", "u2", "assistant", "went another way")),
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("target", ["nobody1", "ghost1"])
def test_navigating_to_an_unusable_target_asks_for_no_summary(tmp_path, target):
    path = _file(tmp_path)
    before = path.read_bytes()
    manager = SessionManager.open(str(path))
    assert manager.get_leaf_id() == "a2"
    stub = StubSummarizer("S")
    with pytest.raises(SessionError, match=target):
        navigate_tree(manager, target, summarize=True, summarizer=stub)
    assert stub.requests == []
    assert manager.get_leaf_id() == "a2" and path.read_bytes() == before


def test_a_usable_target_still_gets_its_summary(tmp_path):
    manager = SessionManager.open(str(_file(tmp_path)))
    stub = StubSummarizer("S")
    result = navigate_tree(manager, "a1", summarize=True, summarizer=stub)
    assert len(stub.requests) == 1 and result.summary_entry_id is not None


@pytest.mark.parametrize("target", ["nobody1", "ghost1"])
def test_the_cli_preview_refuses_with_no_request(tmp_path, target):
    path = _file(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "explorer.session", "branch-summary", str(path), "--from", "a2",
         "--to", target, "--dry-run", "--json"],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, "NO_COLOR": "1"}, check=False,
    )  # fmt: skip
    assert done.returncode == 1 and f"Entry {target}" in done.stderr
    assert '"requests"' not in done.stdout


def test_the_navigate_page_refuses_a_summary_to_a_message_without_body(tmp_path, db, editor_client):
    from django.urls import reverse

    from explorer import services
    from explorer.models import Entry

    session = services.import_bytes(_file(tmp_path).read_bytes()).session
    count = Entry.objects.filter(session=session).count()
    r = editor_client.post(
        reverse("explorer:navigate", args=[session.pk]),
        {"target": "nobody1", "summary": "embedded"},
        follow=True,
    )
    assert "without a message body" in r.content.decode()
    assert Entry.objects.filter(session=session).count() == count
