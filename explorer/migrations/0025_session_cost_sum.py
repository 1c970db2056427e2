"""Each session keeps the exact sum of its entries' stored costs (``Session.cost_partials``),
so the cost left on other branches is a subtraction instead of a read of every entry.

Filled here for stored sessions from their entry rows (historical models; the sum code is
the engine's ``exactsum``, which has no state of its own). Reversible: going back drops the
column."""

from django.db import migrations, models

from explorer.session import exactsum


def fill(apps, schema_editor):
    Session = apps.get_model("explorer", "Session")
    Entry = apps.get_model("explorer", "Entry")
    for pk in Session.objects.order_by("pk").values_list("pk", flat=True):
        costs = (
            Entry.objects.filter(session_id=pk)
            .exclude(cost=0)
            .values_list("cost", flat=True)
            .iterator(chunk_size=5000)
        )
        partials = exactsum.added([], costs)
        Session.objects.filter(pk=pk).update(cost_partials=exactsum.dumps(partials))


class Migration(migrations.Migration):
    dependencies = [("explorer", "0024_entry_body_last")]

    operations = [
        migrations.AddField(
            model_name="session",
            name="cost_partials",
            field=models.TextField(
                blank=True, default="", help_text="Exact sum of the entries' costs (JSON partials)"
            ),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop, elidable=False),
    ]
