"""ASGI entry point served by daphne: HTTP through Django, websockets under ``ws/``."""

from __future__ import annotations

import importlib
import logging
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sessions_site.settings")

# Must run before anything imports models (consumers do).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

logger = logging.getLogger(__name__)


def _websocket_urlpatterns() -> list:
    """The live module may be absent in a partial checkout; HTTP must still work then."""
    try:
        routing = importlib.import_module("explorer.routing")
    except ModuleNotFoundError as exc:
        if exc.name != "explorer.routing":
            raise
        logger.warning("explorer.routing not found; websockets disabled")
        return []
    return list(getattr(routing, "websocket_urlpatterns", []))


application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(_websocket_urlpatterns()))
        ),
    }
)
