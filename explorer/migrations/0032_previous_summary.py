"""A compaction's summary beside the previous compaction's on its route, stored with its
survival check (``SurvivalCheck.previous``), and filled for the sessions stored before.

The fill reads the historical tables with raw SQL, as 0026 did: per session with stored
compaction checks, the id, parent and type of every entry, each compaction's route walked up
in memory, the previous compaction on it, and the two summaries masked as a page reads them.
It compares them with the analysis the page uses (``explorer.analysis.summary_diff``). A row
stored under a masking other than today's is left unfilled: its page checks the entry
itself, comparison included, as it does for a row without the comparison.
"""

import importlib

from django.db import connection, migrations, models

# 0026's route walk and masked reads: a migration never changes, so reusing them is reusing
# frozen code, not today's.
_CHECKS = importlib.import_module("explorer.migrations.0026_survival_checks")


def _comparison(cur, session_pk, route, rows, allow):
    from explorer.analysis.summary_diff import dropped_references, word_diff
    from explorer.session import jsonfmt

    prev = next((e for e in reversed(route[:-1]) if rows[e][1] == "compaction"), None)
    if prev is None:
        return "null"
    lines = _CHECKS._lines(cur, session_pk, [prev, route[-1]], allow)

    def summary(entry_id):
        value = lines.get(entry_id, {}).get("summary")
        return value if isinstance(value, str) else ""

    before, after = summary(prev), summary(route[-1])
    report = dropped_references(before, after, route)
    return jsonfmt.dumps(
        {
            "id": prev,
            "diff": [[op, text] for op, text in word_diff(before, after)],
            "dropped": [[i.kind, i.value, i.survived, i.partial] for i in report.items],
        }
    )


def fill(apps, schema_editor):
    from explorer.survival_store import mask_stamp

    with connection.cursor() as cur:
        cur.execute(
            "SELECT DISTINCT c.session_id FROM explorer_survivalcheck c "
            "JOIN explorer_entry e ON e.id = c.entry_id WHERE e.type = %s",
            ["compaction"],
        )
        sessions = [r[0] for r in cur.fetchall()]
        for session_pk in sessions:
            cur.execute(
                "SELECT fingerprint FROM explorer_secretfinding "
                "WHERE session_id = %s AND status = %s",
                [session_pk, "false_positive"],
            )
            allow = frozenset(r[0] for r in cur.fetchall())
            cur.execute(
                "SELECT c.entry_id FROM explorer_survivalcheck c "
                "JOIN explorer_entry e ON e.id = c.entry_id "
                "WHERE c.session_id = %s AND e.type = %s AND c.mask = %s",
                [session_pk, "compaction", mask_stamp(allow)],
            )
            checked = {r[0] for r in cur.fetchall()}
            if not checked:
                continue
            cur.execute(
                "SELECT id, entry_id, parent_id, type FROM explorer_entry WHERE session_id = %s",
                [session_pk],
            )
            rows, pks = {}, {}
            for pk, entry_id, parent_id, kind in cur.fetchall():
                rows[entry_id] = (parent_id, kind)
                if pk in checked:
                    pks[entry_id] = pk
            out = []
            for entry_id, pk in pks.items():
                route = _CHECKS._route(entry_id, rows)
                if route and route[-1] == entry_id:
                    out.append((_comparison(cur, session_pk, route, rows, allow), pk))
            for k in range(0, len(out), 500):
                cur.executemany(
                    "UPDATE explorer_survivalcheck SET previous = %s WHERE entry_id = %s",
                    out[k : k + 500],
                )


class Migration(migrations.Migration):
    dependencies = [("explorer", "0031_search_text_update_trigger")]

    operations = [
        migrations.AddField(
            model_name="survivalcheck",
            name="previous",
            field=models.TextField(
                blank=True,
                help_text="A compaction's summary beside the previous compaction's on its "
                "route, as JSON (survival_store.encode_previous; JSON null: none before it); "
                "NULL: not stored, the page compares them itself",
                null=True,
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop, elidable=False),
    ]
