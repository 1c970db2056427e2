"""The Live tab: the projected context at the tip and whether a turn is running."""

from __future__ import annotations

from typing import Any

from explorer import codex_context, route_store
from explorer.models import Session
from explorer.queries.entries import context_path
from explorer.queries.routes import light_path


def projection_summary(
    session: Session, leaf_id: str | None, *, window: int, reserve: int
) -> dict[str, Any]:
    """The live meter's figures at ``leaf_id``: the message count and the engine's estimate
    stored with the leaf's route figures (``pisession context --leaf``), one row read
    whatever the route's length, so nothing needs keeping between requests.

    A route whose newest compaction carries the context its agent recorded (a Codex
    session, ``analysis.recorded``) is what the stored figures do not follow: its meter is
    the one Raw vs projected's projection gives, from the route's live range parsed."""
    from explorer.analysis.projection import context_figures, meter_figures
    from explorer.session.describe import finite

    figures = route_store.figures_at(session, leaf_id)
    if figures is not None and _recorded_compaction(session, figures.compaction_id):
        path, _start = context_path(session, light_path(session, leaf_id))
        parsed = context_figures(path, window=window, reserve=reserve)
        parsed["leaf_id"] = leaf_id
        return parsed
    messages = figures.messages if figures is not None else 0
    tokens = int(finite(figures.context_tokens)) if figures is not None else 0
    return meter_figures(leaf_id, messages, tokens, window=window, reserve=reserve)


def _recorded_compaction(session: Session, compaction_id: str | None) -> bool:
    """Whether ``compaction_id`` (a route's newest compaction) carries a recorded context
    (``codex_context.recorded_histories``: only Codex sessions with compactions look)."""
    if compaction_id is None or session.agent != "codex" or not session.compaction_count:
        return False
    return compaction_id in codex_context.recorded_histories(session)


def turn_running(session_pk: int, *, stale_after: float) -> bool:
    """A turn holds the session's lock and refreshed it within ``stale_after`` seconds."""
    from django.utils import timezone

    from explorer.models import TurnLock

    fresh = timezone.now() - timezone.timedelta(seconds=stale_after)
    return TurnLock.objects.filter(session_id=session_pk, updated__gte=fresh).exists()
