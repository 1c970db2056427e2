"""A covering index for the whole-session reads in file order.

The tree skeleton (id, parent, type, role) and the integrity stubs (plus line number and
target) of a big session were read from the table, where each row's raw line lies between
those columns, so SQLite read every raw line of the session on the first request after an
import; from this index the same reads never touch the table. Reversible (the index is
dropped); no data changes."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("explorer", "0012_search_index_batch_fill"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
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
                ],
                name="entry_skeleton",
            ),
        ),
    ]
