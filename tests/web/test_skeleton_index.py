"""Migration 0013: the covering index the whole-session reads in file order use.

The skeleton, integrity and cost reads must be answered from the index alone on SQLite (each
row's raw line lies between their columns, so a table read steps over every raw line of
a big session), and the migration must go forward and back."""

from __future__ import annotations

import pytest
from django.db import connection

from explorer import queries
from explorer.models import Entry

SKELETON_COLUMNS = [
    "session_id",
    "position",
    "entry_id",
    "parent_id",
    "type",
    "role",
    "line_no",
    "target_id",
    "cost",
]


def _index_columns() -> list[str] | None:
    with connection.cursor() as cur:
        found = connection.introspection.get_constraints(cur, Entry._meta.db_table)
    index = found.get("entry_skeleton")
    return list(index["columns"]) if index else None


def _plan(queryset) -> str:
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute("EXPLAIN QUERY PLAN " + sql, params)
        return " ".join(str(row) for row in cur.fetchall())


@pytest.mark.django_db
def test_the_whole_session_reads_never_leave_the_index(make_session):
    session = make_session()
    assert _index_columns() == SKELETON_COLUMNS
    rows = queries._skeleton_rows(session, -1, queries.last_position(session))
    assert len(rows) == Entry.objects.filter(session=session).count() > 0
    if connection.vendor != "sqlite":
        return  # PostgreSQL keeps the raw line out of the row (TOAST); the index is there
    base = Entry.objects.filter(session=session, position__gt=-1, position__lte=10**9).order_by(
        "position"
    )
    skeleton = base.values_list("entry_id", "parent_id", "type", "role")
    stubs = base.values_list("entry_id", "parent_id", "type", "role", "line_no", "target_id")
    costs = base.exclude(cost=0).values_list("entry_id", "cost")
    for qs in (skeleton, stubs, costs):
        plan = _plan(qs)
        assert "COVERING INDEX entry_skeleton" in plan, plan


@pytest.mark.django_db(transaction=True)
def test_migration_0013_goes_forward_and_back(make_session):
    from django.db.migrations.executor import MigrationExecutor

    old = [("explorer", "0012_search_index_batch_fill")]
    new = [("explorer", "0013_entry_cost_skeleton_index")]
    session = make_session()
    count = Entry.objects.filter(session=session).count()
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(old)
        assert _index_columns() is None
        assert Entry.objects.filter(session=session).count() == count
        executor = MigrationExecutor(connection)
        executor.migrate(new)
        assert _index_columns() == SKELETON_COLUMNS
        assert Entry.objects.filter(session=session).count() == count
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert _index_columns() == SKELETON_COLUMNS
