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
        from explorer.services.imports import session_imported
        from explorer.views.tree import store_opening_graph

        m2m_changed.connect(
            sync_admin_staff,
            sender=get_user_model().groups.through,
            dispatch_uid="explorer.sync_admin_staff",
        )
        session_imported.connect(store_opening_graph, dispatch_uid="explorer.opening_graph")
