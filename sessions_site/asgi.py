"""ASGI entry point served by daphne: HTTP through Django, websockets under ``ws/``."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "sessions_site.settings")

# Must run before anything imports models (consumers do).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from explorer.middleware import (  # noqa: E402
    RequestSizeGuard,
    RequestTimeout,
    WebsocketOriginGuard,
    install_daphne_guard,
)
from explorer.routing import websocket_urlpatterns  # noqa: E402

# Under daphne the limits also apply while the body arrives, before daphne buffers it.
install_daphne_guard()

application = ProtocolTypeRouter(
    {
        # Oversized bodies are refused before Django reads a byte of them; a page that does
        # not start answering in time gets a 503 instead of a hanging client.
        "http": RequestTimeout(RequestSizeGuard(django_asgi_app)),
        # Same scheme, host and port as the page (or a trusted origin) only.
        "websocket": WebsocketOriginGuard(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
