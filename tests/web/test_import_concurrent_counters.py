"""Counters stay exact when other writers append while an import runs: the importing
session's and the other session's stored counters (entries, leaves, context edits, next
position, child counts) equal a recount from their rows afterwards."""

from __future__ import annotations

from collections import Counter

import pytest

from explorer import files, services
from explorer.files import store
from explorer.models import Entry, Session
from tests.web.test_import_batches import ROWS, _file, _in_thread

pytestmark = pytest.mark.django_db(transaction=True)

TIP = "1b2c3d4e"  # the small session's newest entry
COUNTERS = ("entry_count", "leaf_count", "compaction_count", "context_edit_count", "next_position")


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    monkeypatch.setattr(store, "_BATCH_ROWS", ROWS)  # read by the batch writer


def _stored(session: Session) -> dict[str, int]:
    session.refresh_from_db()
    return {name: getattr(session, name) for name in COUNTERS}


def _recounted(session: Session) -> dict[str, int]:
    files.refresh_counters(session)  # from the rows
    return _stored(session)


def _child_counts_exact(session: Session) -> bool:
    real = Counter(
        Entry.objects.filter(session=session, parent_id__isnull=False).values_list(
            "parent_id", flat=True
        )
    )
    stored = dict(Entry.objects.filter(session=session).values_list("entry_id", "child_count"))
    return all(stored[e] == real.get(e, 0) for e in stored)


def test_counters_are_exact_after_appends_during_an_import(make_session, editor_user):
    other = make_session()
    appended: list[str] = []

    def during_import(progress: files.ImportProgress) -> None:
        if progress.entries < 2 * ROWS or len(appended) >= 6:
            return
        # Another writer, mid-import: a message, a label, a context edit, a side branch.
        leaf = appended[-1] if appended else TIP
        message = {"role": "user", "content": f"during {len(appended)}", "timestamp": 1}
        appended.append(
            _in_thread(
                lambda: (
                    services.append_message(
                        other, editor_user, message, leaf_id=leaf
                    ).entry.entry_id
                )
            )
        )
        appended.append(
            _in_thread(
                lambda: (
                    services.set_label(
                        other, editor_user, TIP, "x", leaf_id=appended[-1]
                    ).entry.entry_id
                )
            )
        )
        appended.append(
            _in_thread(
                lambda: (
                    services.add_context_edit(
                        other, editor_user, appended[-2], None, leaf_id=appended[-1]
                    ).entry.entry_id
                )
            )
        )

    before = _stored(other)
    progress = files.ImportProgress(report=during_import, every=0)
    with files.reporting(progress):
        result = services.import_bytes(_file("counted", 8 * ROWS))
    assert result.ok and result.added == 8 * ROWS and len(appended) == 6
    imported = Session.objects.get(session_id="counted")
    assert _stored(imported)["entry_count"] == 8 * ROWS
    for session in (other, imported):
        stored = _stored(session)
        assert stored == _recounted(session)
        assert _child_counts_exact(session)
    assert _stored(other)["entry_count"] == before["entry_count"] + 6
    assert _stored(other)["context_edit_count"] == before["context_edit_count"] + 2
