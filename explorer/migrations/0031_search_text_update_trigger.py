"""SQLite: the search index's update trigger fires only when a row's text changes.

0008's trigger ran on every update of a text row, so moving rows to another session (a
grown file's staged import, ``explorer.files.growth``, moves its rows into the stored
session in one statement) deleted and re-inserted every moved text in the FTS5 index: the
whole index fill again, inside the transaction that holds SQLite's write lock. The index
holds only the text (its rows are keyed by the text row's id), so no other column's change
can make it stale. PostgreSQL (pg_trgm, 0011) keeps its index itself; there this does
nothing.
"""

from django.db import migrations

DROP = "DROP TRIGGER IF EXISTS explorer_entrytext_au"
BODY = (
    " ON explorer_entrytext BEGIN"
    " INSERT INTO explorer_entrytext_fts(explorer_entrytext_fts, rowid, text)"
    " VALUES ('delete', old.id, old.text);"
    " INSERT INTO explorer_entrytext_fts(rowid, text) VALUES (new.id, new.text); END"
)
ON_TEXT = "CREATE TRIGGER explorer_entrytext_au AFTER UPDATE OF text" + BODY
ON_ANY = "CREATE TRIGGER explorer_entrytext_au AFTER UPDATE" + BODY  # 0008's, for going back


def on_text(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(DROP)
        schema_editor.execute(ON_TEXT)


def on_any(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(DROP)
        schema_editor.execute(ON_ANY)


class Migration(migrations.Migration):
    dependencies = [
        ("explorer", "0030_big_line_titles"),
    ]

    operations = [migrations.RunPython(on_text, on_any)]
