"""Per-entry costs of a session and the cost of branches left behind."""

from __future__ import annotations

import math
from collections.abc import Sequence

from explorer.models import Entry, Session
from explorer.queries.routes import light_path

# ---------------------------------------------------------------------------------------------
# Costs


def entry_costs(session: Session) -> dict[str, float]:
    """Entry id → provider-reported cost, for every entry that has one.

    The cost is stored with each entry when it is written (``files.entry_fields`` decides
    which entries have one) and read from the covering skeleton index, so no line is parsed
    and nothing needs keeping: one read of a float column."""
    return dict(
        Entry.objects.filter(session=session)
        .exclude(cost=0)
        .order_by("position")
        .values_list("entry_id", "cost")
    )


def abandoned_cost(
    session: Session, cursor: str | None, route: Sequence[str] | None = None
) -> float:
    """Cost of every entry on no route to ``cursor``: all abandoned branches together.
    ``route``: the cursor's route (root first), when the caller has it already.

    Added up exactly rounded (``fsum``) over the stored costs of the costed entries, so the
    figure does not depend on the order rows come back in (every worker and database gives
    the same figure to the last bit)."""
    if route is None:
        route = [e.entry_id for e in light_path(session, cursor)]
    keep = set(route)
    return math.fsum([c for i, c in entry_costs(session).items() if i not in keep])
