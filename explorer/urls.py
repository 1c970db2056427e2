from __future__ import annotations

import importlib
import logging

from django.urls import path

from explorer.views import sessions

logger = logging.getLogger(__name__)

app_name = "explorer"

urlpatterns = [
    path("", sessions.session_list, name="session_list"),
    path("import/", sessions.import_view, name="import"),
    path("sessions/<int:pk>/export.jsonl", sessions.export_view, name="export"),
    path("sessions/<int:pk>/branch.jsonl", sessions.branch_download, name="branch_download"),
    path("sessions/<int:pk>/fork/", sessions.fork_view, name="fork"),
    path("sessions/<int:pk>/delete/", sessions.delete_view, name="delete"),
    path("sessions/<int:pk>/problems/", sessions.problems_view, name="problems"),
]


def _explorer_urls() -> list:
    """The visual explorer's pages (session detail and friends) when they are installed;
    until then ``session_detail`` falls back to a plain summary page."""
    try:
        module = importlib.import_module("explorer.urls_explorer")
    except ImportError as exc:
        if getattr(exc, "name", None) != "explorer.urls_explorer":
            logger.exception("explorer.urls_explorer failed to import; using the summary page")
        return [path("sessions/<int:pk>/", sessions.session_summary, name="session_detail")]
    patterns = list(module.urlpatterns)
    if not any(getattr(p, "name", None) == "session_detail" for p in patterns):
        patterns.append(path("sessions/<int:pk>/", sessions.session_summary, name="session_detail"))
    return patterns


urlpatterns += _explorer_urls()

# The live page (transcript, text tree, turns); owned by the live feature.
from explorer import urls_live  # noqa: E402

urlpatterns += urls_live.urlpatterns
