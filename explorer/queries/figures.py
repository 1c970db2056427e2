"""The figures stored with a session when it is imported or grows, so the first visit of
each tab finds them ready: one orchestration over the tabs' own builders.
"""

from __future__ import annotations

from explorer import stored_figures
from explorer.models import Session
from explorer.queries import leaves
from explorer.queries.integrity import integrity_sections, unmatched_tool_results
from explorer.queries.keep import one_step_at_a_time
from explorer.queries.labels import current_labels
from explorer.queries.skeleton import _skeleton


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
        _skeleton(session)
    with one_step_at_a_time():
        integrity_sections(session)
    with one_step_at_a_time():
        unmatched_tool_results(session)
        leaves._newest_leaves(session, leaves.LEAVES_KEPT)
        current_labels(session)
