"""Follow mode into the database: new files become sessions, appended lines become entries."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from explorer import broadcast, files
from explorer.follow import DirectoryFollower
from explorer.follow_db import FollowIngestor

pytestmark = pytest.mark.django_db(transaction=True)

HEADER = (
    '{"type":"session","version":3,"id":"0195f3a2-7c41-7d2e-9b1a-000000000001",'
    '"timestamp":"2025-03-04T05:06:07.089Z","cwd":"/home/ana/proj"}'
)


def msg(i: int, parent: int | None, text: str = "hi") -> str:
    p = "null" if parent is None else f'"m{parent:07d}"'
    return (
        f'{{"type":"message","id":"m{i:07d}","parentId":{p},'
        f'"timestamp":"2025-03-04T05:06:08.000Z","message":{{"role":"user",'
        f'"content":"{text} {i}","timestamp":1741064768000}}}}'
    )


@pytest.fixture
def setup(tmp_path):
    project = tmp_path / "--home-ana-proj--"
    project.mkdir()
    path = project / "2025-03-04T05-06-07-089Z_s.jsonl"
    reports: list[tuple[str, str]] = []
    follower = DirectoryFollower(tmp_path)
    ingestor = FollowIngestor(follower, report=lambda level, text: reports.append((level, text)))

    def poll():
        for event in follower.poll():
            ingestor.handle(event)

    return path, poll, reports


@pytest.fixture
def appended_signals(sent_broadcasts):
    """(source, entry ids) of every ``live.entries`` message sent to viewers."""

    class Seen(list):
        def __getitem__(self, i):
            return self.view()[i]

        def __iter__(self):
            return iter(self.view())

        def view(self):
            # Rendered by the broadcast worker after each commit; on a loaded machine that
            # can take a while, and a drain that gave up must say so rather than miss one.
            assert broadcast.drain(120), "the broadcast worker did not finish in 120 s"
            return [
                (m["source"], [e["id"] for e in m["entries"]])
                for m in sent_broadcasts
                if m["type"] == "live.entries"
            ]

    return Seen()


def stored_ids() -> list[str]:
    from explorer.models import Entry

    return list(Entry.objects.order_by("position").values_list("entry_id", flat=True))


def test_a_new_file_becomes_a_session_and_appended_lines_become_entries(setup, appended_signals):
    from explorer.models import Session

    path, poll, reports = setup
    path.write_text(HEADER + "\n" + msg(1, None) + "\n" + msg(2, 1)[:30])
    poll()
    session = Session.objects.get()
    assert session.source_path == str(path)
    assert stored_ids() == ["m0000001"]
    # The worker sends what is queued per session as one message (a burst is rendered
    # once): the new session's broadcast goes out before the append is read, so the two
    # writes are two messages however slow the worker is.
    assert broadcast.drain(120), "the broadcast worker did not finish in 120 s"
    with open(path, "a") as fh:
        fh.write(msg(2, 1)[30:] + "\n" + msg(3, 2) + "\n")
    poll()
    assert stored_ids() == ["m0000001", "m0000002", "m0000003"]
    # Stored verbatim: the export is the file itself.
    assert files.export_bytes(session) == path.read_bytes()
    assert [s for s, _ in appended_signals] == ["follow", "follow"]
    assert appended_signals[-1][1] == ["m0000002", "m0000003"]
    assert any("new session" in text for _, text in reports)
    assert any("+2 entries" in text for _, text in reports)


def test_a_malformed_line_goes_through_the_full_importer(setup):
    from explorer.models import Session

    path, poll, reports = setup
    path.write_text(HEADER + "\n" + msg(1, None) + "\n")
    poll()
    with open(path, "a") as fh:
        fh.write("{not json\n" + msg(2, 1) + "\n")
    poll()
    assert stored_ids() == ["m0000001", "m0000002"]
    session = Session.objects.get()
    assert files.export_bytes(session) == path.read_bytes()


def test_a_restarted_follower_adds_only_what_is_new(tmp_path):
    from explorer.models import Session

    project = tmp_path / "--p--"
    project.mkdir()
    path = project / "s.jsonl"
    path.write_text(HEADER + "\n" + msg(1, None) + "\n")
    for _ in range(2):  # two followers, one after the other
        follower = DirectoryFollower(tmp_path)
        ingestor = FollowIngestor(follower, report=lambda *a: None)
        for event in follower.poll():
            ingestor.handle(event)
    with open(path, "a") as fh:
        fh.write(msg(2, 1) + "\n")
    for event in follower.poll():
        ingestor.handle(event)
    assert Session.objects.count() == 1
    assert stored_ids() == ["m0000001", "m0000002"]


def test_a_truncated_file_is_reported_and_not_merged(setup):
    path, poll, reports = setup
    path.write_text(HEADER + "\n" + msg(1, None) + "\n" + msg(2, 1) + "\n")
    poll()
    path.write_text(HEADER + "\n" + msg(9, None) + "\n")
    poll()
    assert stored_ids() == ["m0000001", "m0000002"]
    warnings = [text for level, text in reports if level == "warning"]
    assert len(warnings) == 1 and "truncated" in warnings[0] or "rewritten" in warnings[0]


def test_a_file_that_is_not_a_session_is_reported_and_ignored(setup):
    path, poll, reports = setup
    path.write_text('{"hello":"world"}\n')
    poll()
    with open(path, "a") as fh:
        fh.write(msg(1, None) + "\n")
    poll()
    assert stored_ids() == []
    assert any(level == "warning" and "not followed" in text for level, text in reports)


def test_the_follow_command_ingests_once(tmp_path, capsys):
    from explorer.models import Session

    project = tmp_path / "--p--"
    project.mkdir()
    (project / "s.jsonl").write_text(HEADER + "\n" + msg(1, None) + "\n")
    call_command("follow", str(tmp_path), "--once")
    assert Session.objects.count() == 1
    assert "new session 0195f3a2-7c41-7d2e-9b1a-000000000001" in capsys.readouterr().out


def test_the_follow_command_rejects_a_missing_directory(tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="Not a directory"):
        call_command("follow", str(tmp_path / "missing"), "--once")


def test_viewers_are_told_when_following_a_file_stops(setup, sent_broadcasts):
    from explorer import html

    path, poll, _reports = setup
    path.write_text(HEADER + "\n" + msg(1, None) + "\n" + msg(2, 1) + "\n")
    poll()
    path.write_text(HEADER + "\n" + msg(9, None) + "\n")
    poll()
    stopped = [m for m in sent_broadcasts if m["type"] == "live.follow_stopped"]
    # Viewers read the file's name, never the server's absolute path to it.
    assert len(stopped) == 1 and path.name in stopped[0]["message"]
    assert str(path.parent) not in stopped[0]["message"]
    notice = str(html.follow_stopped(stopped[0]["message"]))
    assert "Following the file stopped" in notice and ">follow stopped</span>" in notice


def test_a_failed_append_is_retried_through_the_full_importer(setup, monkeypatch):
    from django.db import OperationalError

    from explorer import services
    from explorer.models import Entry, Session

    path, poll, reports = setup
    path.write_text(HEADER + "\n" + msg(1, None) + "\n")
    poll()
    real = services.append_lines_verbatim

    def lost_connection(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(services, "append_lines_verbatim", lost_connection)
    with open(path, "a") as fh:
        fh.write(msg(2, 1) + "\n")
    poll()  # the fast path fails; the full importer stores the line
    assert stored_ids() == ["m0000001", "m0000002"]
    assert any("retried after OperationalError" in text for _, text in reports)
    # Both paths failing: nothing is lost, the next event re-imports up to its end.
    real_import = services.import_bytes
    monkeypatch.setattr(services, "import_bytes", lost_connection)
    with open(path, "a") as fh:
        fh.write(msg(3, 2) + "\n")
    poll()
    assert stored_ids() == ["m0000001", "m0000002"]
    assert any("will retry" in text for _, text in reports)
    monkeypatch.setattr(services, "import_bytes", real_import)
    monkeypatch.setattr(services, "append_lines_verbatim", real)
    with open(path, "a") as fh:
        fh.write(msg(4, 3) + "\n")
    poll()
    assert stored_ids() == ["m0000001", "m0000002", "m0000003", "m0000004"]
    session = Session.objects.get()
    assert files.export_bytes(session) == path.read_bytes()
    entries = Entry.objects.filter(session=session)
    assert session.entry_count == entries.count()
    assert session.leaf_count == entries.filter(child_count=0).count()
    with open(path, "a") as fh:
        fh.write(msg(5, 4) + "\n")
    poll()  # back on the fast path
    assert stored_ids()[-1] == "m0000005"


def test_a_followed_codex_file_grows_entry_by_entry(tmp_path):
    """Claude Code and Codex files in a followed directory: stored as their Pi form, each
    appended line adding its new entries (the stored ones unchanged)."""
    import json

    from explorer.models import Entry, Session

    path = tmp_path / "rollout-2026-10-12T10-00-00-019a2000-0000-7000-8000-0000000000ff.jsonl"
    reports: list[tuple[str, str]] = []
    follower = DirectoryFollower(tmp_path)
    ingestor = FollowIngestor(follower, report=lambda level, text: reports.append((level, text)))

    def poll():
        for event in follower.poll():
            ingestor.handle(event)

    def line(kind: str, payload: dict) -> bytes:
        record = {"timestamp": "2026-10-12T10:00:00.000Z", "type": kind, "payload": payload}
        return json.dumps(record).encode() + b"\n"

    def item(role: str, text: str) -> bytes:
        kind = "input_text" if role == "user" else "output_text"
        return line(
            "response_item",
            {"type": "message", "role": role, "content": [{"type": kind, "text": text}]},
        )

    meta = line("session_meta", {"id": "019a2000-0000-7000-8000-0000000000ff", "cwd": "/w"})
    path.write_bytes(meta + item("user", "hello") + item("assistant", "hi")[:20])
    poll()
    session = Session.objects.get()
    assert session.agent == "codex" and session.entry_count == 1
    with path.open("r+b") as fh:
        fh.truncate(len(meta) + len(item("user", "hello")))
        fh.seek(0, 2)
        fh.write(item("assistant", "hi") + item("user", "more"))
    poll()
    session.refresh_from_db()
    assert list(Entry.objects.filter(session=session).values_list("entry_id", flat=True)) == [
        "L2",
        "L3",
        "L4",
    ]
    assert bytes(session.source_original) == path.read_bytes()
    assert any("Codex session" in text for _, text in reports)


def test_follow_once_with_depth_reaches_codex_date_folders(tmp_path, capsys):
    """~/.codex/sessions keeps rollouts three folders down (YYYY/MM/DD): --depth 3 finds them."""
    from explorer.models import Session
    from tests.session.agent_files import codex_session

    codex_session(tmp_path, turns=3, compact_at=(), rollback_at=2, big_at=0)
    call_command("follow", str(tmp_path / "sessions"), "--once")
    assert Session.objects.count() == 0  # one level down is not enough
    call_command("follow", str(tmp_path / "sessions"), "--once", "--depth", "3")
    assert Session.objects.get().agent == "codex"
