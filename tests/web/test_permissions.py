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


# --- the matrix on the site core's own endpoints -------------------------------------------


def _urls(session):
    return {
        "list": reverse("explorer:session_list"),
        "import": reverse("explorer:import"),
        "export": reverse("explorer:export", args=[session.pk]),
        "branch": reverse("explorer:branch_download", args=[session.pk]),
        "fork": reverse("explorer:fork", args=[session.pk]),
        "delete": reverse("explorer:delete", args=[session.pk]),
        "problems": reverse("explorer:problems", args=[session.pk]),
        "detail": reverse("explorer:session_detail", args=[session.pk]),
    }


def test_anonymous_users_are_sent_to_login_everywhere(client, make_session):
    session = make_session()
    for name, url in _urls(session).items():
        for method in (client.get, client.post):
            response = method(url)
            assert response.status_code == 302, (name, method)
            assert response["Location"].startswith(reverse("login"))


def test_viewers_read_but_cannot_post_any_write(viewer_client, make_session, small_session_bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from explorer.models import Session

    session = make_session()
    urls = _urls(session)
    for name in ("list", "export", "problems", "detail", "branch"):
        assert viewer_client.get(urls[name]).status_code == 200, name
    upload = SimpleUploadedFile("x.jsonl", small_session_bytes)
    assert viewer_client.post(urls["import"], {"files": upload}).status_code == 403
    assert viewer_client.post(urls["fork"], {"cwd": ""}).status_code == 403
    assert viewer_client.post(urls["branch"], {"leaf": "e5f6a7b8"}).status_code == 403
    assert viewer_client.post(urls["delete"]).status_code == 403
    assert Session.objects.count() == 1


def test_editors_append_but_cannot_import_or_delete(
    editor_client, make_session, small_session_bytes
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from explorer.models import Session

    session = make_session()
    urls = _urls(session)
    upload = SimpleUploadedFile("x.jsonl", small_session_bytes)
    assert editor_client.post(urls["import"], {"files": upload}).status_code == 403
    assert editor_client.post(urls["delete"]).status_code == 403
    response = editor_client.post(urls["fork"], {"cwd": "/tmp/elsewhere"})
    assert response.status_code == 302
    assert Session.objects.count() == 2
    response = editor_client.post(urls["branch"], {"leaf": "e5f6a7b8"})
    assert response.status_code == 302
    assert Session.objects.count() == 3


def test_admins_import_and_delete(admin_client, make_session):
    from explorer.models import Session

    session = make_session()
    urls = _urls(session)
    assert admin_client.get(urls["import"]).status_code == 200
    response = admin_client.post(urls["delete"])
    assert response.status_code == 302
    assert not Session.objects.filter(pk=session.pk).exists()


def test_superusers_are_admins(db, django_user_model):
    from django.test import Client

    from explorer.permissions import role_of

    root = django_user_model.objects.create_superuser("root", "r@example.com", "pw")
    assert role_of(root) == "admin"
    c = Client()
    c.force_login(root)
    assert c.get(reverse("explorer:import")).status_code == 200


def test_csrf_is_enforced_on_posts(admin_user, editor_user, csrf_client_factory, make_session):
    session = make_session()
    admin = csrf_client_factory(admin_user)
    assert admin.post(reverse("explorer:delete", args=[session.pk])).status_code == 403
    editor = csrf_client_factory(editor_user)
    assert editor.post(reverse("explorer:fork", args=[session.pk])).status_code == 403
    # with the token from the page the same request works
    page = admin.get(reverse("explorer:delete", args=[session.pk]))
    token = page.context["csrf_token"]
    response = admin.post(
        reverse("explorer:delete", args=[session.pk]), {"csrfmiddlewaretoken": str(token)}
    )
    assert response.status_code == 302


def test_login_form_needs_csrf(db, django_user_model):
    from django.test import Client

    django_user_model.objects.create_user("zed", password="pw-zed-123")
    c = Client(enforce_csrf_checks=True)
    response = c.post(reverse("login"), {"username": "zed", "password": "pw-zed-123"})
    assert response.status_code == 403


# --- deployment settings ---------------------------------------------------------------------


def _run_check(env_extra: dict, *args: str):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "DEBUG",
            "SECRET_KEY",
            "ALLOWED_HOSTS",
            "DATABASE_URL",
            "REDIS_URL",
            "DJANGO_ALLOW_ASYNC_UNSAFE",
        )
    }  # (browser tests set the last one for the whole run)
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "manage.py", "check", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_deploy_check_is_clean_when_debug_is_off():
    import secrets

    result = _run_check(
        {
            "DEBUG": "false",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "ALLOWED_HOSTS": "sessions.example.com",
        },
        "--deploy",
        "--fail-level",
        "WARNING",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.parametrize(
    "env, message",
    [
        ({"DEBUG": "maybe"}, "DEBUG must be one of"),
        ({"DEBUG": "false"}, "SECRET_KEY must be set"),
        ({"DEBUG": "false", "SECRET_KEY": "short"}, "at least 50 characters"),
        ({"SESSIONS_MAX_UPLOAD_BYTES": "lots"}, "must be an integer"),
        ({"REDIS_URL": "localhost:6379"}, "REDIS_URL must start with"),
        ({"SESSIONS_CACHE": "memcached"}, "SESSIONS_CACHE must be redis, file or locmem"),
        ({"SESSIONS_CACHE": "redis"}, "SESSIONS_CACHE=redis needs REDIS_URL"),
    ],
)
def test_bad_environment_values_fail_loudly(env, message):
    result = _run_check(env)
    assert result.returncode != 0
    assert message in result.stderr


def test_security_headers_and_cookies(admin_client):
    response = admin_client.get(reverse("explorer:session_list"))
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


def test_admins_manage_users_in_the_django_admin(admin_client, viewer_user):
    from django.contrib.auth.models import Group

    response = admin_client.get("/admin/auth/user/")
    assert response.status_code == 200
    assert b"vera" in response.content and b"viewer" in response.content
    # Giving someone the admin role in the admin grants staff status too.
    viewer_user.groups.add(Group.objects.get(name="admin"))
    viewer_user.refresh_from_db()
    assert viewer_user.is_staff


def test_editors_cannot_open_the_django_admin(editor_client):
    assert editor_client.get("/admin/auth/user/").status_code == 302


def test_the_users_nav_link_opens_the_user_list(admin_client):
    html = admin_client.get(reverse("explorer:session_list")).content.decode()
    assert f'href="{reverse("admin:auth_user_changelist")}">Users</a>' in html


def test_every_role_finds_global_search_in_the_nav(viewer_client):
    html = viewer_client.get(reverse("explorer:session_list")).content.decode()
    assert f'<a href="{reverse("explorer:search")}"' in html


def test_a_refusal_explains_itself_and_still_offers_log_out(
    norole_user, viewer_client, make_session
):
    from django.test import Client

    c = Client()
    c.force_login(norole_user)
    html = c.get(reverse("explorer:session_list")).content.decode()
    assert "This needs the viewer role." in html
    assert f'action="{reverse("logout")}"' in html  # a user without a role can switch accounts
    session = make_session()
    r = viewer_client.post(reverse("explorer:rename", args=[session.pk]), {"name": "x"})
    assert r.status_code == 403 and "This needs the editor role." in r.content.decode()


@pytest.mark.parametrize("name", ["explorer:rename", "explorer:compact", "explorer:fork"])
def test_write_forms_are_not_offered_to_viewers(viewer_client, editor_client, make_session, name):
    session = make_session()
    url = reverse(name, args=[session.pk])
    refused = viewer_client.get(url)
    assert refused.status_code == 403
    assert "editor" in refused.content.decode()
    assert editor_client.get(url).status_code == 200


def test_the_import_form_is_for_admins_only(editor_client, admin_client):
    assert editor_client.get(reverse("explorer:import")).status_code == 403
    assert admin_client.get(reverse("explorer:import")).status_code == 200


def test_an_admin_group_made_again_holds_its_permissions(django_user_model):
    """A database whose groups were lost (flushed, restored without them) gets them back on
    the next role change, the admin group with its rights in the Django admin."""
    from django.contrib.auth.models import Group

    from explorer.permissions import set_role

    Group.objects.all().delete()
    user = django_user_model.objects.create_user(username="again", password="pw-again-12345")
    set_role(user, "admin")
    user = django_user_model.objects.get(pk=user.pk)  # no cached permissions
    assert user.is_staff
    assert user.has_perm("auth.view_user") and user.has_perm("auth.add_user")
    assert user.has_perm("explorer.delete_session")
