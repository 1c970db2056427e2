"""Route figures gain ``every_estimate``: every message of the projected context estimated
(no provider usage trusted), the Timeline's "estimate" line, so the tab reads stored rows
instead of parsing a route.

The column is added, then every stored session's figures are written again by the writer
new imports use (``explorer.route_store.FigureWriter`` on the historical tables, as 0021
does). Reversible: going back drops the column.
"""

from django.db import migrations, models

BATCH = 1000  # entries read, figured and written at a time (under route_store.KEPT)


def refill_figures(apps, schema_editor):
    """Every stored entry's figures again, with the new column, session by session."""
    from explorer.route_store import FigureWriter
    from explorer.session import jsonfmt

    Session = apps.get_model("explorer", "Session")
    Entry = apps.get_model("explorer", "Entry")
    RouteFigure = apps.get_model("explorer", "RouteFigure")
    for session_pk in Session.objects.order_by("pk").values_list("pk", flat=True):
        RouteFigure.objects.filter(session_id=session_pk).delete()
        writer = FigureWriter(
            session_pk,
            entry_table=Entry._meta.db_table,
            figure_table=RouteFigure._meta.db_table,
            segments=False,  # their tables come with 0023
        )
        after = -1
        while True:
            rows = list(
                Entry.objects.filter(session_id=session_pk, position__gt=after)
                .order_by("position")
                .values_list("entry_id", "parent_id", "position", "raw")[:BATCH]
            )
            if not rows:
                break
            for entry_id, parent_id, position, raw in rows:
                try:
                    value = jsonfmt.loads(raw)
                except ValueError:
                    value = {}
                writer.add(entry_id, parent_id, position, value if isinstance(value, dict) else {})
            writer.write()
            after = rows[-1][2]
        writer.finish()


class Migration(migrations.Migration):
    dependencies = [
        ("explorer", "0021_route_figures"),
    ]

    operations = [
        migrations.AddField(
            model_name="routefigure",
            name="every_estimate",
            field=models.FloatField(
                help_text="Every message of the projected context estimated; null for NaN",
                null=True,
            ),
        ),
        migrations.RunPython(refill_figures, migrations.RunPython.noop, elidable=True),
    ]
