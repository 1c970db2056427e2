"""Every URL of the app, in the ``explorer`` namespace, grouped by what the page is for.

Entry ids are arbitrary strings in Pi files, so they travel in the query string (``?id=``),
never in the path.
"""

from __future__ import annotations

from django.urls import path

from explorer.views import (
    actions,
    archive,
    compaction_view,
    compare,
    entry,
    export,
    integrity,
    live,
    projection,
    read_marks,
    review,
    search,
    secrets,
    sessions,
    share,
    stats,
    timeline,
    transcript,
    tree,
)

app_name = "explorer"

session_urls = [
    path("", sessions.session_list, name="session_list"),
    path("import/", sessions.import_view, name="import"),
    path("import/progress/<str:token>/", sessions.import_progress_view, name="import_progress"),
    path("search/", search.global_search, name="search"),
    path("sessions/<int:pk>/export.jsonl", sessions.export_view, name="export"),
    path("sessions/<int:pk>/branch.jsonl", sessions.branch_download, name="branch_download"),
    path("sessions/<int:pk>/fork/", sessions.fork_view, name="fork"),
    path("sessions/<int:pk>/delete/", sessions.delete_view, name="delete"),
    path("sessions/<int:pk>/problems/", sessions.problems_view, name="problems"),
    path("sessions/<int:pk>/seen/", read_marks.seen_view, name="seen"),
    path("sessions/<int:pk>/stats/", stats.session_stats, name="session_stats"),
]

tab_urls = [
    path("sessions/<int:pk>/", tree.session_detail, name="session_detail"),
    path("sessions/<int:pk>/graph.svg", tree.graph_svg, name="graph_svg"),
    path("sessions/<int:pk>/tree/chain/", tree.chain_rows, name="tree_chain"),
    path("sessions/<int:pk>/entry/", entry.entry_view, name="entry"),
    path("sessions/<int:pk>/transcript/", transcript.transcript_view, name="transcript"),
    path("sessions/<int:pk>/context/", projection.context_view, name="context"),
    path("sessions/<int:pk>/compactions/", compaction_view.compactions_view, name="compactions"),
    path("sessions/<int:pk>/compare/", compare.compare_view, name="compare"),
    path("sessions/<int:pk>/timeline/", timeline.timeline_view, name="timeline"),
    path("sessions/<int:pk>/search/", search.session_search, name="session_search"),
    path(
        "sessions/<int:pk>/search/count/", search.session_search_count, name="session_search_count"
    ),
    path("sessions/<int:pk>/integrity/", integrity.integrity_view, name="integrity"),
]

edit_urls = [
    path("sessions/<int:pk>/edit/", actions.edit_view, name="edit"),
    path("sessions/<int:pk>/undo/", actions.undo_view, name="undo"),
    path("sessions/<int:pk>/label/", actions.label_view, name="label"),
    path("sessions/<int:pk>/rename/", actions.rename_view, name="rename"),
    path("sessions/<int:pk>/navigate/", actions.navigate_view, name="navigate"),
    path("sessions/<int:pk>/cursor/", transcript.move_cursor_view, name="transcript_cursor"),
    path("sessions/<int:pk>/compact/", actions.compact_view, name="compact"),
    path("sessions/<int:pk>/archive/", archive.archive_view, name="archive"),
    path("sessions/<int:pk>/unarchive/", archive.unarchive_view, name="unarchive"),
]

live_urls = [
    path("sessions/<int:pk>/live/", live.live_page, name="live"),
    path("sessions/<int:pk>/live/turn/", live.turn_view, name="live_turn"),
    path("sessions/<int:pk>/live/cancel/", live.cancel_view, name="live_cancel"),
]

# Secrets found in sessions: the findings (masked), decisions, audited reveals
secret_urls = [
    path("secrets/", secrets.all_secrets, name="secrets"),
    path("audit/", secrets.audit_list, name="audit"),
    path("sessions/<int:pk>/secrets/", secrets.session_secrets, name="session_secrets"),
    path(
        "sessions/<int:pk>/secrets/<int:finding_pk>/status/",
        secrets.finding_status,
        name="finding_status",
    ),
    path(
        "sessions/<int:pk>/secrets/<int:finding_pk>/reveal/",
        secrets.finding_reveal,
        name="finding_reveal",
    ),
]

# Single-file HTML export of a route or of the whole tree (offline, secrets masked)
export_urls = [
    path("sessions/<int:pk>/export.html", export.export_html_view, name="export_html"),
    path("sessions/<int:pk>/route.atif", export.export_atif_view, name="export_atif"),
    path("sessions/<int:pk>/export-size/", export.export_size_view, name="export_size"),
]

# Review comments: threads on entries, replies, resolving, approved / flagged statuses
review_urls = [
    path("sessions/<int:pk>/review/", review.review_view, name="review"),
    path("sessions/<int:pk>/review/entry/", review.entry_threads, name="review_entry"),
    path("sessions/<int:pk>/review/comment/", review.comment_add, name="comment_add"),
    path(
        "sessions/<int:pk>/review/comment/<int:comment_pk>/",
        review.comment_edit,
        name="comment_edit",
    ),
    path(
        "sessions/<int:pk>/review/comment/<int:comment_pk>/resolve/",
        review.thread_resolve,
        name="thread_resolve",
    ),
    path("sessions/<int:pk>/review/status/", review.entry_status, name="entry_status"),
]

# Share links: the anonymous reader's pages (any tab's own view, scoped and read-only) and
# the editors' and admins' lists
share_urls = [
    path("share/<str:token>/", share.share_root, name="share"),
    path("share/<str:token>/<path:rest>", share.share_page, name="share_page"),
    path("sessions/<int:pk>/shares/", share.session_shares, name="session_shares"),
    path("sessions/<int:pk>/shares/<int:link_pk>/revoke/", share.share_revoke, name="share_revoke"),
    path("shares/", share.all_shares, name="shares"),
]

urlpatterns = (
    session_urls
    + tab_urls
    + edit_urls
    + live_urls
    + secret_urls
    + export_urls
    + review_urls
    + share_urls
)
