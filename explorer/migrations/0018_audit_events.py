"""The audit list (``AuditEvent``: reveals, context edits, deletes) and the reason a reveal
was given (``SecretReveal.reason``). Reversible: removing them drops the audit rows."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("explorer", "0017_share_links"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="secretreveal",
            name="reason",
            field=models.TextField(blank=True, default="", help_text="Why the secret was revealed"),
        ),
        migrations.CreateModel(
            name="AuditEvent",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("at", models.DateTimeField(auto_now_add=True, db_index=True)),
                ("username", models.CharField(blank=True, default="", max_length=150)),
                (
                    "action",
                    models.CharField(
                        choices=[
                            ("reveal", "Secret revealed"),
                            ("context_edit", "Context edit"),
                            ("undo", "Context edit undone"),
                            ("delete_session", "Session deleted"),
                            ("delete_comment", "Comment deleted"),
                            ("archive", "Branch archived"),
                            ("unarchive", "Branch unarchived"),
                        ],
                        max_length=32,
                    ),
                ),
                (
                    "session_ref",
                    models.CharField(
                        blank=True, default="", help_text="The session's header id", max_length=200
                    ),
                ),
                (
                    "session_name",
                    models.TextField(blank=True, default="", help_text="Its name, masked"),
                ),
                (
                    "target",
                    models.CharField(
                        blank=True,
                        default="",
                        help_text="The entry or finding acted on",
                        max_length=200,
                    ),
                ),
                (
                    "what",
                    models.TextField(blank=True, default="", help_text="What was done, in words"),
                ),
                ("reason", models.TextField(blank=True, default="")),
                (
                    "user",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "ordering": ["-at", "-pk"],
            },
        ),
    ]
