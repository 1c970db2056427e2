"""The files each entry's tool calls read and modify, stored with the entry
(``explorer.models.FileUse``), and filled for the sessions stored before.

The fill parses only the lines that can name a file: those whose route figure counts more
tool calls than its parent's (as Compare's ``_calling`` finds the tool-calling replies),
read a page of positions at a time with raw SQL on this state's tables, and writes what
``describe.file_uses`` (the engine's) gives for each, as an import writes it today
(``explorer.file_use_store``). Reversible: going back drops the table.
"""

import json

import django.db.models.deletion
from django.db import connection, migrations, models

PAGE = 500  # lines read per query


def fill(apps, schema_editor):
    from explorer.session import jsonfmt
    from explorer.session.describe import file_uses

    calling = (
        "SELECT e.position, e.raw FROM explorer_entry e "
        "JOIN explorer_routefigure f ON f.entry_id = e.id "
        "LEFT JOIN explorer_entry p ON p.session_id = e.session_id AND p.entry_id = e.parent_id "
        "LEFT JOIN explorer_routefigure pf ON pf.entry_id = p.id "
        "WHERE e.session_id = %s AND e.position > %s "
        "AND f.tool_calls > COALESCE(pf.tool_calls, 0) "
        "ORDER BY e.position LIMIT %s"
    )
    insert = "INSERT INTO explorer_fileuse (session_id, position, uses) VALUES (%s, %s, %s)"
    with connection.cursor() as cur:
        cur.execute("SELECT DISTINCT session_id FROM explorer_routefigure WHERE tool_calls > 0")
        sessions = sorted(r[0] for r in cur.fetchall())
        for session_pk in sessions:
            after = -1
            while True:
                cur.execute(calling, [session_pk, after, PAGE])
                rows = cur.fetchall()
                if not rows:
                    break
                out = []
                for position, raw in rows:
                    try:
                        value = jsonfmt.loads(raw)
                    except ValueError:
                        continue
                    uses = file_uses(value) if isinstance(value, dict) else []
                    if uses:
                        out.append((session_pk, position, json.dumps(uses)))
                if out:
                    cur.executemany(insert, out)
                after = rows[-1][0]


class Migration(migrations.Migration):
    dependencies = [("explorer", "0027_big_line_texts")]

    operations = [
        migrations.CreateModel(
            name="FileUse",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "position",
                    models.IntegerField(help_text="The entry's position in the session's file"),
                ),
                (
                    "uses",
                    models.TextField(
                        help_text='JSON list of ["read" | "modified", path], in call order '
                        "(describe.file_uses)"
                    ),
                ),
                (
                    "session",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="explorer.session",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("session", "position"), name="fileuse_unique_pos"
                    )
                ],
            },
        ),
        migrations.RunPython(fill, migrations.RunPython.noop, elidable=False),
    ]
