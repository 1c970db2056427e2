"""Cold whole-session reads: each entry's cost stored with it, and a covering index.

The tree skeleton (id, parent, type, role), the integrity stubs (plus line number and
target) and the per-entry costs of a big session were read from the table, where each
row's raw line lies between those columns, so SQLite read every raw line of the session
on the first request after an import, and the costs parsed every assistant line. The cost
is now a column, filled here for stored entries by the rule new writes follow
(``files.entry_fields``), and one index in file order covers all three reads.

Reversible: going back drops the index and the column; no other data changes."""

from django.conf import settings
from django.db import migrations, models

BATCH = 2000


def fill_costs(apps, schema_editor):
    """The cost of every stored entry that has one, as ``files.entry_fields`` gives it to
    a new entry (the rule is imported, not copied, so the two cannot drift)."""
    from explorer.files.scan import entry_fields
    from explorer.session import jsonfmt

    Entry = apps.get_model("explorer", "Entry")
    costed = models.Q(type="message", role="assistant") | models.Q(
        type__in=("usage", "compaction", "branch_summary")
    )
    pks = list(Entry.objects.filter(costed).order_by("pk").values_list("pk", flat=True))
    for k in range(0, len(pks), BATCH):
        changed = []
        for row in Entry.objects.filter(pk__in=pks[k : k + BATCH]).only("pk", "raw"):
            try:
                value = jsonfmt.loads(row.raw)
            except ValueError:
                continue
            cost = entry_fields(value)["cost"] if isinstance(value, dict) else 0.0
            if cost:
                row.cost = cost
                changed.append(row)
        Entry.objects.bulk_update(changed, ["cost"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("explorer", "0012_search_index_batch_fill"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="entry",
            name="cost",
            field=models.FloatField(
                default=0.0,
                help_text="Provider-reported cost, stored when the line is (files.entry_fields)",
            ),
        ),
        migrations.RunPython(fill_costs, migrations.RunPython.noop, elidable=True),
        migrations.AddIndex(
            model_name="entry",
            index=models.Index(
                fields=[
                    "session",
                    "position",
                    "entry_id",
                    "parent_id",
                    "type",
                    "role",
                    "line_no",
                    "target_id",
                    "cost",
                ],
                name="entry_skeleton",
            ),
        ),
    ]
