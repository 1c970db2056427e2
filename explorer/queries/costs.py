"""Per-entry costs of a session and the cost of branches left behind."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from django.db import connection

from explorer.key_lookups import rows_for_keys
from explorer.models import Entry, Session
from explorer.queries.routes import LightEntry, light_path
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
    session: Session,
    cursor: str | None,
    route: Sequence[LightEntry] | None = None,
    known: Mapping[int, float] | None = None,
    *,
    route_costs: Sequence[float] | None = None,
) -> float:
    """Cost of every entry on no route to ``cursor``: all abandoned branches together.
    ``route``: the cursor's route rows (root first), when the caller has them already;
    ``known``: entries' costs by position the caller has read already (any entries).

    Exactly rounded, so the figure does not depend on the order rows come back in (every
    worker and database gives the same figure to the last bit): the session's exact total
    (``Session.cost_partials``, kept by the entry writers) less the route's costs, rounded
    once, which is exactly ``fsum`` of the costs off the route; only the route's costs not
    ``known`` are read. ``route_costs``: the route's costs themselves (those that are not
    zero), when the caller read them without its rows (Compare, from the cursor's chain of
    segments). A session without a stored total adds up every costed entry instead."""
    total = exactsum.loads(session.cost_partials)
    if route_costs is not None and total is not None:
        return exactsum.rounded(total, [c for c in route_costs if c])
    if route is None:
        route = light_path(session, cursor)
    if total is None:
        keep = {e.entry_id for e in route}
        return math.fsum([c for i, c in entry_costs(session).items() if i not in keep])
    known = known or {}
    on_route = [known[e.position] for e in route if e.position in known]
    on_route.extend(costs_at(session, [e.position for e in route if e.position not in known]))
    return exactsum.rounded(total, [c for c in on_route if c])


def costs_at(session: Session, positions: Iterable[int]) -> list[float]:
    """The stored costs of the entries at ``positions`` (those that have one).

    By position, not by id: SQLite answers positions from the covering skeleton index
    (session, position, ..., cost) without touching a row, while 500 ids in one IN list
    made it scan that index over the whole session for each chunk (0.5 s for a route of
    3,000 entries in a session of 150,000)."""
    table = connection.ops.quote_name(Entry._meta.db_table)
    rows = rows_for_keys(
        f"SELECT cost FROM {table} "  # noqa: S608
        "WHERE session_id = %s AND position IN ({keys}) AND cost <> 0",
        sorted(set(positions)),
        before=[session.pk],
    )
    return [c for (c,) in rows]
