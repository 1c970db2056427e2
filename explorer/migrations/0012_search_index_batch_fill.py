"""SQLite: the search index is filled by the writer, one statement per batch of text rows.

The per-row AFTER INSERT trigger of 0008 made every text row its own FTS5 insert: for a big
import that was most of the import's time (each multi-MB text flushed and merged on its own).
The one function that stores text rows (``explorer.files.store_search_rows``) now indexes the
rows it stored with one ``INSERT … SELECT`` per batch, so the trigger goes. Rows stored before
this migration were indexed by that trigger, so the index is already complete. The delete
and update triggers stay: a cascade delete of a session still removes its index rows row by
row, which is what an external-content FTS5 table needs. PostgreSQL (pg_trgm, 0011) keeps its
index itself; there this does nothing.
"""

from django.db import migrations

DROP = "DROP TRIGGER IF EXISTS explorer_entrytext_ai"
# The trigger of 0008, for going back.
CREATE = (
    "CREATE TRIGGER explorer_entrytext_ai AFTER INSERT ON explorer_entrytext BEGIN"
    " INSERT INTO explorer_entrytext_fts(rowid, text) VALUES (new.id, new.text); END"
)


def drop_insert_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(DROP)


def restore_insert_trigger(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        schema_editor.execute(CREATE)


class Migration(migrations.Migration):
    dependencies = [
        ("explorer", "0011_pg_trgm_search"),
    ]

    operations = [migrations.RunPython(drop_insert_trigger, restore_insert_trigger)]
