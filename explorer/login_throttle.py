"""Logins: a growing delay per client address, a lock per (account, address) pair.

Why not a lock per account: five wrong passwords from anywhere would lock any account, an
admin's included, and behind a reverse proxy (one address for everyone) five failures from
anyone would lock everyone out; a lock anyone can trigger is a denial of service.

So: django-axes locks a pair (this account from this address) after
``SESSIONS_LOGIN_FAILURE_LIMIT`` failures, for ``SESSIONS_LOGIN_LOCKOUT_MINUTES``; the
account still logs in from elsewhere. And an address that keeps failing, whichever accounts
it tries, must wait before its next try: after ``SESSIONS_LOGIN_FREE_FAILURES`` failures
(counted over the lockout window) 2 s, then 4 s, 8 s, … up to
``SESSIONS_LOGIN_DELAY_MAX_SECONDS``. A try too early is answered 429 with ``Retry-After``
and not checked at all, so guessing from one address is slowed to one try per delay, while
a person behind the same proxy waits at most that long.
"""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.db.models import Max, Sum
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone


def client_address(request: HttpRequest) -> str | None:
    """The address axes counts the failures under (the peer's; see settings)."""
    from axes.helpers import get_client_ip_address

    return get_client_ip_address(request)


def delay_for(failures: int) -> float:
    """Seconds an address with ``failures`` recent failures waits after its last one."""
    free = settings.SESSIONS_LOGIN_FREE_FAILURES
    if failures < free:
        return 0.0
    return float(min(2 ** (failures - free + 1), settings.SESSIONS_LOGIN_DELAY_MAX_SECONDS))


def wait_seconds(address: str | None) -> int:
    """How long this address must still wait before its next login try (0: it may try)."""
    if not address:
        return 0
    from axes.models import AccessAttempt

    now = timezone.now()
    recent = AccessAttempt.objects.filter(
        ip_address=address, attempt_time__gte=now - settings.AXES_COOLOFF_TIME
    ).aggregate(failures=Sum("failures_since_start"), last=Max("attempt_time"))
    failures, last = recent["failures"] or 0, recent["last"]
    if last is None:
        return 0
    left = (last + timedelta(seconds=delay_for(failures)) - now).total_seconds()
    return max(0, math.ceil(left))


class LoginView(auth_views.LoginView):
    """Django's login, with the address's delay checked before the password is."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        wait = wait_seconds(client_address(request))
        if wait:
            ctx = {"wait": wait}
            response = render(request, "registration/login_delayed.html", ctx, status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)
