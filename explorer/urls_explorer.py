"""URLs of the visual explorer (included by explorer/urls.py in the "explorer" namespace).

Entry ids are arbitrary strings in Pi files, so they travel in the query string (``?id=``),
never in the path.
"""

from __future__ import annotations

from django.urls import path

from explorer.views import (
    actions,
    compaction_view,
    compare,
    entry,
    integrity,
    projection,
    search,
    stats,
    timeline,
    tree,
)

urlpatterns = [
    path("sessions/<int:pk>/", tree.session_detail, name="session_detail"),
    path("sessions/<int:pk>/graph.svg", tree.graph_svg, name="graph_svg"),
    path("sessions/<int:pk>/tree/chain/", tree.chain_rows, name="tree_chain"),
    path("sessions/<int:pk>/entry/", entry.entry_view, name="entry"),
    path("sessions/<int:pk>/context/", projection.context_view, name="context"),
    path("sessions/<int:pk>/compactions/", compaction_view.compactions_view, name="compactions"),
    path("sessions/<int:pk>/compare/", compare.compare_view, name="compare"),
    path("sessions/<int:pk>/timeline/", timeline.timeline_view, name="timeline"),
    path("sessions/<int:pk>/search/", search.session_search, name="session_search"),
    path("search/", search.global_search, name="search"),
    path("sessions/<int:pk>/stats/", stats.session_stats, name="session_stats"),
    path("sessions/<int:pk>/integrity/", integrity.integrity_view, name="integrity"),
    path("sessions/<int:pk>/edit/", actions.edit_view, name="edit"),
    path("sessions/<int:pk>/undo/", actions.undo_view, name="undo"),
    path("sessions/<int:pk>/label/", actions.label_view, name="label"),
    path("sessions/<int:pk>/rename/", actions.rename_view, name="rename"),
    path("sessions/<int:pk>/navigate/", actions.navigate_view, name="navigate"),
    path("sessions/<int:pk>/compact/", actions.compact_view, name="compact"),
]
