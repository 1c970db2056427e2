"""Websocket routes, mounted under ``ws/`` by the project's ASGI application."""

from __future__ import annotations

from django.urls import path

from explorer.consumers import SessionLiveConsumer

websocket_urlpatterns = [
    path("ws/sessions/<int:pk>/", SessionLiveConsumer.as_asgi(), name="ws_session"),
]
