"""On SQLite, the entry table's line (``raw``, ``raw_bytes``) moves after every other column.

SQLite stores a row's columns in table order and reaches a column by stepping over the ones
before it; a multi-MB line spills into overflow pages, so reading ``role``, ``size``,
``target_id`` or ``session_id`` of such a row (the tree's rows, the routes' light rows, the
leaf picker) followed the whole line: 140-165 ms for a hundred 3.7 MB tool results, against
under a millisecond for the columns before it. With the line last, a read that does not ask
for it stops before it.

The table is rebuilt once (Django's own SQLite rebuild, which an altered field triggers and
which puts the altered fields last), with its indexes and constraints. A column added to
``Entry`` later lands after the line again: add it with a rebuild like this one. PostgreSQL
keeps long values out of line (TOAST), so it is left as it is. Reversing changes nothing:
the order is not part of the schema Django compares.
"""

from django.db import migrations

BODY = ("raw", "raw_bytes")


def body_last(apps, schema_editor):
    if schema_editor.connection.vendor != "sqlite":
        return
    Entry = apps.get_model("explorer", "Entry")
    moved = []
    for name in BODY:
        old = Entry._meta.get_field(name)
        new = old.clone()  # a new field sorts after every existing one: its column goes last
        new.set_attributes_from_name(name)
        moved.append((old, new))
    schema_editor._remake_table(Entry, alter_fields=moved)


class Migration(migrations.Migration):
    dependencies = [("explorer", "0023_route_messages")]

    operations = [migrations.RunPython(body_last, migrations.RunPython.noop, elidable=False)]
