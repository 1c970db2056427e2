"""Login throttling that cannot be turned against an account: a lock per (account,
address) pair, a growing delay per address, a clear message, a lock that ends."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse

pytestmark = pytest.mark.django_db

LIMIT = 5


@pytest.fixture
def zed(django_user_model):
    return django_user_model.objects.create_user("zed", password="pw-zed-123")


def attempt(username: str, password: str, address: str = "10.0.0.1"):
    return Client(REMOTE_ADDR=address).post(
        reverse("login"), {"username": username, "password": password}
    )


def later(seconds: float) -> None:
    """Let ``seconds`` pass for the throttle (its clock is the failures' stored time)."""
    from axes.models import AccessAttempt

    for a in AccessAttempt.objects.all():
        a.attempt_time -= timedelta(seconds=seconds)
        a.save(update_fields=["attempt_time"])


def test_failures_from_many_addresses_do_not_lock_the_account(zed, django_user_model):
    # An attacker anywhere cannot lock an admin out: their own address still logs in.
    admin = django_user_model.objects.create_superuser("root", password="pw-root-123")
    for i in range(3 * LIMIT):
        assert attempt(admin.username, "wrong", address=f"10.9.{i}.1").status_code == 200
    assert attempt("root", "pw-root-123", address="10.8.8.8").status_code == 302


def test_an_account_is_locked_from_the_address_that_failed_only(zed):
    for i in range(LIMIT):
        later(60)  # slowly, so the address's delay is not what stops them
        r = attempt("zed", "wrong", address="10.0.0.1")
        # The login form again with its error; the last failure answers with the lock.
        assert r.status_code == (429 if i == LIMIT - 1 else 200)
    later(60)
    r = attempt("zed", "pw-zed-123", address="10.0.0.1")
    assert r.status_code == 429
    text = r.content.decode()
    assert "Too many failed logins" in text and "0:15:00" in text
    assert "_auth_user_id" not in r.client.session
    # The same account from another address logs in.
    assert attempt("zed", "pw-zed-123", address="10.0.9.9").status_code == 302


def test_an_address_that_keeps_failing_waits_longer_each_time(zed, django_user_model):
    django_user_model.objects.create_user("amy", password="pw-amy-123")
    for i in range(LIMIT):
        assert attempt(f"nobody{i}", "wrong", address="10.1.1.1").status_code == 200
    # Five failures: the next try from there must wait 2 s, and is not even checked.
    early = attempt("amy", "pw-amy-123", address="10.1.1.1")
    assert early.status_code == 429 and early["Retry-After"] == "2"
    assert "Too many failed logins from your address" in early.content.decode()
    assert "_auth_user_id" not in early.client.session
    # Another address is not slowed.
    assert attempt("amy", "pw-amy-123", address="10.2.2.2").status_code == 302
    later(2)
    assert attempt("nobody", "wrong", address="10.1.1.1").status_code == 200
    assert attempt("amy", "pw-amy-123", address="10.1.1.1")["Retry-After"] == "4"  # doubled
    later(4)
    # Once the wait is over, a right password from that address is let in.
    assert attempt("amy", "pw-amy-123", address="10.1.1.1").status_code == 302


def test_the_delay_stops_growing_at_its_cap(zed, settings):
    from explorer.login_throttle import delay_for

    assert [delay_for(n) for n in (0, 4, 5, 6, 7)] == [0, 0, 2, 4, 8]
    assert delay_for(40) == settings.SESSIONS_LOGIN_DELAY_MAX_SECONDS == 60


def test_the_lock_ends_after_the_cool_off(zed):
    for _ in range(LIMIT):
        later(60)
        attempt("zed", "wrong")
    later(60)
    assert attempt("zed", "pw-zed-123").status_code == 429
    later(16 * 60)
    assert attempt("zed", "pw-zed-123").status_code == 302


def test_a_success_clears_the_failures_of_the_pair(zed):
    for _ in range(LIMIT - 1):
        attempt("zed", "wrong", address="10.3.3.3")
    assert attempt("zed", "pw-zed-123", address="10.3.3.3").status_code == 302
    for _ in range(LIMIT - 1):
        later(60)
        attempt("zed", "wrong", address="10.3.3.3")
    later(60)
    assert attempt("zed", "pw-zed-123", address="10.3.3.3").status_code == 302


def test_a_forwarded_for_header_does_not_change_the_address(zed):
    for i in range(LIMIT):
        Client(REMOTE_ADDR="10.7.7.7", HTTP_X_FORWARDED_FOR=f"1.2.3.{i}").post(
            reverse("login"), {"username": f"x{i}", "password": "wrong"}
        )
    assert attempt("zed", "pw-zed-123", address="10.7.7.7").status_code == 429


def test_old_failures_of_an_address_are_forgotten(zed):
    for i in range(LIMIT + 3):
        later(300)
        attempt(f"n{i}", "wrong", address="10.6.6.6")
    later(16 * 60)  # past the window the failures are counted over
    assert attempt("zed", "pw-zed-123", address="10.6.6.6").status_code == 302
