from __future__ import annotations

from django.apps import AppConfig


class ExplorerConfig(AppConfig):
    name = "explorer"
    verbose_name = "Session Explorer"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import m2m_changed

        from explorer.permissions import sync_admin_staff

        m2m_changed.connect(
            sync_admin_staff,
            sender=get_user_model().groups.through,
            dispatch_uid="explorer.sync_admin_staff",
        )
