"""Session.agent: whose file a stored session is (pi, claude-code, codex), as a column.

Until now it was read from the stored id's prefix ("claude-code:…", "codex:…"); the backfill
applies that same rule to the sessions already stored, with the historical model (today's
code is never called at this state). Reversible: going back drops the column, and the prefix
rule of the previous code reads the same answer from the ids.

Also CodexFork: a Codex fork file's original bytes, kept when the fork joins its parent's
stored tree (one migration per round).
"""

import django.db.models.deletion
from django.db import migrations, models

PREFIXES = (("claude-code:", "claude-code"), ("codex:", "codex"))


def backfill(apps, schema_editor):
    Session = apps.get_model("explorer", "Session")
    for prefix, agent in PREFIXES:
        Session.objects.filter(session_id__startswith=prefix).update(agent=agent)


class Migration(migrations.Migration):
    dependencies = [("explorer", "0019_archived_branches")]

    operations = [
        migrations.AddField(
            model_name="session",
            name="agent",
            field=models.CharField(
                choices=[("pi", "Pi"), ("claude-code", "Claude Code"), ("codex", "Codex")],
                default="pi",
                help_text="Whose session file: pi, claude-code or codex",
                max_length=16,
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=False),
        migrations.AddIndex(
            model_name="session",
            index=models.Index(fields=["agent"], name="session_agent"),
        ),
        migrations.CreateModel(
            name="CodexFork",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "thread_id",
                    models.CharField(help_text="The fork's thread id", max_length=200, unique=True),
                ),
                (
                    "parent_thread_id",
                    models.CharField(
                        db_index=True, help_text="forked_from_id: the parent thread", max_length=200
                    ),
                ),
                ("source_path", models.TextField(blank=True, default="")),
                (
                    "original",
                    models.BinaryField(help_text="The fork file's bytes, exported unchanged"),
                ),
                ("modified", models.DateTimeField(auto_now=True)),
                (
                    "session",
                    models.ForeignKey(
                        blank=True,
                        help_text="The parent's stored session the fork joined (empty: not joined yet)",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="codex_forks",
                        to="explorer.session",
                    ),
                ),
            ],
            options={"ordering": ["pk"]},
        ),
    ]
