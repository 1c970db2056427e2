"""Archived branches: an editor sets aside an abandoned subtree with a reason (site data,
the file untouched), pages hide it unless asked, and a second download leaves it out."""

from __future__ import annotations

import pytest

from explorer import services
from explorer.models import ArchivedBranch

pytestmark = pytest.mark.django_db

SIDE = "e5f6a7b8"  # the small session's abandoned branch (a sibling of the main route)
MAIN = "b2c3d4e5"  # the first entry of the route the session's own leaf is on


def _archive(client, session, target=SIDE, reason="dead end"):
    return client.post(f"/sessions/{session.pk}/archive/", {"target": target, "reason": reason})


def test_an_editor_archives_and_unarchives_a_branch(make_session, editor_client, editor_user):
    session = make_session()
    answer = _archive(editor_client, session)
    assert answer.status_code == 302
    row = ArchivedBranch.objects.get(session=session)
    assert (row.entry_id, row.reason, row.archived_by) == (SIDE, "dead end", editor_user)
    assert row.archived_at is not None
    panel = editor_client.get(f"/sessions/{session.pk}/?entry={SIDE}&archived=show").content
    assert b"Archived branch</strong> starts here: dead end" in panel
    assert b"Unarchive</button>" in panel
    answer = editor_client.post(f"/sessions/{session.pk}/unarchive/", {"target": SIDE})
    assert answer.status_code == 302
    assert not ArchivedBranch.objects.exists()
    panel = editor_client.get(f"/sessions/{session.pk}/?entry={SIDE}").content
    assert b"Archived branch</strong>" not in panel and b"Archive branch" in panel


def test_what_cannot_be_archived_is_refused_with_a_reason(make_session, editor_client):
    session = make_session()
    answer = editor_client.post(
        f"/sessions/{session.pk}/archive/?format=json",
        {"target": MAIN, "reason": "no"},
        HTTP_ACCEPT="application/json",
    )
    assert answer.status_code == 400 and "current leaf" in answer.json()["message"]
    answer = _archive(editor_client, session, reason="   ")
    assert answer.status_code == 302
    assert not ArchivedBranch.objects.exists()
    follow = editor_client.get(answer["Location"]).content
    assert b"Say why the branch is archived" in follow
    _archive(editor_client, session, target="nope")
    _archive(editor_client, session)
    again = _archive(editor_client, session, reason="twice")
    assert "archived already" in editor_client.get(again["Location"]).content.decode()
    assert list(ArchivedBranch.objects.values_list("entry_id", "reason")) == [(SIDE, "dead end")]


def test_a_viewer_cannot_archive_and_writes_need_post_and_csrf(
    make_session, viewer_client, editor_user, csrf_client_factory
):
    session = make_session()
    assert _archive(viewer_client, session).status_code == 403
    assert (
        b"Archive branch" not in viewer_client.get(f"/sessions/{session.pk}/?entry={SIDE}").content
    )
    services.archive_branch(session, editor_user, SIDE, "dead end")
    unarchive = viewer_client.post(f"/sessions/{session.pk}/unarchive/", {"target": SIDE})
    assert unarchive.status_code == 403
    strict = csrf_client_factory(editor_user)
    assert strict.post(f"/sessions/{session.pk}/unarchive/", {"target": SIDE}).status_code == 403
    assert strict.get(f"/sessions/{session.pk}/archive/").status_code == 405
    assert ArchivedBranch.objects.count() == 1
