from __future__ import annotations

import importlib

from django.apps import AppConfig


class ExplorerConfig(AppConfig):
    name = "explorer"
    verbose_name = "Session Explorer"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Live broadcasting connects its signal receivers when present; the site works
        # without it (e.g. in a checkout that only has the core).
        try:
            importlib.import_module("explorer.live")
        except ModuleNotFoundError as exc:
            if exc.name != "explorer.live":
                raise
