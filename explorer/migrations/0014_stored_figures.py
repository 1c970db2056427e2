"""Whole-session figures stored with their session (``explorer.stored_figures``).

A cold reader of a big session (after an import, a restart or a cleared cache) loads the
tree shape, the skeleton and the tree checks from one row each instead of building them
from every entry. Reversible: the table only holds what can be built again."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("explorer", "0013_entry_cost_skeleton_index"),
    ]

    operations = [
        migrations.CreateModel(
            name="StoredFigure",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=200)),
                ("upto", models.IntegerField(help_text="File position the figure covers up to")),
                ("data", models.BinaryField(help_text="The figure, pickled")),
                ("written", models.DateTimeField(auto_now=True)),
                (
                    "session",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="stored_figures",
                        to="explorer.session",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("session", "name"), name="one_stored_figure_per_name"
                    )
                ],
            },
        ),
    ]
