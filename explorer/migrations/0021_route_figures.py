"""Route figures: one row per entry with the figures of the route ending there.

Created empty, then filled for every stored session by the writer new imports use
(``explorer.route_store.FigureWriter``, speaking raw SQL on the historical tables), so
stored and new sessions hold the same figures. Reversible: going back drops the table.
"""

import django.db.models.deletion
from django.db import migrations, models

# The figure columns this state has: the writer of today's code writes only these here
# (a column a later migration adds does not exist yet).
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
)


def fill_figures(apps, schema_editor):
    """Figures of every stored entry, session by session, in file order."""
    from explorer.route_store import fill_session

    Session = apps.get_model("explorer", "Session")
    Entry = apps.get_model("explorer", "Entry")
    RouteFigure = apps.get_model("explorer", "RouteFigure")
    for session_pk in Session.objects.order_by("pk").values_list("pk", flat=True):
        fill_session(
            session_pk,
            entry_table=Entry._meta.db_table,
            figure_table=RouteFigure._meta.db_table,
            fields=COLUMNS,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("explorer", "0020_session_agent"),
    ]

    operations = [
        migrations.CreateModel(
            name="RouteFigure",
            fields=[
                (
                    "entry",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=django.db.models.deletion.DO_NOTHING,
                        primary_key=True,
                        related_name="figures",
                        serialize=False,
                        to="explorer.entry",
                    ),
                ),
                ("depth", models.IntegerField(help_text="Entries above this one on its route")),
                ("turns", models.IntegerField(help_text="User messages on the route")),
                (
                    "responses",
                    models.IntegerField(help_text="Entries recording a spend on the route"),
                ),
                ("input", models.BigIntegerField()),
                ("output", models.BigIntegerField()),
                ("cache_read", models.BigIntegerField()),
                ("cache_write", models.BigIntegerField()),
                ("unpriced", models.IntegerField(help_text="Responses without a recorded cost")),
                (
                    "tokens",
                    models.FloatField(help_text="Provider-reported tokens of every request"),
                ),
                ("cost", models.FloatField(help_text="Provider-recorded cost of every request")),
                ("tool_calls", models.IntegerField()),
                ("compaction_id", models.CharField(blank=True, max_length=200, null=True)),
                ("edit_id", models.CharField(blank=True, max_length=200, null=True)),
                ("prev_edit_id", models.CharField(blank=True, max_length=200, null=True)),
                ("role", models.CharField(blank=True, default="", max_length=64)),
                (
                    "text_size",
                    models.IntegerField(help_text="Characters of the entry's readable text"),
                ),
                (
                    "context_tokens",
                    models.FloatField(
                        help_text="Projected-context estimate (pisession context); null for NaN",
                        null=True,
                    ),
                ),
                (
                    "usage_tokens",
                    models.FloatField(help_text="Trusted provider usage, if any", null=True),
                ),
                (
                    "trailing",
                    models.FloatField(
                        help_text="Estimates after that usage; null for NaN", null=True
                    ),
                ),
                (
                    "pending_targets",
                    models.TextField(
                        blank=True,
                        default="",
                        help_text="JSON list of edit targets not yet in the session",
                    ),
                ),
                (
                    "big_usage",
                    models.TextField(
                        blank=True,
                        default="",
                        help_text="JSON of the exact usage sums past a BIGINT, else empty",
                    ),
                ),
                (
                    "every_estimate",
                    models.FloatField(
                        help_text="Every message of the projected context estimated; null for NaN",
                        null=True,
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
        migrations.RunPython(fill_figures, migrations.RunPython.noop, elidable=True),
    ]
