"""Audited actions: a secret is revealed only after a confirm step with a reason, the
finding says who revealed it, when and why, and the audit list (reveals, context edits and
their undos, deletes) is for admins to read and download."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.urls import reverse

from explorer.models import AuditEvent, SecretFinding, SecretReveal
from tests.secrets.seeded import build_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded(make_session):
    data, _, _ = build_session()
    return make_session(data)


def _finding(session) -> SecretFinding:
    return SecretFinding.objects.get(session=session, kind="stripe-key")


def test_a_reveal_asks_for_a_reason_first_and_shows_nothing_before(admin_client, seeded):
    from tests.secrets.seeded import make_secrets

    secret = make_secrets()["stripe-key"]
    url = reverse("explorer:finding_reveal", args=[seeded.pk, _finding(seeded).pk])
    first = admin_client.post(url, headers={"HX-Request": "true"})
    body = first.content.decode()
    assert first.status_code == 200 and 'name="reason"' in body and 'name="confirm"' in body
    assert secret not in body and not SecretReveal.objects.exists()
    no_reason = admin_client.post(url, {"confirm": "1", "reason": "  "})
    assert no_reason.status_code == 400 and "Say why" in no_reason.content.decode()
    assert secret not in no_reason.content.decode() and not SecretReveal.objects.exists()
    assert not AuditEvent.objects.exists()
    shown = admin_client.post(url, {"confirm": "1", "reason": "rotating it today"})
    assert shown.status_code == 200 and secret in shown.content.decode()


def test_the_finding_says_who_revealed_it_when_and_why(admin_client, admin_user, seeded):
    finding = _finding(seeded)
    url = reverse("explorer:finding_reveal", args=[seeded.pk, finding.pk])
    admin_client.post(url, {"confirm": "1", "reason": "rotating it today"})
    reveal = SecretReveal.objects.get(finding=finding)
    assert reveal.reason == "rotating it today"
    page = admin_client.get(reverse("explorer:session_secrets", args=[seeded.pk])).content.decode()
    when = reveal.revealed_at.strftime("%Y-%m-%d %H:%M")
    assert f"revealed by {admin_user.username} at {when} (rotating it today)" in page
    event = AuditEvent.objects.get(action=AuditEvent.REVEAL)
    assert (event.username, event.reason, event.session_ref) == (
        admin_user.username, "rotating it today", seeded.session_id
    )  # fmt: skip
    assert "stripe-key" in event.what


def test_context_edits_undos_and_deletes_are_audited(editor_client, admin_client, make_session):
    session = make_session()
    edit = reverse("explorer:edit", args=[session.pk])
    r = editor_client.post(edit, {"target": "d4e5f6a7", "mode": "hide", "confirm": "1",
                                  "reason": "noise", "expected_leaf": "1b2c3d4e"})  # fmt: skip
    assert r.status_code == 302
    undo = reverse("explorer:undo", args=[session.pk])
    assert editor_client.post(undo, {"target": "d4e5f6a7"}).status_code == 302
    name = session.display_name
    assert admin_client.post(
        reverse("explorer:delete", args=[session.pk]), {"confirm": "1"}
    ).status_code in (200, 302)
    events = list(AuditEvent.objects.order_by("at", "pk"))
    assert [e.action for e in events] == ["context_edit", "undo", "delete_session"]
    assert [e.username for e in events] == ["eddie", "eddie", "ada"]
    assert events[0].reason == "noise" and "d4e5f6a7" in events[0].what
    assert events[2].session_name == name and events[2].session_ref == session.session_id


def test_only_admins_read_and_download_the_audit_list(
    viewer_client, editor_client, admin_client, admin_user, seeded
):
    finding = _finding(seeded)
    admin_client.post(reverse("explorer:finding_reveal", args=[seeded.pk, finding.pk]),
                      {"confirm": "1", "reason": '=HYPERLINK("x")'})  # fmt: skip
    url = reverse("explorer:audit")
    for client in (viewer_client, editor_client):
        assert client.get(url).status_code == 403
        assert client.get(url, {"format": "csv"}).status_code == 403
    page = admin_client.get(url)
    assert page.status_code == 200 and "Secret revealed" in page.content.decode()
    as_json = admin_client.get(url, {"format": "json"})
    assert "attachment" in as_json["Content-Disposition"]
    rows = json.loads(as_json.content)
    assert [(r["username"], r["action"]) for r in rows] == [(admin_user.username, "reveal")]
    as_csv = admin_client.get(url, {"format": "csv"})
    table = list(csv.DictReader(io.StringIO(as_csv.content.decode())))
    assert table[0]["action"] == "reveal" and table[0]["username"] == admin_user.username
    assert table[0]["reason"].startswith("'=")  # no formula runs when a spreadsheet opens it


def test_a_deleted_comment_is_audited_without_its_text(make_session, viewer_client, admin_client):
    from explorer.models import ReviewComment

    session = make_session()
    url = reverse("explorer:comment_add", args=[session.pk])
    assert (
        viewer_client.post(url, {"entry": "a1b2c3d4", "body": "private words"}).status_code == 302
    )
    c = ReviewComment.objects.get()
    edit = reverse("explorer:comment_edit", args=[session.pk, c.pk])
    assert admin_client.post(edit, {"delete": "1"}).status_code == 302
    event = AuditEvent.objects.get()
    assert (event.action, event.username, event.target) == ("delete_comment", "ada", "a1b2c3d4")
    assert "by vera" in event.what and "private words" not in event.what
