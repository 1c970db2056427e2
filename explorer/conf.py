"""The app's settings as the engine's objects.

The project's settings module parses every environment variable once; this module turns the
parsed values into what the engine takes (compaction settings, a summarizer, a model
provider), so no other module reads the environment or knows where settings come from.
"""

from __future__ import annotations

import hashlib
import hmac

from django.conf import settings

from explorer.session.providers import OpenAIChatProvider, provider_from_env
from explorer.session.summarizers import Summarizer, summarizer_from_env
from explorer.session.tokens import CompactionSettings


def context_window() -> int:
    """The model's context window for the token meter and auto-compaction."""
    return int(settings.SESSIONS_CONTEXT_WINDOW)


def compaction_settings() -> CompactionSettings:
    """When to compact and how much recent context to keep."""
    value = settings.SESSIONS_COMPACTION
    if isinstance(value, CompactionSettings):
        return value
    return CompactionSettings(**value)


def window_and_reserve() -> tuple[int, int]:
    """(context window, reserve) every context figure is judged against unless a reader asks
    for others: the Live meter, Raw vs projected's defaults, Compare and auto-compaction."""
    return context_window(), compaction_settings().reserve_tokens


def _model_env() -> dict[str, str]:
    return {k: v for k, v in settings.SESSIONS_LLM.items() if v}


def summarizer() -> Summarizer:
    """The configured model's summarizer, or the embedded offline one."""
    return summarizer_from_env(_model_env())


def provider() -> OpenAIChatProvider | None:
    """The configured model for turns; None when no endpoint is set."""
    return provider_from_env(_model_env())


def provider_configured() -> bool:
    return provider() is not None


def asgi_target() -> str:
    """The ASGI application as daphne's command line names it (``module:attribute``)."""
    module, _, attribute = settings.ASGI_APPLICATION.rpartition(".")
    return f"{module}:{attribute}"


def secrets_key() -> bytes:
    """The key of secret fingerprints, derived from ``SECRET_KEY``: stable across rescans,
    so statuses follow a secret, but useless to someone who reads only the database."""
    return hmac.new(
        settings.SECRET_KEY.encode(), b"session-explorer/secret-fingerprints", hashlib.sha256
    ).digest()


def editors_may_reveal() -> bool:
    """Whether editors, not only admins, may show one found secret in clear."""
    return bool(getattr(settings, "SESSIONS_EDITORS_MAY_REVEAL", False))
