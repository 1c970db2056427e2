"""The texts rows show of each multi-MB line, stored with the entry
(``explorer.models.BigLineText``), and filled for the sessions stored before.

The fill reads the historical table with raw SQL: per session, the keys of the entries whose
line is at least 256 KB (``line_text_store.BIG_LINE`` when this was written; compactions
left out, as the writers leave them), then their lines a few at a time, each parsed and
masked as a page reads it (every secret but the session's false positives), and stores
``analysis.line_texts.line_texts`` of it under that masking: the rows an import writes
today. A line that is not a JSON object gets no row (the page parses it, as before).
"""

import django.db.models.deletion
from django.db import connection, migrations, models

BIG_LINE = 256 * 1024
READ = 16  # lines read at once: a few MB each


def fill(apps, schema_editor):
    from explorer import conf
    from explorer.analysis.line_texts import line_texts
    from explorer.secrets import redact_entry
    from explorer.session import jsonfmt
    from explorer.survival_store import mask_stamp

    with connection.cursor() as cur:
        cur.execute("SELECT DISTINCT session_id FROM explorer_entry WHERE size >= %s", [BIG_LINE])
        sessions = [r[0] for r in cur.fetchall()]
        for session_pk in sessions:
            cur.execute(
                "SELECT fingerprint FROM explorer_secretfinding "
                "WHERE session_id = %s AND status = %s",
                [session_pk, "false_positive"],
            )
            allow = frozenset(r[0] for r in cur.fetchall())
            mask = mask_stamp(allow)
            cur.execute(
                "SELECT id FROM explorer_entry WHERE session_id = %s AND size >= %s "
                "AND type <> %s ORDER BY position",
                [session_pk, BIG_LINE, "compaction"],
            )
            pks = [r[0] for r in cur.fetchall()]
            for k in range(0, len(pks), READ):
                chunk = pks[k : k + READ]
                marks = ", ".join(["%s"] * len(chunk))
                cur.execute(f"SELECT id, raw FROM explorer_entry WHERE id IN ({marks})", chunk)
                rows = []
                for pk, raw in cur.fetchall():
                    try:
                        value = jsonfmt.loads(raw)
                    except ValueError:
                        continue
                    if not isinstance(value, dict):
                        continue
                    shown = redact_entry(value, allow=allow, key=conf.secrets_key())
                    rows.append((pk, session_pk, jsonfmt.dumps(line_texts(shown)), mask))
                if not rows:
                    continue
                cur.executemany(
                    "INSERT INTO explorer_biglinetext (entry_id, session_id, texts, mask) "
                    "VALUES (%s, %s, %s, %s)",
                    rows,
                )


class Migration(migrations.Migration):
    dependencies = [
        ("explorer", "0026_survival_checks"),
    ]

    operations = [
        migrations.CreateModel(
            name="BigLineText",
            fields=[
                (
                    "entry",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        primary_key=True,
                        related_name="big_line_text",
                        serialize=False,
                        to="explorer.entry",
                    ),
                ),
                (
                    "texts",
                    models.TextField(
                        help_text="analysis.line_texts.line_texts of the masked entry, as JSON"
                    ),
                ),
                (
                    "mask",
                    models.CharField(
                        help_text="The masking it was read with (survival_store.mask_stamp): another one, and the page parses the line itself",
                        max_length=64,
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
        ),
        migrations.RunPython(fill, migrations.RunPython.noop, elidable=False),
    ]
