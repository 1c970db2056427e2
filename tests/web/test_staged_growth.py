"""A grown file's import on SQLite stages its entries in a hidden session and moves them
into the stored one at the end (``explorer.files.growth``): every row it stores equals what
importing the whole file at once stores; other writers write meanwhile; readers never see a
half-grown session; a refused, failed or overtaken growth adds nothing and leaves nothing."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest
from django.db import connection, transaction

from benchmarks.gen_session import generate_session
from explorer import files, queries, services, storage
from explorer.files import growth, store
from explorer.models import (
    BigLineText,
    Entry,
    EntryText,
    ExtraLine,
    FileUse,
    Leaf,
    RouteFigure,
    SecretFinding,
    Segment,
    SegmentEntry,
    Session,
    SurvivalCheck,
)
from tests.web.test_import_batches import _dead_pid, _in_thread

pytestmark = pytest.mark.django_db(transaction=True)

# PostgreSQL grows a stored session in one transaction (growth.py says why): the tests of the
# staging itself are SQLite's; that other writers write meanwhile holds on both.
sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="PostgreSQL grows in one transaction (growth.py)"
)

ROWS = 40  # rows per batch here, so a small growth makes several batches
SECRET = "AKIA" + "QWERTYUIOPASDFGH"  # an access key id the scanner finds


@pytest.fixture(autouse=True)
def small_batches_and_staged(monkeypatch):
    monkeypatch.setattr(store, "_BATCH_ROWS", ROWS)
    monkeypatch.setattr(growth, "STAGE_FROM_BYTES", 1)  # every growth here is staged


def _generated(tmp_path, seed: int, entries: int = 700) -> bytes:
    path = generate_session(
        tmp_path / f"g{seed}.jsonl",
        entries=entries,
        branch_points=12,
        seed=seed,
        compact_after=40_000,
    )
    lines = path.read_bytes().splitlines(keepends=True)
    # A secret in the growth, a line the importer keeps without storing it as an entry, and
    # an entry whose parent comes later in the file.
    last = json.loads(lines[-1])
    late_parent = {**last, "id": "late-parent", "parentId": last["id"]}
    early_child = {**last, "id": "early-child", "parentId": "late-parent"}
    leak = {
        **last,
        "id": "leaky",
        "parentId": last["id"],
        "type": "message",
        "message": {"role": "user", "content": f"my key is {SECRET}", "timestamp": 1},
    }
    extra = [json.dumps(x).encode() + b"\n" for x in (early_child, late_parent, leak)]
    return b"".join([*lines, b"\n", *extra])


def _renamed(data: bytes, session_id: str) -> bytes:
    head, rest = data.split(b"\n", 1)
    header = json.loads(head)
    header["id"] = session_id
    return json.dumps(header).encode() + b"\n" + rest


def _cut(data: bytes, fraction: float) -> bytes:
    """The file's first lines, about ``fraction`` of them, ending with a newline."""
    lines = data.splitlines(keepends=True)
    return b"".join(lines[: max(2, int(len(lines) * fraction))])


def _rows(session: Session) -> dict[str, Any]:
    """Everything stored for the session, keyed by what does not depend on row ids."""
    by_pk = dict(Entry.objects.filter(session=session).values_list("pk", "entry_id"))
    entries = {
        e["entry_id"]: {k: v for k, v in e.items() if k not in ("id", "session_id", "author_id")}
        for e in Entry.objects.filter(session=session).values()
    }
    figures = {
        by_pk[f.pop("entry_id")]: {k: v for k, v in f.items() if k != "session_id"}
        for f in RouteFigure.objects.filter(session=session).values()
    }
    heads = {s.pk: by_pk[s.head_id] for s in Segment.objects.filter(session=session)}
    segments = {
        by_pk[s.head_id]: (
            heads.get(s.parent_segment_id),
            s.parent_offset,
            s.length,
            s.missing_parent,
            s.head_position,
        )
        for s in Segment.objects.filter(session=session)
    }
    members = {
        by_pk[m.entry_id]: (heads.get(m.segment_id), m.offset)
        for m in SegmentEntry.objects.filter(session=session)
    }
    return {
        "entries": entries,
        "figures": figures,
        "segments": segments,
        "members": members,
        "uses": set(FileUse.objects.filter(session=session).values_list("position", "uses")),
        "line_texts": {
            by_pk[b.entry_id]: (b.texts, b.mask)
            for b in BigLineText.objects.filter(session=session)
        },
        "secrets": sorted(
            SecretFinding.objects.filter(session=session).values_list(
                "entry_id", "path", "fingerprint", "line_no", "status"
            )
        ),
        "texts": list(
            EntryText.objects.filter(session=session)
            .order_by("id")
            .values_list("entry_id", "position", "type", "role", "text")
        ),
        "extra": list(
            ExtraLine.objects.filter(session=session)
            .order_by("position")
            .values_list("position", "line_no", "kind", "raw")
        ),
        "checks": {
            by_pk[c.entry_id]: c.report for c in SurvivalCheck.objects.filter(session=session)
        },
        "leaves": set(Leaf.objects.filter(session=session).values_list("name", "entry_id")),
        "counters": Session.objects.filter(pk=session.pk).values(
            "entry_count",
            "leaf_count",
            "compaction_count",
            "context_edit_count",
            "next_position",
            "warning_count",
            "cost_partials",
            "source_size",
            "missing_final_newline",
            "name",
        )[0],  # fmt: skip
    }


@sqlite_only
@pytest.mark.parametrize(("seed", "fraction"), [(3, 0.1), (5, 0.5), (8, 0.97)])
def test_a_staged_growth_stores_what_the_whole_file_stores(tmp_path, seed, fraction):
    data = _generated(tmp_path, seed)
    whole = services.import_bytes(_renamed(data, "whole"))
    assert whole.ok, whole.problems
    assert services.import_bytes(_cut(data, fraction)).ok
    grown = services.import_bytes(data)
    assert grown.ok, grown.problems
    assert grown.added > 3 and not grown.created
    assert not Session.every.filter(state=Session.IMPORTING).exists()  # the staging is gone
    want, got = _rows(whole.session), _rows(grown.session)
    assert got["secrets"] and got["texts"] and got["extra"] and got["segments"]
    # The header line differs (its id), so the bytes consumed do too.
    assert want["counters"].pop("source_size") < got["counters"].pop("source_size")
    for key in want:
        assert got[key] == want[key], key


@sqlite_only
def test_the_growth_is_hidden_until_it_is_whole_and_other_writers_write(
    tmp_path, make_session, editor_user
):
    other = make_session()
    label_on = queries.default_leaf_id(other)
    data = _generated(tmp_path, 4, entries=500)
    assert services.import_bytes(_cut(data, 0.2)).ok
    stored = Session.objects.get(session_id=json.loads(data.split(b"\n", 1)[0])["id"])
    before = stored.entry_count
    seen: list[tuple] = []

    def during(progress: files.ImportProgress) -> None:
        if seen or progress.entries < 4 * ROWS:
            return
        label = _in_thread(
            lambda: services.set_label(other, editor_user, label_on, "during").entry.entry_id
        )
        counted = _in_thread(lambda: Entry.objects.filter(session=stored).count())
        listed = _in_thread(lambda: Session.objects.get(pk=stored.pk).entry_count)
        staged = _in_thread(lambda: Entry.objects.filter(session__state=Session.IMPORTING).count())
        seen.append((label, counted, listed, staged))

    with files.reporting(files.ImportProgress(report=during, every=0)):
        result = services.import_bytes(data)
    assert result.ok, result.problems
    ((label, counted, listed, staged),) = seen
    assert Entry.objects.filter(session=other, entry_id=label, type="label").exists()
    assert counted == before and listed == before  # nothing of the growth was visible
    assert staged >= 3 * ROWS  # while whole batches of it were committed
    stored.refresh_from_db()
    assert stored.entry_count == before + result.added


@sqlite_only
def test_a_blocking_problem_in_the_growth_adds_nothing_and_leaves_nothing(tmp_path):
    data = _generated(tmp_path, 6, entries=400)
    assert services.import_bytes(_cut(data, 0.3)).ok
    session = Session.objects.get(session_id=json.loads(data.split(b"\n", 1)[0])["id"])
    before = _rows(session)
    lines = data.splitlines(keepends=True)
    duplicated = data + lines[len(lines) // 2]  # an id of the growth, again, at the end
    result = services.import_bytes(duplicated)
    assert not result.ok and [p.code for p in result.errors] == ["duplicate-id"]
    assert result.session is None
    assert not Session.every.filter(state=Session.IMPORTING).exists()
    assert _rows(session) == before
    assert services.import_bytes(data).ok  # the file fixed, it grows


@sqlite_only
def test_an_exception_mid_growth_leaves_nothing(tmp_path, monkeypatch):
    data = _generated(tmp_path, 7, entries=400)
    assert services.import_bytes(_cut(data, 0.3)).ok
    session = Session.objects.get(session_id=json.loads(data.split(b"\n", 1)[0])["id"])
    before = _rows(session)
    flushes = {"n": 0}
    real = store._Writer._flush

    def failing(self):
        flushes["n"] += 1
        if flushes["n"] == 3:
            raise OSError(28, "No space left on device")
        real(self)

    monkeypatch.setattr(store._Writer, "_flush", failing)
    with pytest.raises(OSError):
        services.import_bytes(data)
    monkeypatch.setattr(store._Writer, "_flush", real)
    assert not Session.every.filter(state=Session.IMPORTING).exists()
    assert not Entry.objects.exclude(session=session).exists()
    assert _rows(session) == before


@sqlite_only
def test_a_session_changed_meanwhile_makes_the_growth_lose_and_say_so(tmp_path, monkeypatch):
    data = _generated(tmp_path, 2, entries=400)
    assert services.import_bytes(_cut(data, 0.3)).ok
    session = Session.objects.get(session_id=json.loads(data.split(b"\n", 1)[0])["id"])
    leaf = queries.default_leaf_id(session)
    label = {"type": "label", "id": "other-process", "parentId": leaf, "targetId": leaf,
             "label": "x", "timestamp": "2025-03-04T05:06:09.000Z"}  # fmt: skip

    def append_elsewhere() -> None:
        # Another process's writer (this process's own wait for the session's lock).
        with transaction.atomic():
            storage.append_lines(session, json.dumps(label).encode() + b"\n")

    def during(progress: files.ImportProgress) -> None:
        if progress.phase == "finishing" and not appended:
            _in_thread(append_elsewhere)
            appended.append(True)

    def never(stage, stored):
        raise AssertionError("moved although the session changed")

    appended: list[bool] = []
    monkeypatch.setattr(growth, "_move", never)
    with files.reporting(files.ImportProgress(report=during, every=0)):
        result = services.import_bytes(data)
    assert appended
    assert not result.ok and [p.code for p in result.errors] == ["changed-meanwhile"]
    assert "Import the file again" in str(result.errors[0])
    assert not Session.every.filter(state=Session.IMPORTING).exists()
    session.refresh_from_db()
    assert Entry.objects.filter(session=session).count() == session.entry_count
    assert Entry.objects.filter(session=session, entry_id="other-process").exists()


@sqlite_only
def test_an_abandoned_staging_is_removed_by_the_next_import(tmp_path, monkeypatch):
    data = _generated(tmp_path, 9, entries=300)
    assert services.import_bytes(_cut(data, 0.5)).ok
    # A process killed mid-growth runs no clean-up: its staging session stays behind.
    monkeypatch.setattr(growth, "_stage_and_move", _die)
    monkeypatch.setattr(growth, "discard", lambda stage: None)
    with pytest.raises(SystemExit):
        services.import_bytes(data)
    assert Entry.objects.filter(entry_id="half").exists()
    Session.every.filter(state=Session.IMPORTING).update(
        import_owner=f"{socket.gethostname()}:{_dead_pid()}"
    )
    monkeypatch.undo()
    monkeypatch.setattr(growth, "STAGE_FROM_BYTES", 1)
    assert services.import_bytes(data).ok
    assert not Session.every.filter(state=Session.IMPORTING).exists()
    assert not Entry.objects.filter(entry_id="half").exists()


def _die(data, consumed, session, stage, result, source_path, plan):
    Entry.objects.create(session=stage, entry_id="half", position=10**6, line_no=1, raw="{}")
    raise SystemExit(1)


@sqlite_only
def test_the_search_index_follows_a_texts_change_and_ignores_a_move(make_session):
    """Migration 0031: the FTS5 update trigger fires for a text's change only, so moving
    rows to another session (the staged growth's last step) does not re-index them."""
    with connection.cursor() as cur:
        cur.execute("SELECT sql FROM sqlite_master WHERE name = 'explorer_entrytext_au'")
        (sql,) = cur.fetchone()
    assert "AFTER UPDATE OF text ON explorer_entrytext" in sql
    session = make_session()
    row = EntryText.objects.filter(session=session).first()
    EntryText.objects.filter(pk=row.pk).update(text="a wombat walks")
    assert queries.search_entries("wombat")["total"] == 1
    EntryText.objects.filter(pk=row.pk).update(text="a numbat naps")
    assert queries.search_entries("wombat")["total"] == 0
    assert queries.search_entries("numbat")["total"] == 1


def _with_own_line(data: bytes, fraction: float, session_id: str) -> bytes:
    """A stored copy of the first lines plus one line the full file lacks, under another
    header id: the full file then differs from it other than by growing."""
    part = _renamed(_cut(data, fraction), session_id)
    last = json.loads(part.splitlines()[-1])
    own = {**last, "id": "only-in-the-stored-copy", "parentId": last["id"]}
    return part + json.dumps(own).encode() + b"\n"


@sqlite_only
@pytest.mark.parametrize("seed", [4, 11])
def test_a_staged_merge_stores_what_the_one_transaction_merge_stores(tmp_path, monkeypatch, seed):
    data = _generated(tmp_path, seed, entries=500)
    results = {}
    for session_id, staged in (("one-transaction", False), ("staged", True)):
        monkeypatch.setattr(growth, "STAGE_FROM_BYTES", 1 if staged else 10**12)
        assert services.import_bytes(_with_own_line(data, 0.3, session_id)).ok
        merged = services.import_bytes(_renamed(data, session_id))
        assert merged.ok, merged.problems
        assert merged.added > ROWS and not merged.created
        results[session_id] = merged
    assert not Session.every.filter(state=Session.IMPORTING).exists()
    one, staged_rows = _rows(results["one-transaction"].session), _rows(results["staged"].session)
    assert "only-in-the-stored-copy" in staged_rows["entries"]
    one["counters"].pop("source_size"), staged_rows["counters"].pop("source_size")  # header ids
    for key in one:
        assert staged_rows[key] == one[key], key


@sqlite_only
def test_a_staged_merge_with_a_conflict_adds_nothing(tmp_path):
    data = _generated(tmp_path, 12, entries=300)
    assert services.import_bytes(_with_own_line(data, 0.3, "conflicted")).ok
    session = Session.objects.get(session_id="conflicted")
    before = _rows(session)
    lines = _renamed(data, "conflicted").splitlines(keepends=True)
    changed = json.loads(lines[5])
    changed["timestamp"] = "2030-01-01T00:00:00.000Z"  # a stored entry, rewritten
    lines[5] = json.dumps(changed).encode() + b"\n"
    result = services.import_bytes(b"".join(lines))
    assert not result.ok and {p.code for p in result.errors} == {"conflict"}
    assert not Session.every.filter(state=Session.IMPORTING).exists()
    assert _rows(session) == before


@sqlite_only
def test_the_staging_key_is_as_wide_as_the_stored_sessions(make_session):
    """Moving a row between keys of one width leaves its record the same size, which SQLite
    overwrites in place, writing only the changed page (not a multi-MB line's pages)."""
    session = make_session()
    for pk, low, high in (
        (1, 0, 0),
        (5, -128, -1),
        (300, -32768, -129),
        (70_000, -(2**23), -32769),
    ):
        session.pk = pk
        stage = growth._staging_session(session)
        assert low <= stage.pk <= high and growth._int_width(stage.pk) == growth._int_width(pk)
        assert stage.state == Session.IMPORTING and not Session.objects.filter(pk=stage.pk)
        if pk == 1:  # its one key of that width is taken now: another staging takes any
            again = growth._staging_session(session)
            assert again.pk not in (0, 1) and again.state == Session.IMPORTING
            again.delete()
        stage.delete()


def test_a_write_to_another_session_is_stored_while_a_grown_file_imports(
    tmp_path, make_session, editor_user
):
    """On both back ends: SQLite stages the growth, PostgreSQL's one transaction takes no lock
    another session's writer waits for."""
    other = make_session()
    label_on = queries.default_leaf_id(other)
    data = _generated(tmp_path, 13, entries=400)
    assert services.import_bytes(_cut(data, 0.2)).ok
    labels: list[str] = []

    def during(progress: files.ImportProgress) -> None:
        if labels or progress.entries < 3 * ROWS:
            return
        labels.append(
            _in_thread(
                lambda: services.set_label(other, editor_user, label_on, "during").entry.entry_id
            )
        )

    with files.reporting(files.ImportProgress(report=during, every=0)):
        result = services.import_bytes(data)
    assert result.ok and result.added > 3 * ROWS and labels
    assert Entry.objects.filter(session=other, entry_id=labels[0], type="label").exists()


# Tables keyed by session that a staged growth does not move, and why. A table an import's
# batches fill that is missing from ``growth._STAGED_TABLES`` would stay with the staging
# session and be deleted with it: this list makes adding one a conscious choice.
NOT_MOVED = {
    "Segment": "placed after the move (segment_store.extend_segments)",
    "SegmentEntry": "placed after the move (segment_store.extend_segments)",
    "SurvivalCheck": "computed and stored after the move's transaction",
    "Leaf": "the cursor, set in the move's transaction",
    "ImportProblem": "the problems, written in the move's transaction",
    "StoredFigure": "whole-session figures, refreshed after the move",
    "CodexFork": "a Codex fork's link, written by codex_forks after an import",
    "TurnLock": "a person's turn, never written by an import",
    "ReviewComment": "written by people",
    "EntryReview": "written by people",
    "ReadMark": "written by people",
    "ShareLink": "written by people",
    "ArchivedBranch": "written by people",
}


@pytest.mark.django_db
def test_every_table_keyed_by_session_is_moved_or_named_as_not_moved():
    from django.apps import apps

    keyed = {
        model.__name__
        for model in apps.get_app_config("explorer").get_models()
        if any(
            f.is_relation and f.related_model is Session and f.name == "session"
            for f in model._meta.fields
        )
    }
    moved = {model.__name__ for model in growth._STAGED_TABLES}
    assert not moved & set(NOT_MOVED)
    assert keyed == moved | set(NOT_MOVED), "a new table keyed by session: move it or say why not"
