"""PostgreSQL: a trigram GIN index over the visible text search reads.

SQLite answers substring search from its FTS5 trigram table (0008). PostgreSQL gets the same
promise — any substring of three characters or more, case-insensitive, on the text a reader
sees — from ``pg_trgm``: ``ILIKE '%…%'`` on a ``gin_trgm_ops`` index reads only the rows
whose trigrams match, instead of every row of every session. On SQLite this does nothing.
"""

from django.db import migrations

INDEX = "explorer_entrytext_text_trgm"


def create_index(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    # pg_trgm is a trusted extension (PostgreSQL 13+): the database's owner may create it.
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
    schema_editor.execute(
        f"CREATE INDEX IF NOT EXISTS {INDEX} ON explorer_entrytext USING gin (text gin_trgm_ops)"
    )


def drop_index(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {INDEX}")


class Migration(migrations.Migration):
    dependencies = [
        ("explorer", "0010_review_comments"),
    ]

    operations = [migrations.RunPython(create_index, drop_index)]
