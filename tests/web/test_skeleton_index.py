"""Migration 0013: the covering index the whole-session reads in file order use.

The skeleton, integrity and cost reads must be answered from the index alone on SQLite (each
row's raw line lies between their columns, so a table read steps over every raw line of
a big session), and the migration must go forward and back."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest
from django.db import connection

from explorer import queries
from explorer.models import Entry
from tests.conftest import SMALL_SESSION

MANAGE = Path(__file__).resolve().parents[2] / "manage.py"

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


def _manage(var_dir, *args: str) -> str:
    """Run ``manage.py`` on its own SQLite file, so no other connection of this process (the
    suite's in-memory database is shared-cache) can hold a schema lock on what it migrates."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(SESSIONS_VAR_DIR=str(var_dir), SQLITE_PATH=str(var_dir / "db.sqlite3"))
    env["DJANGO_SETTINGS_MODULE"] = "sessions_site.settings"
    run = subprocess.run(
        [sys.executable, str(MANAGE), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout


def _file_index_and_rows(path) -> tuple[list[str] | None, list[tuple]]:
    with closing(sqlite3.connect(path)) as db:
        names = [r[1] for r in db.execute("PRAGMA index_list('explorer_entry')")]
        columns = (
            [r[2] for r in db.execute("PRAGMA index_info('entry_skeleton')")]
            if "entry_skeleton" in names
            else None
        )
        table = [r[1] for r in db.execute("PRAGMA table_info('explorer_entry')")]
        picked = ["entry_id", "type", "line_no"] + (["cost"] if "cost" in table else [])
        rows = db.execute(
            f"SELECT {', '.join(picked)} FROM explorer_entry ORDER BY session_id, position"
        ).fetchall()
    return columns, rows


@pytest.mark.django_db(transaction=True)
def test_migration_0013_goes_forward_and_back(tmp_path):
    """On SQLite the round trip runs on its own file through ``manage.py``; on PostgreSQL, in
    place on the test database (its schema changes take ordinary locks, released at commit)."""
    if connection.vendor == "sqlite":
        _round_trip_on_own_file(tmp_path)
    else:
        _round_trip_in_place()


def _round_trip_on_own_file(tmp_path) -> None:
    source = tmp_path / "small.jsonl"
    source.write_bytes(SMALL_SESSION)
    _manage(tmp_path, "migrate", "--no-input")
    _manage(tmp_path, "import_sessions", str(source))
    db = tmp_path / "db.sqlite3"
    columns, forward = _file_index_and_rows(db)
    assert columns == SKELETON_COLUMNS and len(forward) > 0
    _manage(tmp_path, "migrate", "explorer", "0012_search_index_batch_fill", "--no-input")
    columns, back = _file_index_and_rows(db)
    assert columns is None  # the index and the cost column are gone, no row with them
    assert back == [row[:3] for row in forward]
    _manage(tmp_path, "migrate", "--no-input")
    columns, again = _file_index_and_rows(db)
    assert columns == SKELETON_COLUMNS
    assert again == forward  # the backfill gives every row the cost it was written with


def _round_trip_in_place() -> None:
    from django.db.migrations.executor import MigrationExecutor

    from explorer import services

    old = [("explorer", "0012_search_index_batch_fill")]
    new = [("explorer", "0013_entry_cost_skeleton_index")]
    session = services.import_bytes(SMALL_SESSION).session
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
