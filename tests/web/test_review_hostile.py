"""Hostile parameters and form values on the review and HTML export URLs: a 4xx or the
documented fallback, never a 500 (a streamed export is read to its end)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.web.test_hardening_params import HOSTILE, PARAMS, sessions  # noqa: F401

pytestmark = pytest.mark.django_db

GETS = ["export_html", "review", "review_entry"]
POSTS = ["comment_add", "entry_status"]
FIELDS = ["body", "entry", "parent", "status", "next", "delete", "reopen"]


def _status(response) -> int:
    if response.streaming:
        b"".join(response.streaming_content)
    return response.status_code


@pytest.mark.parametrize("name", GETS)
def test_review_and_export_pages_survive_hostile_parameters(admin_client, sessions, name):  # noqa: F811
    for session in sessions:
        url = reverse(f"explorer:{name}", args=[session.pk])
        for value in HOSTILE:
            query = dict.fromkeys(PARAMS + ["scope", "comments", "state"], value)
            assert _status(admin_client.get(url, query)) < 500, (name, value[:20])
        for scope in ("tree", "route"):
            assert _status(admin_client.get(url, {"scope": scope, "comments": "1"})) < 500


@pytest.mark.parametrize("name", POSTS)
def test_review_writes_survive_hostile_form_values(viewer_client, sessions, name):  # noqa: F811
    for session in sessions:
        url = reverse(f"explorer:{name}", args=[session.pk])
        for value in HOSTILE:
            response = viewer_client.post(url, dict.fromkeys(FIELDS, value))
            assert response.status_code < 500, (name, value[:20], response.status_code)
            if response.status_code == 302:  # never sent off the site
                assert response["Location"].startswith("/"), response["Location"]
                assert not response["Location"].startswith("//")


def test_next_never_leaves_the_site(viewer_client, make_session):
    session = make_session()
    url = reverse("explorer:comment_add", args=[session.pk])
    review = reverse("explorer:review", args=[session.pk])
    for target in ("//evil.example/x", "https://evil.example/", "javascript:alert(1)", "x"):
        r = viewer_client.post(url, {"entry": "d4e5f6a7", "body": "hi", "next": target})
        assert r.status_code == 302 and r["Location"] == review, target
    r = viewer_client.post(url, {"entry": "d4e5f6a7", "body": "hi", "next": "/sessions/"})
    assert r["Location"] == "/sessions/"
