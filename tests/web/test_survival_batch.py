"""An import's end checks every compaction and branch summary of its file at once
(``explorer.survival_batch``: the session's index rows read once, each route walked in
memory, parsed lines kept between checks). Its rows must be exactly those of the
one-at-a-time path an append takes (a route walk and a read of the lines in the database
per check): every check of generated sessions with branches and nested compactions, and of
a file with secrets, a dangling parent and summaries of routes not stored, is computed both
ways and compared, with the routes and lines each way reads."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks.gen_session import generate_session
from explorer import services, survival_store, survival_writer
from explorer.models import Entry, SecretFinding, Session, SurvivalCheck
from explorer.queries.compactions import (
    branch_summary_check,
    compaction_check,
    database_reads,
)
from explorer.queries.entries import load_entries
from explorer.queries.routes import light_path
from explorer.survival_batch import SessionReads

pytestmark = pytest.mark.django_db

SECRET = "ghp_" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6J7k8"
HEADER = {"type": "session", "version": 3, "id": "s-batch", "timestamp": "t", "cwd": "/w"}


def _checked(session: Session) -> list[tuple[str, str]]:
    return list(
        Entry.objects.filter(session=session, type__in=survival_store.CHECKED_TYPES)
        .order_by("position")
        .values_list("entry_id", "type")
    )


def _one_at_a_time(session: Session, entry_id: str, kind: str) -> Any:
    light = light_path(session, entry_id)
    if not light or light[-1].entry_id != entry_id:
        return None
    check = compaction_check if kind == "compaction" else branch_summary_check
    return check(session, light, database_reads(session))


def assert_batch_is_one_at_a_time(session: Session) -> int:
    """Every check's report, route and lines are the same read in a batch as one at a time,
    and the stored rows (written by the import, in a batch when there were enough) are the
    one-at-a-time reports. Returns how many reports were compared."""
    batch = SessionReads(session)
    reads = batch.reads()
    compared = 0
    stored = dict(
        SurvivalCheck.objects.filter(session=session).values_list("entry__entry_id", "report")
    )
    for entry_id, kind in _checked(session):
        want = _one_at_a_time(session, entry_id, kind)
        route = reads.route(entry_id)
        assert route == light_path(session, entry_id)
        check = compaction_check if kind == "compaction" else branch_summary_check
        got = check(session, route, reads)
        assert got == want, entry_id
        if want is None:
            assert entry_id not in stored
        else:
            assert survival_store.decode(stored[entry_id]) == want
            compared += 1
    ids = list(Entry.objects.filter(session=session).values_list("entry_id", flat=True))
    assert reads.lines(ids) == load_entries(session, ids, recorded=False)
    for entry_id in ids:
        assert reads.exists(entry_id)
        assert reads.route(entry_id) == light_path(session, entry_id)
    assert not reads.exists("not-stored") and reads.route("not-stored") == []
    return compared


@pytest.mark.parametrize(
    "size, branch_points, seed, after", [(1500, 12, 1, 60), (2500, 30, 2, 150), (900, 4, 3, 40)]
)
def test_generated_sessions(tmp_path, size, branch_points, seed, after):
    f = generate_session(
        tmp_path / "s.jsonl", entries=size, branch_points=branch_points, seed=seed,
        compact_after=after,
    )  # fmt: skip
    session = services.import_bytes(f.read_bytes()).session
    assert len(_checked(session)) >= survival_writer.BATCH_FROM  # the import took the batch
    kinds = {kind for _id, kind in _checked(session)}
    assert kinds == {"compaction", "branch_summary"}
    assert assert_batch_is_one_at_a_time(session) >= survival_writer.BATCH_FROM


def _msg(i: int, parent: str | None, text: str) -> dict[str, Any]:
    return {"type": "message", "id": f"m{i}", "parentId": parent, "timestamp": "t",
            "message": {"role": "user", "content": [{"type": "text", "text": text}]}}  # fmt: skip


def _compaction(i: int, parent: str, first_kept: str, summary: str) -> dict[str, Any]:
    return {"type": "compaction", "id": f"c{i}", "parentId": parent, "summary": summary,
            "firstKeptEntryId": first_kept, "tokensBefore": 9, "timestamp": "t"}  # fmt: skip


def _file(values: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(v).encode() + b"\n" for v in [HEADER, *values])


def test_secrets_dangling_parents_and_summaries_of_routes_not_stored():
    """Masked values (a secret in a replaced entry), a compaction whose first kept entry is
    on another branch, a route that stops at a parent not in the file, branch summaries of
    a stored route, of one not stored and of none: the same rows both ways."""
    values = [
        _msg(0, None, f"see https://h.io/a?token={SECRET} and src/a.py, 12345"),
        _msg(1, "m0", "run `git status` in tests/b.py"),
        _msg(2, "m1", "then 3.14 and https://x.io/y"),
        _compaction(3, "m2", "m2", f"src/a.py {SECRET[:10]}"),
        _msg(4, "c3", "more in lib/c.py"),
        _compaction(5, "m4", "m4", "c.py"),  # nested: c3 lies in its replaced range
        _msg(6, "m1", "a branch at m1: docs/d.md 4242"),
        _compaction(7, "m6", "m4", "off route"),  # first kept entry on the other branch
        {"type": "branch_summary", "id": "b8", "parentId": "m1", "fromId": "m4",
         "summary": "tried lib/c.py", "timestamp": "t"},
        {"type": "branch_summary", "id": "b9", "parentId": "m0", "fromId": "later",
         "summary": "not stored", "timestamp": "t"},
        {"type": "branch_summary", "id": "b10", "parentId": "m0", "summary": "no fromId",
         "timestamp": "t"},
        _msg(11, "gone", "a parent not in the file: src/x.py 99999"),
        _compaction(12, "m11", "m11", "x.py"),
    ]  # fmt: skip
    values += [_msg(100 + k, "c12" if k == 0 else f"m{99 + k}", f"pad {k}") for k in range(3)]
    values += [_compaction(200, "m102", "m101", "pad 1"), _compaction(201, "c200", "c201", "me")]
    session = services.import_bytes(_file(values)).session
    assert session is not None
    assert len(_checked(session)) >= survival_writer.BATCH_FROM
    assert SecretFinding.objects.filter(session=session, entry_id="m0").exists()
    assert assert_batch_is_one_at_a_time(session) == 8  # b9's route is not stored
    report = SurvivalCheck.objects.get(entry__session=session, entry__entry_id="c3").report
    assert SECRET not in report and "src/a.py" in report


def test_the_import_writes_the_one_at_a_time_rows(tmp_path):
    """The rows an import writes (its checks read in a batch, before its last transaction)
    are byte for byte those each check makes alone after the import (its route walked and
    its lines read in the database), masking stamp included."""
    f = generate_session(tmp_path / "s.jsonl", entries=1200, branch_points=10, seed=5,
                         compact_after=70)  # fmt: skip
    session = services.import_bytes(f.read_bytes()).session
    stored = {
        entry_id: (report, mask)
        for entry_id, report, mask in SurvivalCheck.objects.filter(session=session).values_list(
            "entry__entry_id", "report", "mask"
        )
    }
    alone = {}
    for entry_id, kind in _checked(session):
        for row in survival_writer.compute_checks(session, [(entry_id, kind)]):  # one alone
            alone[entry_id] = (row.report, row.mask)
    assert len(stored) >= survival_writer.BATCH_FROM and stored == alone
