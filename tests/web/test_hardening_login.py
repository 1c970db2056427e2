"""Login throttling: per account and per address, a clear message, a lock that ends."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

pytestmark = pytest.mark.django_db

LIMIT = 5


@pytest.fixture
def zed(django_user_model):
    return django_user_model.objects.create_user("zed", password="pw-zed-123")


def attempt(username: str, password: str, address: str = "10.0.0.1"):
    return Client(REMOTE_ADDR=address).post(
        reverse("login"), {"username": username, "password": password}
    )


def test_an_account_is_locked_after_repeated_failures_from_any_address(zed):
    for i in range(LIMIT):
        r = attempt("zed", "wrong", address=f"10.0.0.{i + 1}")
        # The login form again with its error; the last failure answers with the lock.
        assert r.status_code == (429 if i == LIMIT - 1 else 200)
    r = attempt("zed", "pw-zed-123", address="10.0.9.9")
    assert r.status_code == 429
    text = r.content.decode()
    assert "Too many failed logins" in text and "0:15:00" in text
    assert "_auth_user_id" not in r.client.session


def test_an_address_is_locked_whatever_account_it_tries(zed, django_user_model):
    django_user_model.objects.create_user("amy", password="pw-amy-123")
    for i in range(LIMIT - 1):
        assert attempt(f"nobody{i}", "wrong", address="10.1.1.1").status_code == 200
    assert attempt("nobody", "wrong", address="10.1.1.1").status_code == 429
    assert attempt("amy", "pw-amy-123", address="10.1.1.1").status_code == 429
    # Another address still logs the same account in.
    assert attempt("amy", "pw-amy-123", address="10.2.2.2").status_code == 302


def test_the_lock_ends_after_the_cool_off(zed):
    from axes.models import AccessAttempt

    for _ in range(LIMIT):
        attempt("zed", "wrong")
    assert attempt("zed", "pw-zed-123").status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert attempt("zed", "pw-zed-123").status_code == 302


def test_a_success_clears_the_failures_of_the_account(zed):
    for _ in range(LIMIT - 1):
        attempt("zed", "wrong", address="10.3.3.3")
    assert attempt("zed", "pw-zed-123", address="10.4.4.4").status_code == 302
    for _ in range(LIMIT - 1):
        attempt("zed", "wrong", address="10.5.5.5")
    assert attempt("zed", "pw-zed-123", address="10.6.6.6").status_code == 302


def test_a_forwarded_for_header_does_not_change_the_address(zed):
    for i in range(LIMIT):
        Client(REMOTE_ADDR="10.7.7.7", HTTP_X_FORWARDED_FOR=f"1.2.3.{i}").post(
            reverse("login"), {"username": f"x{i}", "password": "wrong"}
        )
    assert attempt("zed", "pw-zed-123", address="10.7.7.7").status_code == 429
