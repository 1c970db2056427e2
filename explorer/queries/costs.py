"""Per-entry costs of a session and the cost of branches left behind."""

from __future__ import annotations

from collections.abc import Sequence

from explorer.models import Entry, Session
from explorer.queries.keep import grown
from explorer.queries.routes import light_path

# ---------------------------------------------------------------------------------------------
# Costs


def entry_costs(session: Session) -> dict[str, float]:
    """Entry id → provider-reported cost, for every entry that has one.

    The one source of per-entry cost for the whole-session figures (abandoned and wasted
    cost). The cost is stored with each entry when it is written (``files.entry_fields``
    decides which entries have one) and read from the covering index, so no line is parsed
    here; an append reads only the new rows (:func:`grown`)."""

    def read(after: int, upto: int) -> dict[str, float]:
        return dict(
            Entry.objects.filter(session=session, position__gt=after, position__lte=upto)
            .exclude(cost=0)
            .order_by("position")
            .values_list("entry_id", "cost")
        )

    return grown(
        session,
        "costs",
        lambda last: read(-1, last),
        lambda costs, after, last: {**costs, **read(after, last)},
        stored=True,
    )


def abandoned_cost(
    session: Session, cursor: str | None, route: Sequence[str] | None = None
) -> float:
    """Cost of every entry on no route to ``cursor``: all abandoned branches together.
    ``route``: the cursor's route (root first), when the caller has it already."""
    from explorer.analysis.compare import off_route_cost

    costs = entry_costs(session)
    if route is None:
        route = [e.entry_id for e in light_path(session, cursor)]
    return off_route_cost(costs, route, costs)
