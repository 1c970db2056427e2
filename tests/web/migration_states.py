"""Moving the test database between migration states, for the tests of a migration's fill.

A test stores rows at an old state through that state's historical models (never today's
models, which may have columns the old tables lack), migrates forward, checks, migrates back,
and always ends at the newest state, whatever failed, so the tests after it find the schema
they expect."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection
from django.db.migrations.executor import MigrationExecutor

Targets = list[tuple[str, str]]


def migrate(targets: Targets | None = None) -> Any:
    """Migrate to ``targets`` (forward or back; None: the newest state) and return that
    state's historical apps."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    if targets is None:
        targets = executor.loader.graph.leaf_nodes()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@contextmanager
def migration_states() -> Iterator[Callable[..., Any]]:
    """:func:`migrate` for the block; the newest state again when it ends."""
    try:
        yield migrate
    finally:
        migrate()
