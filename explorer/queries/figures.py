"""The figures stored with a session when it is imported or grows, so the first visit of
each tab finds them ready: one orchestration over the tabs' own builders.
"""

from __future__ import annotations

from explorer import stored_figures
from explorer.models import Session
from explorer.queries import leaves
from explorer.queries.compare import _line_sizes, route_figure_set
from explorer.queries.costs import entry_costs
from explorer.queries.entries import context_light
from explorer.queries.integrity import integrity_sections, unmatched_tool_results
from explorer.queries.keep import one_step_at_a_time
from explorer.queries.labels import current_labels
from explorer.queries.routes import default_leaf_id, light_path
from explorer.queries.skeleton import _tree_shape
from explorer.queries.timeline import _timeline_figures, _timeline_storable, timeline_window


def store_figures(session: Session) -> None:
    """Build and store the whole-session figures a cold reader of a big session needs
    (:mod:`explorer.stored_figures`), so the first request after an import loads them
    instead of building them from every row. Called by the import after its commit; a
    session under :data:`~explorer.stored_figures.STORE_FROM` entries is left alone."""
    if not stored_figures.wanted(session):
        return
    with stored_figures.patiently():
        _store_figures(session)


def _store_figures(session: Session) -> None:
    # Each step's whole-session figures are stored, then this process lets go of its own
    # copies before the next step builds its own: an import's peak memory is the largest
    # step's, not their sum (issue 28: about 2 KB per entry, all of it kept after the import,
    # where a reader in another process loads the stored copies anyway).
    with one_step_at_a_time():
        _tree_shape(session)  # the skeleton with it
    with one_step_at_a_time():
        integrity_sections(session)
    with one_step_at_a_time():
        unmatched_tool_results(session)
        entry_costs(session)
        leaves._newest_leaves(session, leaves.LEAVES_KEPT)
        current_labels(session)
    # The Timeline tab opens on the default route too: its kept turns are stored, when
    # the route's window is small enough to hold parsed (see STORED_TIMELINE_CHARS).
    leaf = default_leaf_id(session)
    light = light_path(session, leaf)
    if _timeline_storable(session, light[timeline_window(len(light)) :]):
        _timeline_figures(session, leaf)
    # The Compare tab opens with the default leaf as A: its route's part of every pair,
    # when its live range is small enough to hold parsed in the import (the rest of what
    # it reads is read a part at a time).
    live = context_light(session, light)[0] if leaf else []
    if leaf and sum(_line_sizes(live).values()) <= STORED_ROUTE_LIVE_BYTES:
        route_figure_set(session, leaf)


# The largest live range (bytes of its lines) whose route figures the import stores: they
# are worked out from the range parsed whole, about ten times its lines in memory, like the
# timeline's window (STORED_TIMELINE_CHARS).
STORED_ROUTE_LIVE_BYTES = 4_000_000
