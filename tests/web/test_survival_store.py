"""The survival check of every compaction and branch summary is stored when the entry is
(an import, an append): the same report the analysis gives from the session's lines, read by
the Compactions page instead of a pass over the replaced text; a GET writes no row, and an
entry without a row (stored before migration 0026) is checked on the page alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.db import transaction

from benchmarks.gen_session import generate_session
from explorer import queries, services, storage, survival_store
from explorer.analysis.compactions import (
    SurvivalReport,
    compaction_ranges,
    replaced_indices,
    survival_of,
)
from explorer.models import Entry, Session, SurvivalCheck
from explorer.queries.compactions import REPLACED_SHOWN, compaction_detail, route_compactions
from explorer.queries.routes import light_path
from explorer.session import jsonfmt
from explorer.session.context import _walk_up, build_entry_index
from tests.conftest import pi_fixture_files

pytestmark = pytest.mark.django_db


def _entries(session: Session) -> list[dict[str, Any]]:
    rows = Entry.objects.filter(session=session).order_by("position").values_list("raw", flat=True)
    return [jsonfmt.loads(raw) for raw in rows]


def _analysis_reports(entries: list[dict[str, Any]]) -> dict[str, SurvivalReport]:
    """Each compaction's and branch summary's check from the lines alone (the analysis)."""
    index = build_entry_index(entries)
    out: dict[str, SurvivalReport] = {}
    for entry in entries:
        if entry.get("type") not in ("compaction", "branch_summary"):
            continue
        path = _walk_up(entry, index)[::-1]
        summary = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
        if entry["type"] == "compaction":
            types = [e.get("type") for e in path]
            rng = compaction_ranges(path)[-1]
            assert rng[0] == len(path) - 1
            replaced = [path[j] for j in replaced_indices(types, rng)][-REPLACED_SHOWN:]
            out[entry["id"]] = survival_of(replaced, summary)
            continue
        from_id = entry.get("fromId") if isinstance(entry.get("fromId"), str) else ""
        if from_id and from_id not in index:
            continue  # not stored: the summarised route is not all there
        left = _walk_up(index[from_id], index)[::-1] if from_id else []
        on_route = {e.get("id") for e in path}
        common = max((k for k, e in enumerate(left) if e.get("id") in on_route), default=-1)
        shown = left[common + 1 :][-REPLACED_SHOWN:]
        out[entry["id"]] = survival_of(shown, summary, [str(e.get("id")) for e in left])
    return out


def _analysis_previous(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any] | None]:
    """Each compaction's summary beside the previous compaction's on its path, from the
    lines alone (the analysis)."""
    from explorer.analysis.summary_diff import dropped_references, word_diff

    index = build_entry_index(entries)
    out: dict[str, dict[str, Any] | None] = {}
    for entry in entries:
        if entry.get("type") != "compaction":
            continue
        path = _walk_up(entry, index)[::-1]
        prev = next((e for e in reversed(path[:-1]) if e.get("type") == "compaction"), None)
        if prev is None:
            out[entry["id"]] = None
            continue
        before = prev.get("summary") if isinstance(prev.get("summary"), str) else ""
        after = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
        dropped = dropped_references(before, after, [str(e.get("id")) for e in path])
        out[entry["id"]] = {
            "id": prev["id"],
            "diff": word_diff(before, after),
            "dropped": dropped,
            "lost": [i for i in dropped.items if not i.survived],
        }
    return out


def assert_checks(session: Session) -> int:
    """Every compaction and branch summary has its row, equal to the analysis's report, and
    the page's report (stored, then computed without the row) is that report too."""
    want = _analysis_reports(_entries(session))
    rows = dict(
        SurvivalCheck.objects.filter(session=session).values_list("entry__entry_id", "report")
    )
    assert set(rows) == set(want)
    for entry_id, report in want.items():
        assert survival_store.decode(rows[entry_id]) == report
    # A compaction's row holds its summary beside the previous one: the analysis's too.
    want_previous = _analysis_previous(_entries(session))
    previous = dict(
        SurvivalCheck.objects.filter(session=session, entry__type="compaction").values_list(
            "entry__entry_id", "previous"
        )
    )
    assert set(previous) == set(want_previous)
    for entry_id, stored in previous.items():
        assert stored is not None
        assert survival_store.decode_previous(stored) == want_previous[entry_id]
    compactions = [i for i, e in want.items() if _type(session, i) == "compaction"]
    for entry_id in compactions[:5] + compactions[-5:]:
        light = light_path(session, entry_id)
        item = route_compactions(session, light)[-1]
        detail = compaction_detail(session, light, item)
        assert detail["report"] == want[entry_id]
        assert detail["previous"] == want_previous[entry_id]
        row = SurvivalCheck.objects.get(pk=light[-1].pk)
        SurvivalCheck.objects.filter(pk=row.pk).update(previous=None)  # stored before 0032
        assert compaction_detail(session, light, item)["previous"] == want_previous[entry_id]
        SurvivalCheck.objects.filter(pk=light[-1].pk).delete()
        before = SurvivalCheck.objects.count()
        detail = compaction_detail(session, light, item)
        assert detail["report"] == want[entry_id]
        assert detail["previous"] == want_previous[entry_id]
        assert SurvivalCheck.objects.count() == before  # a read writes nothing
        row.save(force_insert=True)
    return len(want)


def _type(session: Session, entry_id: str) -> str:
    return Entry.objects.get(session=session, entry_id=entry_id).type


def test_generated_sessions(tmp_path):
    for n, (size, after) in enumerate([(1200, 80), (3000, 300)]):
        f = generate_session(
            tmp_path / f"s{n}.jsonl", entries=size, branch_points=8, seed=n, compact_after=after
        )
        session = services.import_bytes(f.read_bytes()).session
        assert assert_checks(session) > 2


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_pi_files(path: Path):
    session = services.import_bytes(path.read_bytes(), source_path=str(path)).session
    assert_checks(session)


HEADER = b'{"type":"session","version":3,"id":"s-survival","timestamp":"t","cwd":"/w"}\n'


def _lines(entries: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in entries)


def _msg(i: int, parent: str | None, text: str) -> dict[str, Any]:
    return {"type": "message", "id": f"m{i}", "parentId": parent, "timestamp": "t",
            "message": {"role": "user", "content": [{"type": "text", "text": text}]}}  # fmt: skip


def test_appended_compactions_and_branch_summaries_and_a_grown_import():
    first = [_msg(0, None, "edit src/a.py"), _msg(1, "m0", "see https://x.io/y and 12345"),
             _msg(2, "m1", "run `git status`"), _msg(3, "m2", "on m1 it was 3.14")]  # fmt: skip
    session = services.import_bytes(HEADER + _lines(first)).session
    assert assert_checks(session) == 0
    appended = [
        {"type": "compaction", "id": "c4", "parentId": "m3", "summary": "src/a.py, 12345",
         "firstKeptEntryId": "m2", "tokensBefore": 9, "timestamp": "t"},
        _msg(5, "c4", "then tests/b.py"),
        {"type": "branch_summary", "id": "b6", "parentId": "m0", "fromId": "m5",
         "summary": "tried a.py", "timestamp": "t"},
        {"type": "branch_summary", "id": "b7", "parentId": "m0", "fromId": "later",
         "summary": "not all stored", "timestamp": "t"},
    ]  # fmt: skip
    for value in appended:
        with transaction.atomic():
            storage.append_lines(session, _lines([value]))
    assert assert_checks(session) == 2  # b7's summarised route is not stored: no row
    assert not SurvivalCheck.objects.filter(entry__entry_id="b7").exists()
    grown = HEADER + _lines(first + appended) + _lines(
        [{"type": "compaction", "id": "c8", "parentId": "m5", "summary": "b.py",
          "firstKeptEntryId": "m5", "tokensBefore": 9, "timestamp": "t"}]
    )  # fmt: skip
    services.import_bytes(grown)
    assert assert_checks(session) == 3


def test_the_page_reads_the_stored_report(client, admin_user):
    lines = [_msg(0, None, "edit src/a.py"), _msg(1, "m0", "more"),
             {"type": "compaction", "id": "c2", "parentId": "m1", "summary": "nothing",
              "firstKeptEntryId": "m1", "tokensBefore": 9, "timestamp": "t"}]  # fmt: skip
    session = services.import_bytes(HEADER + _lines(lines)).session
    row = SurvivalCheck.objects.get(session=session)
    fake = SurvivalReport(survival_of([], "").items)
    row.report = survival_store.encode(fake)  # what the page shows comes from the row
    row.save()
    light = light_path(session, "c2")
    detail = queries.compaction_detail(session, light, route_compactions(session, light)[-1])
    assert detail["report"] == fake


def test_a_row_read_under_another_masking_is_not_shown():
    """The values are masked as the page reads them: a row written under another masking
    (a finding marked a false positive since) gives way to the entry's own check."""
    secret = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    lines = [_msg(0, None, f"see https://h.io/a?token={secret} for src/a.py"), _msg(1, "m0", "more"),
             {"type": "compaction", "id": "c2", "parentId": "m1", "summary": "src/a.py",
              "firstKeptEntryId": "m1", "tokensBefore": 9, "timestamp": "t"}]  # fmt: skip
    session = services.import_bytes(HEADER + _lines(lines)).session
    row = SurvivalCheck.objects.get(session=session)
    assert secret not in row.report
    light = light_path(session, "c2")
    item = route_compactions(session, light)[-1]
    shown = compaction_detail(session, light, item)["report"]
    assert survival_store.stored_report(session, light[-1].pk) == shown
    SurvivalCheck.objects.filter(pk=row.pk).update(mask="another")
    assert survival_store.stored_report(session, light[-1].pk) is None
    assert compaction_detail(session, light, item)["report"] == shown


@pytest.mark.django_db(transaction=True)
def test_migration_0026_fills_the_checks_of_sessions_stored_before_it(tmp_path):
    """Entries stored at 0025 (through that state's models) get their rows from 0026: the
    analysis's reports, under the masking the page has; back at 0025 the table goes."""
    from django.db import connection

    from tests.web.migration_states import migration_states

    f = generate_session(tmp_path / "s.jsonl", entries=900, branch_points=6, seed=4,
                         compact_after=70)  # fmt: skip
    values = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()[1:]]
    values += [
        {"type": "branch_summary", "id": "bs01", "parentId": values[0]["id"],
         "fromId": values[-1]["id"], "summary": "tried things", "timestamp": "t"},
        {"type": "branch_summary", "id": "bs02", "parentId": values[0]["id"],
         "fromId": "missing", "summary": "nothing stored", "timestamp": "t"},
    ]  # fmt: skip
    want = _analysis_reports(values)
    assert len(want) > 3 and "bs01" in want and "bs02" not in want
    with migration_states() as migrate:
        apps = migrate([("explorer", "0025_session_cost_sum")])
        OldSession = apps.get_model("explorer", "Session")
        OldEntry = apps.get_model("explorer", "Entry")
        stored = OldSession.objects.create(session_id="s-0026", header_raw="{}")
        OldEntry.objects.bulk_create(
            OldEntry(session=stored, entry_id=v["id"], parent_id=v.get("parentId"),
                     type=v["type"], position=k + 1, line_no=k + 2, raw=json.dumps(v))
            for k, v in enumerate(values)
        )  # fmt: skip
        migrate([("explorer", "0026_survival_checks")])
        with connection.cursor() as cur:  # raw SQL: today's code may expect later tables
            cur.execute(
                "SELECT e.entry_id, c.report FROM explorer_survivalcheck c "
                "JOIN explorer_entry e ON e.id = c.entry_id WHERE c.session_id = %s",
                [stored.pk],
            )
            got = {k: survival_store.decode(v) for k, v in cur.fetchall()}
        assert got == want
        migrate()  # the newest state
        session = Session.objects.get(session_id="s-0026")
        light = light_path(session, "bs01")
        assert survival_store.stored_report(session, light[-1].pk) == want[light[-1].entry_id]
        migrate([("explorer", "0025_session_cost_sum")])  # and back: the table goes
        assert "explorer_survivalcheck" not in connection.introspection.table_names()


@pytest.mark.django_db(transaction=True)
def test_migration_0032_fills_the_comparisons_of_checks_stored_before_it(tmp_path):
    """Compaction checks stored at 0031 get their comparison with the previous summary from
    0032 (the analysis's, under today's masking; a row under another masking is left to the
    page); back at 0031 the column goes."""
    from django.db import connection

    from tests.web.migration_states import migration_states

    f = generate_session(tmp_path / "s.jsonl", entries=900, branch_points=6, seed=5,
                         compact_after=70)  # fmt: skip
    values = [json.loads(line) for line in f.read_text(encoding="utf-8").splitlines()[1:]]
    want = _analysis_previous(values)
    assert sum(v is not None for v in want.values()) > 2 and None in want.values()
    stale = sorted(want)[0]
    with migration_states() as migrate:
        apps = migrate([("explorer", "0031_search_text_update_trigger")])
        OldSession = apps.get_model("explorer", "Session")
        OldEntry = apps.get_model("explorer", "Entry")
        stored = OldSession.objects.create(session_id="s-0032", header_raw="{}")
        OldEntry.objects.bulk_create(
            OldEntry(session=stored, entry_id=v["id"], parent_id=v.get("parentId"),
                     type=v["type"], position=k + 1, line_no=k + 2, raw=json.dumps(v))
            for k, v in enumerate(values)
        )  # fmt: skip
        mask = survival_store.mask_stamp(frozenset())
        with connection.cursor() as cur:  # raw SQL: today's model has the new column
            for entry_id in want:
                cur.execute(
                    "INSERT INTO explorer_survivalcheck (entry_id, session_id, report, mask) "
                    "SELECT id, session_id, %s, %s FROM explorer_entry "
                    "WHERE session_id = %s AND entry_id = %s",
                    ["[]", "other" if entry_id == stale else mask, stored.pk, entry_id],
                )
        migrate([("explorer", "0032_previous_summary")])
        with connection.cursor() as cur:
            cur.execute(
                "SELECT e.entry_id, c.previous FROM explorer_survivalcheck c "
                "JOIN explorer_entry e ON e.id = c.entry_id WHERE c.session_id = %s",
                [stored.pk],
            )
            got = dict(cur.fetchall())
        assert got.pop(stale) is None  # another masking: the page compares them itself
        assert {k: survival_store.decode_previous(v) for k, v in got.items()} == {
            k: v for k, v in want.items() if k != stale
        }
        migrate([("explorer", "0031_search_text_update_trigger")])  # and back: the column goes
        with connection.cursor() as cur:
            columns = connection.introspection.get_table_description(cur, "explorer_survivalcheck")
        assert "previous" not in {c.name for c in columns}
        migrate()


def test_a_check_that_fails_never_fails_the_import(monkeypatch):
    from explorer import survival_writer

    def broken(*_args):
        raise ValueError("boom")

    monkeypatch.setattr(survival_writer, "compaction_check", broken)
    lines = [_msg(0, None, "edit src/a.py"), _msg(1, "m0", "more"),
             {"type": "compaction", "id": "c2", "parentId": "m1", "summary": "src/a.py",
              "firstKeptEntryId": "m1", "tokensBefore": 9, "timestamp": "t"}]  # fmt: skip
    session = services.import_bytes(HEADER + _lines(lines)).session
    assert Entry.objects.filter(session=session).count() == 3
    assert not SurvivalCheck.objects.filter(session=session).exists()
    want = _analysis_reports(_entries(session))["c2"]
    light = light_path(session, "c2")
    assert (
        compaction_detail(session, light, route_compactions(session, light)[-1])["report"] == want
    )
