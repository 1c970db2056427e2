"""The one writer of the stored whole-session figures (:mod:`explorer.stored_figures`): the
tabs' own builders run inside ``stored_figures.writing()``, on the write paths only (the
import, the appends), so a reader never writes a row (issue 27).
"""

from __future__ import annotations

import logging

from django.db import DatabaseError

from explorer import stored_figures
from explorer.models import Session
from explorer.queries import leaves
from explorer.queries.integrity import integrity_report, unmatched_tool_results
from explorer.queries.keep import _last_position, one_step_at_a_time
from explorer.queries.labels import current_labels
from explorer.queries.skeleton import _skeleton

# The kinds of figure stored, as ``stored_figures.positions`` names them. The whole tree
# checks' findings ("integrity-findings") are left out: the report extends without them on
# an ordinary append, so they are stored only when an append needed them.
KINDS = ("skeleton", "integrity-report", "integrity-tools-2", "leaves", "labels")

logger = logging.getLogger(__name__)


def refresh(session: Session) -> bool:
    """Bring a big session's stored figures up to date when any is missing or
    :data:`~explorer.stored_figures.STORE_LAG` positions behind the session; True when it
    built them. Called by the import after its commit and by every append after its own,
    still under the session's writer lock (``services``): storing is idempotent (a copy
    never replaces a newer one), so two writers at once only repeat work. A session under
    :data:`~explorer.stored_figures.STORE_FROM` entries costs nothing, one whose copies
    are recent enough one query (and its newest position, when not known yet)."""
    if not stored_figures.wanted(session):
        return False
    last = _last_position(session)
    stored = stored_figures.positions(session)
    if all(last - stored.get(kind, -1) < stored_figures.STORE_LAG for kind in KINDS):
        return False
    try:
        with stored_figures.writing():
            _store_figures(session)
    except DatabaseError:  # the write it follows is committed: the next one tries again
        logger.warning("stored figures of session %s not refreshed", session.pk, exc_info=True)
        return False
    return True


def _store_figures(session: Session) -> None:
    # Each step's whole-session figures are stored, then this process lets go of its own
    # copies before the next step builds its own: an import's peak memory is the largest
    # step's, not their sum (issue 28: about 2 KB per entry, all of it kept after the import,
    # where a reader in another process loads the stored copies anyway).
    with one_step_at_a_time():
        _skeleton(session)
    with one_step_at_a_time():
        integrity_report(session)
    with one_step_at_a_time():
        unmatched_tool_results(session)
        leaves._newest_leaves(session, leaves.LEAVES_KEPT)
        current_labels(session)
