"""Cursors on the tip follow appends, as Pi's leaf does; cursors elsewhere stay."""

from __future__ import annotations

import pytest

from explorer import queries, services
from tests.conftest import SMALL_SESSION

pytestmark = pytest.mark.django_db

SHORTER = b"".join(SMALL_SESSION.splitlines(keepends=True)[:-2])  # ends at f6a7b8c9


def test_a_grown_import_moves_cursors_at_the_old_end_only(viewer_user, editor_user):
    session = services.import_bytes(SHORTER, source_path="s.jsonl").session
    services.move_cursor(session, viewer_user, "f6a7b8c9")  # the tip
    services.move_cursor(session, editor_user, "b2c3d4e5")  # inside the route
    grown = services.import_bytes(SMALL_SESSION, source_path="s.jsonl")
    assert grown.added == 2 and not grown.created
    assert queries.cursor_id(session, viewer_user) == "1b2c3d4e"
    assert queries.cursor_id(session, editor_user) == "b2c3d4e5"


def test_another_users_turn_carries_a_reader_at_the_tip_along(
    make_session, viewer_user, editor_user, sent_broadcasts, django_capture_on_commit_callbacks
):
    session = make_session()
    services.move_cursor(session, viewer_user, "1b2c3d4e")
    services.move_cursor(session, editor_user, "1b2c3d4e")
    reply = {"role": "user", "content": "and now?", "timestamp": 1}
    with django_capture_on_commit_callbacks(execute=True):
        result = services.append_message(session, editor_user, reply)
    new_id = result.entry.entry_id
    assert queries.cursor_id(session, viewer_user) == new_id
    moved = [m for m in sent_broadcasts if m["type"] == "live.cursor"]
    assert {m["user_id"] for m in moved} == {viewer_user.pk, editor_user.pk}
    assert {m["entry_id"] for m in moved} == {new_id}


def test_a_cursor_on_a_branch_point_stays_and_the_page_counts_newer_entries(
    make_session, viewer_user, editor_user, viewer_client
):
    session = make_session()
    services.move_cursor(session, viewer_user, "e5f6a7b8")  # a leaf of the other branch
    services.move_cursor(session, editor_user, "a1b2c3d4")  # has children already
    services.append_message(
        session, editor_user, {"role": "user", "content": "x", "timestamp": 1}, leaf_id="a1b2c3d4"
    )
    assert queries.cursor_id(session, viewer_user) == "e5f6a7b8"
    body = viewer_client.get(f"/sessions/{session.pk}/transcript/").content.decode()
    assert "4 newer entries" in body  # f6a7b8c9, 0a1b2c3d, 1b2c3d4e and the new one
