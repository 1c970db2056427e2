"""Migration 0024: on SQLite the entry table's line comes after every other column, so a read
of a row's role, size or session stops before a multi-MB line; the rows are kept as they were."""

from __future__ import annotations

import pytest
from django.db import connection

from tests.web.migration_states import migration_states

pytestmark = pytest.mark.django_db(transaction=True)

OLD = [("explorer", "0023_route_messages")]
NEW = [("explorer", "0024_entry_body_last")]


def _columns() -> list[str]:
    with connection.cursor() as cur:
        return [
            c.name for c in connection.introspection.get_table_description(cur, "explorer_entry")
        ]


def _lines_not_last(apps) -> None:
    """The table as a database migrated before 0024 has it: columns after the line (here
    the role and cost moved last; the test database itself was made with 0024 applied)."""
    Entry = apps.get_model("explorer", "Entry")
    moved = []
    for name in ("role", "cost"):
        old = Entry._meta.get_field(name)
        new = old.clone()
        new.set_attributes_from_name(name)
        moved.append((old, new))
    with connection.schema_editor() as editor:
        editor._remake_table(Entry, alter_fields=moved)


def test_the_line_is_the_last_column_and_the_rows_are_kept():
    big = "x" * 300_000
    with migration_states() as migrate:
        apps = migrate(OLD)
        if connection.vendor == "sqlite":
            _lines_not_last(apps)
            assert _columns()[-2:] != ["raw", "raw_bytes"]
        OldSession = apps.get_model("explorer", "Session")
        OldEntry = apps.get_model("explorer", "Entry")
        stored = OldSession.objects.create(session_id="s-0023", header_raw="{}")
        OldEntry.objects.bulk_create(
            OldEntry(session=stored, entry_id=f"e{k}", parent_id=f"e{k - 1}" if k else None,
                     type="message", role="toolResult", size=len(big) + k, position=k + 1,
                     line_no=k + 2, depth=k, raw=f'{{"id":"e{k}","t":"{big}"}}',
                     raw_bytes=b"\xff" if k == 1 else None, target_id="", cost=0.5 * k)
            for k in range(3)
        )  # fmt: skip
        before = list(
            OldEntry.objects.order_by("position").values_list(
                "pk", "entry_id", "parent_id", "role", "size", "raw", "raw_bytes", "cost", "depth"
            )
        )
        migrate(NEW)
        apps = migrate(NEW)
        NewEntry = apps.get_model("explorer", "Entry")
        after = list(
            NewEntry.objects.order_by("position").values_list(
                "pk", "entry_id", "parent_id", "role", "size", "raw", "raw_bytes", "cost", "depth"
            )
        )
        assert [tuple(r[:6]) + (bytes(r[6]) if r[6] else None,) + tuple(r[7:]) for r in after] == [
            tuple(r[:6]) + (bytes(r[6]) if r[6] else None,) + tuple(r[7:]) for r in before
        ]
        columns = _columns()
        if connection.vendor == "sqlite":
            assert columns[-2:] == ["raw", "raw_bytes"], columns
        else:
            assert {"raw", "raw_bytes", "role", "session_id"} <= set(columns)
        migrate(OLD)  # reversible
        assert set(_columns()) == set(columns)
