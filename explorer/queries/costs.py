"""Per-entry costs of a session and the cost of branches left behind."""

from __future__ import annotations

import math
from collections.abc import Sequence

from explorer.models import Entry, Session
from explorer.queries.routes import light_path
from explorer.session import exactsum

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

    Exactly rounded, so the figure does not depend on the order rows come back in (every
    worker and database gives the same figure to the last bit): the session's exact total
    (``Session.cost_partials``, kept by the entry writers) less the route's costs, rounded
    once, which is exactly ``fsum`` of the costs off the route; only the route's rows are
    read. A session without a stored total adds up every costed entry instead."""
    if route is None:
        route = [e.entry_id for e in light_path(session, cursor)]
    total = exactsum.loads(session.cost_partials)
    if total is None:
        keep = set(route)
        return math.fsum([c for i, c in entry_costs(session).items() if i not in keep])
    on_route: list[float] = []
    ids = list(dict.fromkeys(route))
    for k in range(0, len(ids), 500):
        on_route.extend(
            Entry.objects.filter(session=session, entry_id__in=ids[k : k + 500])
            .exclude(cost=0)
            .order_by()
            .values_list("cost", flat=True)
        )
    return exactsum.rounded(total, on_route)
