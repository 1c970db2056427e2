"""Rows looked up by a list of keys, a few hundred keys to a statement.

Pages and writers often need the rows of a few thousand known keys (a route's positions,
the ids a page lists). One ``IN (...)`` over all of them would pass SQLite's limit on bound
parameters and build a statement as long as the list; one statement per key costs a round
trip each. So the keys go :data:`KEYS_PER_STATEMENT` at a time, by raw SQL (a Django filter
of 500 keys costs more to build than the database takes to answer it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db import connection

KEYS_PER_STATEMENT = 500


def rows_for_keys(
    sql: str, keys: Sequence[Any], *, before: Sequence[Any] = (), after: Sequence[Any] = ()
) -> list[tuple[Any, ...]]:
    """Every row ``sql`` gives for ``keys``: its one ``{keys}`` becomes a placeholder per key
    of each chunk, bound between the parameters ``before`` and ``after`` (those around the
    list in the statement). Rows come chunk by chunk, in the database's order within each."""
    out: list[tuple[Any, ...]] = []
    if not keys:
        return out
    with connection.cursor() as cursor:
        for k in range(0, len(keys), KEYS_PER_STATEMENT):
            part = list(keys[k : k + KEYS_PER_STATEMENT])
            cursor.execute(
                sql.replace("{keys}", ",".join(["%s"] * len(part))), [*before, *part, *after]
            )
            out.extend(cursor.fetchall())
    return out
