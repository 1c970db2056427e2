"""New since you last looked: per user and session, recorded by a POST after the visit
(a GET never writes), shown as "N new" in the list and as marks on the Transcript and tree."""

from __future__ import annotations

import json

import pytest

from explorer import services
from explorer.models import ReadMark

pytestmark = pytest.mark.django_db

LAST_ID = "1b2c3d4e"  # the small session's last entry


def _append(session, user, parent: str, text: str):
    message = {"role": "user", "content": text, "timestamp": 1741064900000}
    return services.append_message(session, user, message, leaf_id=parent, source="edit").entry


def _new_ids(page: bytes) -> list[str]:
    text = page.decode()
    start = text.index('<script id="new-ids" type="application/json">') + len(
        '<script id="new-ids" type="application/json">'
    )
    return json.loads(text[start : text.index("</script>", start)])


def _list_new(client, session) -> int:
    rows = client.get("/?format=json").json()["sessions"]
    return next(r["new"] for r in rows if r["pk"] == session.pk)


def test_new_since_the_last_visit_across_two_readers_and_appends(
    make_session, viewer_client, viewer_user, admin_client, editor_user
):
    session = make_session()
    url = f"/sessions/{session.pk}/transcript/"
    # A first visit: nothing is "new" yet, and the GET wrote nothing.
    page = viewer_client.get(url)
    assert b"since your last visit" not in page.content and b'id="new-ids"' not in page.content
    assert not ReadMark.objects.exists()
    # The page records the visit by a POST (what it showed: everything stored then).
    assert b'id="seen-visit"' in page.content
    answer = viewer_client.post(f"/sessions/{session.pk}/seen/", {"position": "999999"})
    assert answer.status_code in (204, 302)
    assert _list_new(viewer_client, session) == 0
    # Two entries arrive.
    first = _append(session, editor_user, LAST_ID, "one more")
    second = _append(session, editor_user, first.entry_id, "and another")
    assert _list_new(viewer_client, session) == 2
    assert _list_new(admin_client, session) == 0  # never opened it: no count
    listing = viewer_client.get("/").content.decode()
    assert "2 new</a>" in listing
    page = viewer_client.get(f"{url}?leaf={second.entry_id}")
    assert b"2 new entries</strong> since your last visit" in page.content
    assert set(_new_ids(page.content)) == {first.entry_id, second.entry_id}
    tree = viewer_client.get(f"/sessions/{session.pk}/?leaf={second.entry_id}")
    assert set(_new_ids(tree.content)) >= {first.entry_id, second.entry_id}
    # The other reader's visit changes nothing for this one.
    admin_client.post(f"/sessions/{session.pk}/seen/", {"all": "1"})
    assert _list_new(viewer_client, session) == 2 and _list_new(admin_client, session) == 0
    # Mark as read (htmx): the banner goes.
    answer = viewer_client.post(
        f"/sessions/{session.pk}/seen/", {"all": "1"}, HTTP_HX_REQUEST="true"
    )
    assert answer.status_code == 200 and b"since your last visit" not in answer.content
    assert _list_new(viewer_client, session) == 0
    assert ReadMark.objects.filter(user=viewer_user, session=session).get().position == (
        second.position
    )


def test_a_mark_only_moves_forward_and_never_past_the_newest_entry(
    make_session, viewer_client, viewer_user
):
    session = make_session()
    newest = session.entries.order_by("-position").first().position
    viewer_client.post(f"/sessions/{session.pk}/seen/", {"position": str(newest + 50)})
    assert ReadMark.objects.get(user=viewer_user).position == newest
    viewer_client.post(f"/sessions/{session.pk}/seen/", {"position": "1"})  # an old tab
    assert ReadMark.objects.get(user=viewer_user).position == newest
    answer = viewer_client.post(
        f"/sessions/{session.pk}/seen/?format=json",
        {"position": "2"},
        HTTP_ACCEPT="application/json",
    )
    assert answer.json() == {"session": session.pk, "mark": newest}


def test_recording_a_visit_needs_a_login_and_a_csrf_token(
    make_session, csrf_client_factory, viewer_user, client
):
    session = make_session()
    assert client.post(f"/sessions/{session.pk}/seen/", {"all": "1"}).status_code in (302, 401, 403)
    strict = csrf_client_factory(viewer_user)
    assert strict.post(f"/sessions/{session.pk}/seen/", {"all": "1"}).status_code == 403
    assert not ReadMark.objects.exists()
    assert strict.get(f"/sessions/{session.pk}/seen/").status_code == 405
