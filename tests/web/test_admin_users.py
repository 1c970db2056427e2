"""The Django admin creates a user with a role on one screen."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from explorer.permissions import role_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def superuser_client(client, django_user_model):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-1234567")
    client.force_login(root)
    return client


def test_the_add_form_asks_for_the_role(superuser_client):
    html = superuser_client.get(reverse("admin:auth_user_add")).content.decode()
    assert 'name="password1"' in html and 'name="password2"' in html
    for role in ("viewer", "editor", "admin"):
        assert f'name="role" value="{role}"' in html


@pytest.mark.parametrize("role", ["viewer", "editor", "admin"])
def test_one_post_creates_the_user_with_the_role(superuser_client, role):
    response = superuser_client.post(
        reverse("admin:auth_user_add"),
        {"username": f"new-{role}", "usable_password": "true", "password1": "a-Long-pass-9876",
         "password2": "a-Long-pass-9876", "role": role, "_save": "Save"},
    )  # fmt: skip
    assert response.status_code == 302, response.content.decode()[:2000]
    user = get_user_model().objects.get(username=f"new-{role}")
    assert role_of(user) == role
    assert user.check_password("a-Long-pass-9876")
    assert user.is_staff == (role == "admin")  # admins can manage users in the admin


def test_mismatched_passwords_create_nobody(superuser_client):
    response = superuser_client.post(
        reverse("admin:auth_user_add"),
        {"username": "typo", "usable_password": "true", "password1": "a-Long-pass-9876",
         "password2": "a-Long-pass-9877", "role": "editor", "_save": "Save"},
    )  # fmt: skip
    assert response.status_code == 200
    assert not get_user_model().objects.filter(username="typo").exists()
