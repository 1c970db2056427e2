"""Rows looked up by many keys (``explorer.key_lookups``): every key's rows across chunk
edges, with the parameters before and after the key list bound in their places."""

from __future__ import annotations

import pytest

from explorer import key_lookups
from explorer.models import Entry

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("per_statement", [1, 7, 500])
def test_every_key_once_across_chunks(make_session, monkeypatch, per_statement):
    monkeypatch.setattr(key_lookups, "KEYS_PER_STATEMENT", per_statement)
    session = make_session()
    rows = list(Entry.objects.filter(session=session).values_list("entry_id", "position"))
    assert len(rows) > 7
    ids = [eid for eid, _ in rows] + ["no-such-id"]
    table = Entry._meta.db_table
    got = key_lookups.rows_for_keys(
        f"SELECT entry_id, position FROM {table} "
        "WHERE session_id = %s AND entry_id IN ({keys}) AND position >= %s",
        ids,
        before=[session.pk],
        after=[2],
    )
    assert sorted(got) == sorted((e, p) for e, p in rows if p >= 2)
    assert key_lookups.rows_for_keys("SELECT 1 WHERE 1 IN ({keys})", []) == []
