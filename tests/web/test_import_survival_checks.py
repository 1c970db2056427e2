"""A new session's import reads its survival checks before its last transaction (no
write lock held while they read) and only stores them in it: the same rows as each check
made alone after the import."""

from __future__ import annotations

import pytest
from django.db import connection

from explorer import services
from explorer.models import Entry

pytestmark = pytest.mark.django_db(transaction=True)


def test_survival_checks_are_read_before_the_last_transaction(tmp_path, monkeypatch):
    """The checks of a new session's compactions read committed rows outside any
    transaction (no write lock held while they read); the last transaction only stores
    them, the same rows as each check made one at a time after the import."""
    from benchmarks.gen_session import generate_session
    from explorer import survival_writer
    from explorer.models import SurvivalCheck

    calls: list[tuple[str, bool]] = []
    compute, store_rows = survival_writer.compute_checks, survival_writer.store_checks

    def computing(*args, **kwargs):
        calls.append(("compute", connection.in_atomic_block))
        return compute(*args, **kwargs)

    def storing(*args, **kwargs):
        calls.append(("store", connection.in_atomic_block))
        return store_rows(*args, **kwargs)

    monkeypatch.setattr(survival_writer, "compute_checks", computing)
    monkeypatch.setattr(survival_writer, "store_checks", storing)
    f = generate_session(tmp_path / "s.jsonl", entries=1200, branch_points=8, seed=2,
                         compact_after=80)  # fmt: skip
    data = f.read_bytes()
    session = services.import_bytes(data).session
    assert calls == [("compute", False), ("store", True)]
    rows = dict(
        SurvivalCheck.objects.filter(session=session).values_list("entry__entry_id", "report")
    )
    assert len(rows) >= survival_writer.BATCH_FROM
    for entry_id, kind in Entry.objects.filter(
        session=session, type__in=("compaction", "branch_summary")
    ).values_list("entry_id", "type"):  # the one-at-a-time check, made again now
        [row] = survival_writer.compute_checks(session, [(entry_id, kind)]) or [None]
        assert (row.report if row else None) == rows.get(entry_id)
