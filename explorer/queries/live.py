"""The Live tab: the projected context at the tip and whether a turn is running."""

from __future__ import annotations

from typing import Any

from explorer.models import Session
from explorer.queries.entries import context_path
from explorer.queries.keep import cached
from explorer.queries.routes import light_path


def projection_summary(
    session: Session, leaf_id: str | None, *, window: int, reserve: int
) -> dict[str, Any]:
    """The live meter's figures at ``leaf_id`` (computed once per session version for all
    viewers on every worker sharing the cache)."""
    from explorer.analysis.projection import context_figures

    def build() -> dict[str, Any]:
        # The projection page's path (the live range and the settings before it), masked
        # alike, so the two show the same figures; and only the entries that can still
        # reach the model are read, not the whole route.
        path, _start = context_path(session, light_path(session, leaf_id))
        figures = context_figures(path, window=window, reserve=reserve)
        figures["leaf_id"] = leaf_id
        return figures

    return cached(session, f"tip:{leaf_id or ''}:{window}:{reserve}", build)


def turn_running(session_pk: int, *, stale_after: float) -> bool:
    """A turn holds the session's lock and refreshed it within ``stale_after`` seconds."""
    from django.utils import timezone

    from explorer.models import TurnLock

    fresh = timezone.now() - timezone.timedelta(seconds=stale_after)
    return TurnLock.objects.filter(session_id=session_pk, updated__gte=fresh).exists()
