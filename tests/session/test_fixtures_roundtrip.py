"""Real Pi session files (version 1): migration rewrite and version-3 round trips.

The expected digests were produced by Pi 1.0.3 itself opening a copy of each fixture with its
UUID source replaced by a counter (1, 2, 3, ... in the first 8 hex digits); our manager gets
the same id sequence, so the rewritten bytes must be identical.
"""

from __future__ import annotations

import hashlib
import os
import shutil

import pytest

from explorer.session import jsonfmt
from explorer.session.diagnostics import validate_bytes
from explorer.session.manager import SessionManager
from tests.conftest import PI_FIXTURES, pi_fixture_files

from .manager_helpers import U, read_bytes

FIXTURE_DIR = str(PI_FIXTURES)
FIXTURES = [str(p) for p in pi_fixture_files()]

# name -> (sha256 of Pi's rewrite, leaf id, entry count, context message count)
PI_RESULTS = {
    "before-compaction.jsonl": (
        "cf8ebc3f6046b5165f7909c21ef93d5205c9b85ee8a170368063225e624eddd6",
        "000003ea",
        1002,
        446,
    ),
    "large-session.jsonl": (
        "d2012468fd5b23db4563358d398fa9ef3c11143eb427ef4bd9d8823baff47c45",
        "000003fa",
        1018,
        914,
    ),
}


class CounterRng:
    """UUIDs whose first 8 hex digits count up from 1."""

    def __init__(self) -> None:
        self.i = 0

    def __call__(self, n: int) -> bytes:
        self.i += 1
        return self.i.to_bytes(4, "big") + bytes(n - 4)


def _copy(src: str, tmp_path) -> str:
    dst = str(tmp_path / os.path.basename(src))
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o644)
    return dst


@pytest.mark.pi_fixtures
def test_fixtures_exist():
    assert {os.path.basename(f) for f in FIXTURES} >= set(PI_RESULTS)


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("fixture", FIXTURES, ids=os.path.basename)
def test_migration_rewrite_matches_pi(fixture, tmp_path):
    original = read_bytes(fixture)
    path = _copy(fixture, tmp_path)
    m = SessionManager.open(path, rng=CounterRng())
    rewritten = read_bytes(path)
    assert rewritten != original
    lines = rewritten.decode("utf-8").split("\n")
    assert lines[-1] == ""
    header = jsonfmt.loads(lines[0])
    assert header["version"] == 3 and list(header)[-1] == "version"
    for line in lines[1:-1]:
        entry = jsonfmt.loads(line)
        assert isinstance(entry["id"], str) and len(entry["id"]) == 8
        assert "firstKeptEntryIndex" not in entry
    expected = PI_RESULTS.get(os.path.basename(fixture))
    if expected is not None:
        digest, leaf, count, context_count = expected
        assert hashlib.sha256(rewritten).hexdigest() == digest
        assert m.get_leaf_id() == leaf
        assert len(m.get_entries()) == count
        assert len(m.build_session_context().messages) == context_count
    # The migration is linear: the leaf's branch is every entry.
    assert len(m.get_branch()) == len(m.get_entries())
    assert read_bytes(fixture) == original


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("fixture", FIXTURES, ids=os.path.basename)
def test_version3_round_trip_is_byte_identical(fixture, tmp_path):
    path = _copy(fixture, tmp_path)
    SessionManager.open(path, rng=CounterRng())
    v3 = read_bytes(path)
    m = SessionManager.open(path)
    assert read_bytes(path) == v3
    assert m.to_bytes() == v3
    assert validate_bytes(v3).problems == []
    m.append_message(U("one more"))
    after = read_bytes(path)
    assert after.startswith(v3)
    assert after[len(v3) :].count(b"\n") == 1 and after.endswith(b"\n")


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("fixture", FIXTURES, ids=os.path.basename)
def test_readonly_inspection_matches_migration_without_writing(fixture):
    before = read_bytes(fixture)
    a = SessionManager.load_readonly(fixture)
    b = SessionManager.load_readonly(fixture)
    assert read_bytes(fixture) == before
    assert [e["id"] for e in a.get_entries()] == [e["id"] for e in b.get_entries()]
    assert len(a.build_session_context().messages) == len(b.build_session_context().messages)
    expected = PI_RESULTS.get(os.path.basename(fixture))
    if expected is not None:
        assert len(a.get_entries()) == expected[2]
        assert len(a.build_session_context().messages) == expected[3]
    report = validate_bytes(before)
    assert report.ok and report.codes() == ["legacy-version"]


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("fixture", FIXTURES, ids=os.path.basename)
def test_fork_of_fixture_copies_entries_unmigrated(fixture, tmp_path):
    path = _copy(fixture, tmp_path)
    f = SessionManager.fork_from(path, "/w/other", str(tmp_path / "forks"), {"id": "fork"})
    src_lines = read_bytes(path).decode("utf-8").split("\n")[1:-1]
    new_lines = read_bytes(f.get_session_file()).decode("utf-8").split("\n")[1:-1]
    assert new_lines == src_lines  # Pi wrote these lines, so re-serializing reproduces them
