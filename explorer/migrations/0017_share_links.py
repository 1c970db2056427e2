"""Share links (read-only links for readers without an account) and their view log.

Reversible: both tables are site data that nothing else points at."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("explorer", "0016_read_marks"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="ShareLink",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "token_hash",
                    models.CharField(help_text="sha256 of the token", max_length=64, unique=True),
                ),
                (
                    "leaf_id",
                    models.CharField(
                        blank=True,
                        default="",
                        help_text="Route scope: the route's leaf",
                        max_length=200,
                    ),
                ),
                (
                    "with_reviews",
                    models.BooleanField(default=False, help_text="Readers see the review threads"),
                ),
                ("created", models.DateTimeField(auto_now_add=True)),
                ("expires", models.DateTimeField()),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                ("views", models.IntegerField(default=0, help_text="Pages read through the link")),
                ("last_viewed", models.DateTimeField(blank=True, null=True)),
                (
                    "created_by",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "revoked_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "session",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="share_links",
                        to="explorer.session",
                    ),
                ),
            ],
            options={
                "ordering": ["-created", "-pk"],
            },
        ),
        migrations.CreateModel(
            name="ShareView",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("at", models.DateTimeField(auto_now_add=True)),
                ("address", models.CharField(blank=True, default="", max_length=64)),
                ("path", models.CharField(blank=True, default="", max_length=300)),
                ("user_agent", models.CharField(blank=True, default="", max_length=200)),
                (
                    "link",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="view_log",
                        to="explorer.sharelink",
                    ),
                ),
            ],
            options={
                "ordering": ["-at", "-pk"],
            },
        ),
    ]
