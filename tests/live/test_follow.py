"""Follow mode: the tailer sees what another process appends, line by complete line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from explorer.follow import DirectoryFollower, FollowEvent, follow_forever, split_complete_lines

# A separate writer process: it appends exactly the bytes it is told to, in one write each,
# and acknowledges so the test knows the write happened before it polls.
WRITER = r"""
import json, sys
for line in sys.stdin:
    cmd = json.loads(line)
    with open(cmd["path"], "ab") as fh:
        fh.write(cmd["data"].encode("utf-8"))
        fh.flush()
    sys.stdout.write("ok\n")
    sys.stdout.flush()
"""


class Writer:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WRITER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def append(self, path, data: str) -> None:
        self.proc.stdin.write(json.dumps({"path": str(path), "data": data}) + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "ok\n"

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


@pytest.fixture
def writer():
    w = Writer()
    yield w
    w.close()


HEADER = (
    '{"type":"session","version":3,"id":"s1","timestamp":"2025-03-04T05:06:07.089Z","cwd":"/p"}'
)


def entry(i: int, parent: str | None) -> str:
    p = "null" if parent is None else f'"{parent}"'
    return (
        f'{{"type":"message","id":"e{i:07d}","parentId":{p},"timestamp":"2025-03-04T05:06:08.000Z",'
        f'"message":{{"role":"user","content":"hello {i}","timestamp":1}}}}'
    )


def project_dir(root) -> os.PathLike:
    d = root / "--p--"
    d.mkdir()
    return d


def test_split_complete_lines_keeps_partial_tail():
    assert split_complete_lines(b"a\nb\nc") == ([b"a", b"b"], 4)
    assert split_complete_lines(b"abc") == ([], 0)
    assert split_complete_lines(b"a\n") == ([b"a"], 2)
    assert split_complete_lines(b"\n") == ([b""], 1)


def test_it_reports_a_new_file_with_its_complete_lines_only(tmp_path, writer):
    d = project_dir(tmp_path)
    follower = DirectoryFollower(tmp_path)
    assert follower.poll() == []
    path = d / "2025-03-04T05-06-07-089Z_s1.jsonl"
    writer.append(path, HEADER + "\n" + entry(1, None) + "\n" + entry(2, "e0000001")[:10])
    events = follower.poll()
    assert [e.kind for e in events] == ["new"]
    assert events[0].path == str(path)
    assert events[0].lines == (HEADER.encode(), entry(1, None).encode())
    assert events[0].offset == 0
    # Nothing new until the partial line gets its newline.
    assert follower.poll() == []
    writer.append(path, entry(2, "e0000001")[10:] + "\n")
    events = follower.poll()
    assert [(e.kind, e.lines) for e in events] == [("lines", (entry(2, "e0000001").encode(),))]
    assert events[0].offset == len(HEADER) + 1 + len(entry(1, None)) + 1


def test_a_file_without_any_complete_line_is_not_announced(tmp_path, writer):
    d = project_dir(tmp_path)
    follower = DirectoryFollower(tmp_path)
    path = d / "x.jsonl"
    writer.append(path, HEADER[:20])
    assert follower.poll() == []
    writer.append(path, HEADER[20:] + "\n")
    events = follower.poll()
    assert [(e.kind, e.lines) for e in events] == [("new", (HEADER.encode(),))]


def test_a_line_split_across_two_writes_by_another_process_arrives_whole(tmp_path, writer):
    d = project_dir(tmp_path)
    path = d / "s.jsonl"
    writer.append(path, HEADER + "\n")
    follower = DirectoryFollower(tmp_path)
    assert [e.kind for e in follower.poll()] == ["new"]
    # Multi-byte UTF-8 split in the middle of a character as well as mid-line.
    line = '{"type":"custom","id":"c1","parentId":null,"timestamp":"t","data":"h\u00e9llo \u2603"}'
    raw = (line + "\n").encode("utf-8")
    cut = raw.index("\u2603".encode()) + 1
    with open(path, "ab") as fh:  # the first half, ending inside a character
        fh.write(raw[:cut])
    assert follower.poll() == []
    writer.append(path, "")  # a no-op write from the other process
    assert follower.poll() == []
    with open(path, "ab") as fh:
        fh.write(raw[cut:])
    events = follower.poll()
    assert [(e.kind, e.lines) for e in events] == [("lines", (line.encode("utf-8"),))]


def test_truncation_is_reported_and_not_merged(tmp_path, writer):
    d = project_dir(tmp_path)
    path = d / "s.jsonl"
    writer.append(path, HEADER + "\n" + entry(1, None) + "\n")
    follower = DirectoryFollower(tmp_path)
    assert [e.kind for e in follower.poll()] == ["new"]
    with open(path, "r+b") as fh:
        fh.truncate(len(HEADER) + 1)
    events = follower.poll()
    assert [e.kind for e in events] == ["truncated"]
    assert "truncated" in events[0].message and "2 lines" in events[0].message
    # Later appends to the broken file are not ingested silently.
    writer.append(path, entry(2, None) + "\n")
    assert follower.poll() == []


def test_a_file_replaced_by_another_inode_is_reported(tmp_path, writer):
    d = project_dir(tmp_path)
    path = d / "s.jsonl"
    writer.append(path, HEADER + "\n")
    follower = DirectoryFollower(tmp_path)
    follower.poll()
    other = tmp_path / "other.tmp"
    other.write_text(HEADER.replace('"s1"', '"s2"') + "\n" + entry(1, None) + "\n")
    os.replace(other, path)
    events = follower.poll()
    assert [e.kind for e in events] == ["replaced"]
    assert "inode" in events[0].message
    writer.append(path, entry(2, None) + "\n")
    assert follower.poll() == []


def test_a_rewrite_in_place_with_more_bytes_is_reported(tmp_path):
    d = project_dir(tmp_path)
    path = d / "s.jsonl"
    path.write_bytes((HEADER + "\n").encode())
    follower = DirectoryFollower(tmp_path)
    follower.poll()
    # Same inode, longer content, but the bytes already read changed (a whole-file rewrite).
    with open(path, "r+b") as fh:
        fh.write((HEADER.replace('"s1"', '"s9"') + "\n" + entry(1, None) + "\n").encode())
    events = follower.poll()
    assert [e.kind for e in events] == ["replaced"]
    assert "rewritten" in events[0].message


def test_a_rewrite_in_place_with_the_same_size_is_reported(tmp_path):
    d = project_dir(tmp_path)
    path = d / "s.jsonl"
    path.write_bytes((HEADER + "\n").encode())
    follower = DirectoryFollower(tmp_path)
    follower.poll()
    st = os.stat(path)
    path.write_bytes((HEADER.replace('"s1"', '"s9"') + "\n").encode())
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    events = follower.poll()
    assert [e.kind for e in events] == ["replaced"]


def test_removed_files_are_reported_and_files_in_root_are_followed(tmp_path):
    path = tmp_path / "direct.jsonl"
    path.write_text(HEADER + "\n")
    (tmp_path / "notes.txt").write_text("not a session\n")
    follower = DirectoryFollower(tmp_path)
    assert [(e.kind, e.path) for e in follower.poll()] == [("new", str(path))]
    path.unlink()
    assert [(e.kind, e.path) for e in follower.poll()] == [("removed", str(path))]


def test_a_removed_broken_file_that_comes_back_is_a_new_file(tmp_path):
    d = project_dir(tmp_path)
    path = d / "s.jsonl"
    path.write_text(HEADER + "\n" + entry(1, None) + "\n")
    follower = DirectoryFollower(tmp_path)
    follower.poll()
    path.write_text(HEADER + "\n")  # shorter
    assert [e.kind for e in follower.poll()] == ["truncated"]
    path.unlink()
    assert follower.poll() == []
    path.write_text(HEADER + "\n")
    assert [e.kind for e in follower.poll()] == ["new"]


def test_follow_forever_sees_every_line_another_process_appends_in_order(tmp_path):
    d = project_dir(tmp_path)
    path = d / "s.jsonl"
    n = 400
    script = r"""
import sys, time
path, n = sys.argv[1], int(sys.argv[2])
with open(path, "ab", buffering=0) as fh:
    fh.write(sys.argv[3].encode() + b"\n")
    for i in range(n):
        line = ('{"type":"label","id":"l%07d","parentId":null,"timestamp":"t","n":%d}' % (i, i)).encode()
        # Every third line is written in two pieces with a pause in between.
        if i % 3 == 0:
            fh.write(line[:17]); time.sleep(0.002); fh.write(line[17:] + b"\n")
        else:
            fh.write(line + b"\n")
"""
    follower = DirectoryFollower(tmp_path)
    received: list[FollowEvent] = []
    stop = threading.Event()

    def handle(event: FollowEvent) -> None:
        received.append(event)
        total = sum(len(e.lines) for e in received)
        if total == n + 1:
            stop.set()

    thread = threading.Thread(
        target=follow_forever, args=(follower, handle), kwargs={"interval": 0.001, "stop": stop}
    )
    thread.start()
    proc = subprocess.run([sys.executable, "-c", script, str(path), str(n), HEADER], timeout=60)
    assert proc.returncode == 0
    thread.join(timeout=30)
    stop.set()
    assert not thread.is_alive()
    assert received[0].kind == "new"
    assert {e.kind for e in received[1:]} <= {"lines"}
    lines = [line for e in received for line in e.lines]
    assert lines[0] == HEADER.encode()
    assert [json.loads(x)["n"] for x in lines[1:]] == list(range(n))


def test_follow_forever_stops_after_max_polls(tmp_path):
    follower = DirectoryFollower(tmp_path)
    assert follow_forever(follower, lambda e: None, interval=0, max_polls=3) == 0
