"""URLs of the live page (included by ``explorer.urls``)."""

from __future__ import annotations

from django.urls import path

from explorer.views import live

urlpatterns = [
    path("sessions/<int:pk>/live/", live.live_page, name="live"),
    path("sessions/<int:pk>/live/turn/", live.turn_view, name="live_turn"),
    path("sessions/<int:pk>/live/cancel/", live.cancel_view, name="live_cancel"),
]
