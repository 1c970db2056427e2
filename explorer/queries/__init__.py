"""Every read of stored sessions, one module per tab over a few shared base modules.

A page never loads a whole session. A route is one recursive query over the indexed parent
links (:func:`routes.light_path`, cycle-safe) carrying only index columns; raw lines are
fetched only for the entries a page shows (:mod:`.entries`). The whole-session reads (the
tree skeleton for the graph, the labels) skip the payload and are cached by
:func:`keep.cached` under a key that changes whenever the session gains an entry, so any
worker sharing the cache reuses them.

Base modules: :mod:`.keep` (every cache mechanism of the reads, in one place),
:mod:`.routes` (light routes, cursor, children), :mod:`.entries` (loading and masking rows),
:mod:`.labels`, :mod:`.skeleton` (the tree skeleton and shape), :mod:`.leaves` (the leaf
picker), :mod:`.costs`. Tab modules: :mod:`.tree`, :mod:`.transcript`, :mod:`.context` (raw
vs projected), :mod:`.compactions` (its route read by :mod:`.compaction_reads`), :mod:`.compare`, :mod:`.timeline`, :mod:`.search`,
:mod:`.integrity`, :mod:`.live`, :mod:`.review`, :mod:`.secrets`, :mod:`.listing` (the
session list); :mod:`.figures` stores their figures when a session is imported or grows
(``refresh_figures``, called by the write paths only).
Tab modules import base modules, never each other.

The names callers use are re-exported here, so ``queries.light_path(...)`` keeps working; a
test that patches a name must patch the module that defines and uses it
(``monkeypatch.setattr(search, "SEARCH_SCAN_ENTRIES", ...)``), not this package.

Nothing here writes: the user's cursor is looked up (:func:`routes.cursor_id`), never created.
"""

from __future__ import annotations

from explorer.queries.compaction_reads import compaction_route
from explorer.queries.compactions import (
    DETAIL_WINDOW,
    DETAIL_WINDOW_MAX,
    branch_summary_detail,
    compaction_detail,
    detail_windows,
    route_branch_summaries,
    route_compactions,
)
from explorer.queries.compare import (
    DIFF_SHOWN,
    ROUTE_SHOWN,
    _route_rows,
    compare_routes,
    stats_after_ancestor,
)
from explorer.queries.context import (
    _ALIGNMENTS,
    _context_summary,
    _session_alignments,
    context_summary,
    shown_rows,
)
from explorer.queries.costs import (
    entry_costs,
)
from explorer.queries.entries import (
    _load_by_pk,
    context_light,
    context_path,
    entries_bytes,
    entries_with_secrets,
    full_path,
    load_entries,
    path_bytes,
    path_pks,
    path_to,
    shown_entry,
    shown_raw,
    shown_row,
    with_first_message,
)
from explorer.queries.figures import (
    refresh as refresh_figures,
)
from explorer.queries.integrity import (
    integrity_sections,
    unmatched_tool_results,
)
from explorer.queries.keep import (
    _GROWN,
    TREE_CACHE_SECONDS,
    _identity_key,
    _once,
    _through_cache,
    allowed_fingerprints,
    archive_stamp,
    by_content,
    cached,
    content_key,
    forget_reads,
    grown,
    identity_key,
    keep_later,
    kept_below,
    kept_by,
    kept_read,
    mask_key,
    read_memo,
)
from explorer.queries.labels import (
    _read_labels,
    current_labels,
)
from explorer.queries.leaves import (
    leaf_choices,
)
from explorer.queries.listing import (
    SORTS,
    default_path_totals,
    import_progress,
    import_progress_key,
    list_path_totals,
    list_row_labels,
    search_sessions,
)
from explorer.queries.live import (
    projection_summary,
    turn_running,
)
from explorer.queries.review import (
    comment_counts,
    entry_reviews,
    get_comment,
    open_thread_count,
    review_counts,
    review_threads,
)
from explorer.queries.routes import (
    _ROUTES,
    BY_PARENT_COLS,
    LightEntry,
    _walk_up,
    children_of,
    children_roles,
    cursor_id,
    default_leaf_id,
    entry_exists,
    last_position,
    light_path,
    newer_than,
    newest_leaf_under,
    route_length,
    siblings_of,
)
from explorer.queries.search import (
    SEARCH_PAGE,
    SEARCH_SCAN_ENTRIES,
    _first_hit_ids,
    _hit_ids,
    _text_id_span,
    _text_matches,
    route_find,
    search_entries,
    search_is_counted,
    session_hit_ids,
)
from explorer.queries.secrets import (
    FINDINGS_SHOWN,
    finding_counts,
    findings_overview,
    get_finding,
    session_findings,
)
from explorer.queries.skeleton import (
    _skeleton,
    _skeleton_rows,
)
from explorer.queries.timeline import (
    TIMELINE_MAX_PATH,
    TIMELINE_STEP,
    timeline_figures,
    timeline_window,
)
from explorer.queries.transcript import (
    RouteMap,
    RouteWindow,
    edit_marks,
    extend_route_map,
    route_map,
    tail_window,
    window_marks,
    window_of_map,
)
from explorer.queries.tree import (
    TREE_BUDGET,
    chain_entries,
    folded_tree,
    path_after,
    path_before,
    path_flags,
    tree_nodes,
)

__all__ = [
    "BY_PARENT_COLS",
    "DIFF_SHOWN",
    "FINDINGS_SHOWN",
    "LightEntry",
    "ROUTE_SHOWN",
    "RouteMap",
    "RouteWindow",
    "SEARCH_PAGE",
    "SEARCH_SCAN_ENTRIES",
    "SORTS",
    "TIMELINE_MAX_PATH",
    "TIMELINE_STEP",
    "TREE_BUDGET",
    "TREE_CACHE_SECONDS",
    "_ALIGNMENTS",
    "_GROWN",
    "_ROUTES",
    "_context_summary",
    "_first_hit_ids",
    "_hit_ids",
    "_identity_key",
    "_load_by_pk",
    "_once",
    "_read_labels",
    "_route_rows",
    "_session_alignments",
    "_skeleton",
    "_skeleton_rows",
    "_text_id_span",
    "_text_matches",
    "_through_cache",
    "_walk_up",
    "allowed_fingerprints",
    "archive_stamp",
    "branch_summary_detail",
    "by_content",
    "cached",
    "chain_entries",
    "children_of",
    "children_roles",
    "comment_counts",
    "DETAIL_WINDOW",
    "DETAIL_WINDOW_MAX",
    "compaction_detail",
    "compaction_route",
    "detail_windows",
    "compare_routes",
    "stats_after_ancestor",
    "content_key",
    "context_light",
    "context_path",
    "context_summary",
    "shown_rows",
    "current_labels",
    "cursor_id",
    "default_leaf_id",
    "default_path_totals",
    "entries_bytes",
    "entries_with_secrets",
    "entry_costs",
    "entry_exists",
    "entry_reviews",
    "edit_marks",
    "extend_route_map",
    "finding_counts",
    "findings_overview",
    "folded_tree",
    "forget_reads",
    "full_path",
    "get_comment",
    "get_finding",
    "grown",
    "identity_key",
    "import_progress",
    "import_progress_key",
    "integrity_sections",
    "keep_later",
    "kept_below",
    "kept_by",
    "kept_read",
    "last_position",
    "leaf_choices",
    "light_path",
    "route_length",
    "list_path_totals",
    "list_row_labels",
    "load_entries",
    "mask_key",
    "newer_than",
    "newest_leaf_under",
    "open_thread_count",
    "path_after",
    "path_before",
    "path_bytes",
    "path_flags",
    "path_pks",
    "path_to",
    "projection_summary",
    "read_memo",
    "review_counts",
    "refresh_figures",
    "review_threads",
    "route_branch_summaries",
    "route_compactions",
    "route_find",
    "route_map",
    "tail_window",
    "window_marks",
    "window_of_map",
    "search_entries",
    "search_is_counted",
    "search_sessions",
    "session_findings",
    "session_hit_ids",
    "shown_entry",
    "shown_raw",
    "shown_row",
    "siblings_of",
    "timeline_figures",
    "timeline_window",
    "tree_nodes",
    "turn_running",
    "unmatched_tool_results",
    "with_first_message",
]
