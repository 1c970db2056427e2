"""A site set up for a benchmark in one temporary folder: SQLite, no debug pages, migrated,
static files collected, and a logged-in viewer's test client. Shared by the page benchmarks
so each measures the same site the same way."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def setup_site(tmp: Path, *, static: bool = True, user: bool = True) -> Any:
    """Configure Django under ``tmp`` and return a test client logged in as a viewer
    (``user=False``: no user made, no client, for a database prepared to be copied; a
    copied database may hold the viewer already)."""
    os.environ["SESSIONS_VAR_DIR"] = str(tmp)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sessions_site.settings")
    os.environ.setdefault("DEBUG", "0")
    os.environ.setdefault("SECRET_KEY", "bench-only-" + "k" * 60)
    os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost")
    os.environ.setdefault("SECURE_SSL_REDIRECT", "false")
    os.environ["STATIC_ROOT"] = str(tmp / "static")
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client

    from explorer.permissions import set_role

    call_command("migrate", verbosity=0)
    if static:
        call_command("collectstatic", "--noinput", verbosity=0)
    if not user:
        return None
    viewer = User.objects.filter(username="bench").first()
    if viewer is None:
        viewer = User.objects.create_user("bench", password="bench-pw-123456")
    set_role(viewer, "viewer")
    client = Client()
    client.force_login(viewer)
    return client
