"""The projected context's message count on each route figure row (the live meter's count,
so the Live tab reads a row instead of parsing the route).

The column is added, then every stored session's rows are written again by the writer
imports and appends use (``explorer.route_store.fill_session``, raw SQL on the historical
tables, the columns of this state only): the one code that computes a figure fills it, and
stored sessions hold exactly what a new import of the same lines would. Reversible: going
back drops the column.
"""

from django.db import migrations, models

# The figure columns this state has (0021's and the count).
COLUMNS = (
    "depth",
    "turns",
    "responses",
    "input",
    "output",
    "cache_read",
    "cache_write",
    "unpriced",
    "tokens",
    "cost",
    "tool_calls",
    "compaction_id",
    "edit_id",
    "prev_edit_id",
    "role",
    "text_size",
    "context_tokens",
    "usage_tokens",
    "trailing",
    "pending_targets",
    "big_usage",
    "every_estimate",
    "messages",
)


def refill_figures(apps, schema_editor):
    """Every stored session's figure rows, deleted and written again in file order."""
    from explorer.route_store import fill_session

    Session = apps.get_model("explorer", "Session")
    Entry = apps.get_model("explorer", "Entry")
    RouteFigure = apps.get_model("explorer", "RouteFigure")
    table = schema_editor.quote_name(RouteFigure._meta.db_table)
    for session_pk in Session.objects.order_by("pk").values_list("pk", flat=True):
        schema_editor.execute(f"DELETE FROM {table} WHERE session_id = %s", [session_pk])
        fill_session(
            session_pk,
            entry_table=Entry._meta.db_table,
            figure_table=RouteFigure._meta.db_table,
            fields=COLUMNS,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("explorer", "0022_segments"),
    ]

    operations = [
        migrations.AddField(
            model_name="routefigure",
            name="messages",
            field=models.IntegerField(
                default=0, help_text="Messages of the projected context (the live meter's count)"
            ),
        ),
        migrations.RunPython(refill_figures, migrations.RunPython.noop, elidable=True),
    ]
