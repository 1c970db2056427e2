"""What a context edit did to an entry reads the same on the Transcript, the entry panel and
Raw vs projected (``analysis.projection.edit_effect``).

After an Undo (a restoring edit: the original content as the replacement) Raw vs projected
said the row was the same as the raw entry, "original content restored", while the
Transcript and the entry panel still said "Replaced in the model's context" and offered
another Undo. An edit replacing the content of a role it does not apply to (a bash
execution) was "replaced" there too, and "does not apply to this role" on Raw vs projected.
"""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from explorer import queries, services

pytestmark = pytest.mark.django_db

TARGET = "d4e5f6a7"  # SMALL_SESSION's last assistant reply, on the default route
HIDDEN = "c3d4e5f6"  # the tool result SMALL_SESSION's own edit hides


def _transcript_note(client, session, entry_id: str) -> str:
    page = client.get(reverse("explorer:transcript", args=[session.pk])).content.decode()
    row = re.search(rf'<li id="e-[^"]*" data-entry="{entry_id}".*?(?=<li id="e-|$)', page, re.S)
    assert row, entry_id
    note = re.search(r'<div class="t-edit small"[^>]*><strong>([^<]*)</strong>', row.group(0))
    return note.group(1) if note else ""


def _panel_note(client, session, entry_id: str) -> str:
    page = client.get(reverse("explorer:entry", args=[session.pk]), {"id": entry_id}).content
    note = re.search(r'<div class="t-edit small"[^>]*><strong>([^<]*)</strong>', page.decode())
    return note.group(1) if note else ""


def _row(client, session, entry_id: str) -> dict:
    rows = client.get(reverse("explorer:context", args=[session.pk]), {"format": "json"}).json()
    return next(r for r in rows["rows"] if r["id"] == entry_id)


def test_an_undone_edit_is_no_edit_on_any_page(editor_client, make_session, editor_user):
    session = make_session()
    services.add_context_edit(session, editor_user, TARGET, {"content": "changed"})
    session.refresh_from_db()
    assert _row(editor_client, session, TARGET)["status"] == "replaced"
    assert _transcript_note(editor_client, session, TARGET) == "Replaced in the model's context"
    # Undo, as the page's button does it.
    undo = editor_client.post(reverse("explorer:undo", args=[session.pk]), {"target": TARGET})
    assert undo.status_code in (200, 302)
    session.refresh_from_db()
    row = _row(editor_client, session, TARGET)
    assert row["status"] == "same" and "original content restored" in row["reason"]
    assert _transcript_note(editor_client, session, TARGET) == ""
    assert _panel_note(editor_client, session, TARGET) == ""
    # The session's own hide is still one everywhere.
    assert _row(editor_client, session, HIDDEN)["status"] == "hidden"
    # (a tool result is drawn with its call: the note sits in the call's row)
    assert _transcript_note(editor_client, session, "b2c3d4e5") == "Hidden from the model"
    assert _panel_note(editor_client, session, HIDDEN) == "Hidden from the model"


def test_an_edit_of_a_role_it_does_not_apply_to_is_no_edit(viewer_client, make_session):
    header = {"type": "session", "version": 3, "id": "bash-edit", "timestamp": "2025-03-04T05:06:07.089Z", "cwd": "/p"}  # fmt: skip
    ts = "2025-03-04T05:07:01.000Z"
    entries = [
        {
            "type": "message",
            "id": "u1",
            "parentId": None,
            "timestamp": ts,
            "message": {"role": "user", "content": "hi", "timestamp": 1},
        },  # fmt: skip
        {
            "type": "message",
            "id": "b1",
            "parentId": "u1",
            "timestamp": ts,
            "message": {
                "role": "bashExecution",
                "command": "ls",
                "output": "a b",
                "exitCode": 0,
                "timestamp": 2,
            },
        },  # fmt: skip
        {
            "type": "context_edit",
            "id": "e1",
            "parentId": "b1",
            "timestamp": ts,
            "targetId": "b1",
            "replacement": {"content": "nothing"},
        },  # fmt: skip
    ]
    session = make_session("".join(json.dumps(e) + "\n" for e in [header, *entries]).encode())
    assert queries.default_leaf_id(session) == "e1"
    row = _row(viewer_client, session, "b1")
    assert row["status"] == "same" and "does not apply" in row["reason"]
    assert _transcript_note(viewer_client, session, "b1") == ""
    assert _panel_note(viewer_client, session, "b1") == ""
