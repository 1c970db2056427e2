"""Following a Claude Code or Codex file reads only what was appended: the bytes read from
the file per append are counted (every ``open`` of it is wrapped), never timed."""

from __future__ import annotations

import builtins
import json
from pathlib import Path

import pytest

from explorer.follow import HEAD_BYTES, TAIL_BYTES, DirectoryFollower
from explorer.follow_db import FollowIngestor
from explorer.models import Entry, Session

pytestmark = pytest.mark.django_db(transaction=True)


class _Counted:
    """A file object whose reads are added to ``box``."""

    def __init__(self, fh, box: list[int]) -> None:
        self._fh, self._box = fh, box

    def read(self, *args):
        data = self._fh.read(*args)
        self._box[0] += len(data)
        return data

    def __enter__(self):
        self._fh.__enter__()
        return self

    def __exit__(self, *exc):
        return self._fh.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self._fh, name)


@pytest.fixture
def reads(monkeypatch):
    """``reads(path)`` → a box holding the bytes read from ``path`` through ``open``."""
    real_open = builtins.open
    boxes: dict[str, list[int]] = {}

    def counting_open(file, *args, **kwargs):
        fh = real_open(file, *args, **kwargs)
        box = boxes.get(str(file))
        return _Counted(fh, box) if box is not None else fh

    monkeypatch.setattr(builtins, "open", counting_open)

    def watch(path: Path) -> list[int]:
        return boxes.setdefault(str(path), [0])

    return watch


def _follow(root: Path):
    follower = DirectoryFollower(root)
    ingestor = FollowIngestor(follower, report=lambda level, text: None)

    def poll() -> None:
        for event in follower.poll():
            ingestor.handle(event)

    return poll


def _codex(kind: str, payload: dict) -> bytes:
    record = {"timestamp": "2026-10-12T10:00:00.000Z", "type": kind, "payload": payload}
    return json.dumps(record).encode() + b"\n"


def _codex_item(role: str, text: str) -> bytes:
    kind = "input_text" if role == "user" else "output_text"
    payload = {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}
    return _codex("response_item", payload)


def test_an_append_to_a_followed_codex_file_reads_only_the_new_bytes(tmp_path, reads):
    path = tmp_path / "rollout-2026-10-12T10-00-00-019a2000-0000-7000-8000-0000000000fe.jsonl"
    body = _codex("session_meta", {"id": "019a2000-0000-7000-8000-0000000000fe", "cwd": "/w"})
    body += b"".join(_codex_item("user", f"turn {k} " + "x" * 2000) for k in range(200))
    path.write_bytes(body)
    box = reads(path)
    poll = _follow(tmp_path)
    poll()
    assert box[0] >= len(body)  # the first sight reads the file once
    session = Session.objects.get()
    for k in range(3):
        appended = _codex_item("assistant", f"answer {k}")
        with path.open("ab") as fh:
            fh.write(appended)
        box[0] = 0
        poll()
        # The follower's new bytes plus its check that the head and tail are unchanged.
        assert 0 < box[0] <= len(appended) + HEAD_BYTES + TAIL_BYTES, k
    session.refresh_from_db()
    assert session.entry_count == 203
    assert Entry.objects.filter(session=session, entry_id="L204").exists()
    assert bytes(session.source_original) == path.read_bytes()


def test_an_append_to_a_followed_claude_code_file_reads_only_the_new_bytes(tmp_path, reads):
    project = tmp_path / "-home-dev-proj"
    project.mkdir()
    session_id = "7d1c0c57-0000-4000-8000-0000000000fe"
    path = project / f"{session_id}.jsonl"

    def record(k: int) -> bytes:
        value = {
            "type": "user" if k % 2 == 0 else "assistant",
            "uuid": f"u-{k:05d}",
            "parentUuid": f"u-{k - 1:05d}" if k else None,
            "sessionId": session_id,
            "timestamp": "2026-10-12T10:00:00.000Z",
            "message": {
                "role": "user" if k % 2 == 0 else "assistant",
                "content": [{"type": "text", "text": f"line {k} " + "y" * 2000}],
            },
        }
        return json.dumps(value).encode() + b"\n"

    body = b"".join(record(k) for k in range(200))
    path.write_bytes(body)
    box = reads(path)
    poll = _follow(tmp_path)
    poll()
    session = Session.objects.get()
    appended = record(200)
    with path.open("ab") as fh:
        fh.write(appended)
    box[0] = 0
    poll()
    assert 0 < box[0] <= len(appended) + HEAD_BYTES + TAIL_BYTES
    session.refresh_from_db()
    assert session.entry_count == 201
    assert bytes(session.source_original) == path.read_bytes()


def test_after_a_failed_store_the_file_is_read_again(tmp_path, reads, monkeypatch):
    """Nothing kept (the store failed): the next append reads the file up to its end, so no
    line is lost."""
    from explorer import agent_import

    path = tmp_path / "rollout-2026-10-12T10-00-00-019a2000-0000-7000-8000-0000000000fd.jsonl"
    body = _codex("session_meta", {"id": "019a2000-0000-7000-8000-0000000000fd", "cwd": "/w"})
    body += _codex_item("user", "hello")
    path.write_bytes(body)
    box = reads(path)
    poll = _follow(tmp_path)
    poll()
    real = agent_import.import_agent_bytes
    monkeypatch.setattr(
        agent_import,
        "import_agent_bytes",
        lambda *a, **k: agent_import.files.refused("broken", "the database went away"),
    )
    with path.open("ab") as fh:
        fh.write(_codex_item("assistant", "lost?"))
    poll()
    monkeypatch.setattr(agent_import, "import_agent_bytes", real)
    with path.open("ab") as fh:
        fh.write(_codex_item("user", "again"))
    box[0] = 0
    poll()
    assert box[0] >= len(path.read_bytes())
    session = Session.objects.get()
    assert session.entry_count == 3
    assert bytes(session.source_original) == path.read_bytes()
