"""Who may do what: anonymous users go to the login page, viewers read, editors append,
admins import and delete."""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_it_redirects_anonymous_users_to_login(client):
    response = client.get(reverse("explorer:session_list"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_it_shows_the_login_page(client):
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b"csrfmiddlewaretoken" in response.content


def test_it_shows_the_empty_list_to_a_viewer(viewer_client):
    response = viewer_client.get(reverse("explorer:session_list"))
    assert response.status_code == 200
    assert b"No sessions yet" in response.content
    assert b"Import sessions" not in response.content


def test_it_forbids_users_without_role(norole_user):
    from django.test import Client

    c = Client()
    c.force_login(norole_user)
    assert c.get(reverse("explorer:session_list")).status_code == 403


def test_healthz_is_public(client):
    assert client.get("/healthz").content == b"ok"
