"""The Transcript tab: a route as a conversation, windowed, with switchers and marks."""

from __future__ import annotations

import pytest

from explorer import queries, services

pytestmark = pytest.mark.django_db


def _url(session, query: str = "") -> str:
    return f"/sessions/{session.pk}/transcript/" + (f"?{query}" if query else "")


def test_the_route_reads_as_a_conversation_with_calls_results_and_marks(
    make_session, editor_client
):
    session = make_session()
    body = editor_client.get(_url(session)).content.decode()
    # The cursor's route, in order, with the tool result inside its call.
    assert body.index('data-entry="a1b2c3d4"') < body.index('data-entry="d4e5f6a7"')
    assert 'id="r-c3d4e5f6"' in body and "hello world" in body
    # The branch point at the first reply offers the sibling route.
    assert "1/2" in body and "via=e5f6a7b8" in body
    # The hidden tool result says so, with the edit and Undo for an editor.
    assert "Hidden from the model" in body and "0a1b2c3d" in body
    assert f'action="/sessions/{session.pk}/undo/"' in body
    # Per-message figures from the engine's describe functions.
    assert "$0.0042" in body
    assert 'tag-cursor">cursor' in body and "viewing</span>" not in body


def test_a_branch_switcher_opens_the_sibling_route_as_viewing(make_session, viewer_client):
    session = make_session()
    body = viewer_client.get(_url(session, "via=e5f6a7b8")).content.decode()
    assert 'data-entry="e5f6a7b8"' in body and 'data-entry="d4e5f6a7"' not in body
    assert "viewing</span>" in body and "2/2" in body
    # A viewer cannot undo but may move their own cursor.
    assert "/undo/" not in body and "move my cursor here" in body


def test_a_long_route_opens_as_a_window_and_pages_both_ways(make_session, viewer_client):
    lines = [
        b'{"type":"session","version":3,"id":"0195f3a2-0000-7d2e-9b1a-3c5d7e9f1a2b",'
        b'"timestamp":"2025-03-04T05:06:07.089Z","cwd":"/p"}'
    ]
    parent = "null"
    for k in range(500):
        eid = f"{k:08x}"
        role = "user" if k % 2 == 0 else "assistant"
        lines.append(
            f'{{"type":"message","id":"{eid}","parentId":{parent},"timestamp":"2025-03-04T05:06:08.000Z",'
            f'"message":{{"role":"{role}","content":[{{"type":"text","text":"turn {k} needle{k}"}}],"timestamp":1}}}}'.encode()
        )
        parent = f'"{eid}"'
    session = make_session(b"\n".join(lines) + b"\n")
    body = viewer_client.get(_url(session)).content.decode()
    assert body.count('class="t-entry') == 60
    assert 'data-entry="000001f3"' in body and 'data-entry="00000010"' not in body
    assert "440 earlier entries" in body
    earlier = viewer_client.get(_url(session, "before=000001b8"), HTTP_HX_REQUEST="true")
    page = earlier.content.decode()
    assert "<html" not in page and page.count('class="t-entry') == 60
    assert 'data-entry="000001b7"' in page and 'data-entry="000001b8"' not in page
    assert "t-earlier" in page and "t-later" not in page  # it grows upwards only
    later = viewer_client.get(_url(session, "after=00000010"), HTTP_HX_REQUEST="true")
    assert "t-later" in later.content.decode() and "t-earlier" not in later.content.decode()
    # A permalink opens the window around its entry, marked.
    around = viewer_client.get(_url(session, "entry=00000064")).content.decode()
    assert "is-target" in around and 'data-entry="00000064"' in around
    assert "later entries" in around and "earlier entries" in around
    # Find in route: the hit opens, with its place among the hits.
    found = viewer_client.get(_url(session, "q=NEEDLE7")).content.decode()
    assert "1 of 11" in found  # needle7, needle70..79
    assert 'data-target="e-00000007"' in found


def test_a_compaction_card_lists_what_it_replaced_and_marks_the_kept_tail(
    make_session, editor_client, editor_user
):
    session = make_session()
    services.append_via_manager(
        session, editor_user, "1b2c3d4e",
        lambda m: m.append_compaction("the summary text", "d4e5f6a7", 5000, None, False, None),
    )  # fmt: skip
    body = editor_client.get(_url(session)).content.decode()
    assert "the summary text" in body and "instead of 3 entries" in body
    assert "t-kept" in body and "kept tail of compaction" in body
    comp = queries.default_leaf_id(session)
    listed = editor_client.get(_url(session, f"replaced={comp}"), HTTP_HX_REQUEST="true")
    assert listed.content.decode().count("<li>") == 3


def test_cursor_notice_and_a_viewer_moving_their_own_cursor(make_session, viewer_client):
    session = make_session()
    before = session.entries.count()
    response = viewer_client.post(f"/sessions/{session.pk}/cursor/", {"target": "b2c3d4e5"})
    assert response.status_code == 302
    assert queries.cursor_id(session, viewer_client.user) == "b2c3d4e5"
    assert session.entries.count() == before  # moving a cursor appends nothing
    body = viewer_client.get(_url(session)).content.decode()
    assert "6 newer entries" in body and "go to the tip" in body


def test_a_linked_leaf_is_labelled_viewing_not_cursor(make_session, viewer_client):
    session = make_session()
    own = viewer_client.get(f"/sessions/{session.pk}/?entry=1b2c3d4e").content.decode()
    assert 'tag-cursor">cursor' in own and "tag-viewing" not in own
    linked = viewer_client.get(f"/sessions/{session.pk}/?leaf=d4e5f6a7&entry=d4e5f6a7")
    body = linked.content.decode()
    assert ">viewing</span>" in body and 'tag-cursor">cursor' not in body
    # A viewer may move their own cursor from the entry panel, and read its whole route.
    assert f'action="/sessions/{session.pk}/cursor/"' in body
    assert "transcript/?via=d4e5f6a7" in body


def test_the_entry_panel_says_a_message_is_hidden_with_the_edit_and_undo(
    make_session, editor_client, viewer_client
):
    session = make_session()
    url = f"/sessions/{session.pk}/entry/?id=c3d4e5f6"
    body = editor_client.get(url).content.decode()
    assert "Hidden from the model" in body and "0a1b2c3d" in body
    assert f'action="/sessions/{session.pk}/undo/"' in body
    seen = viewer_client.get(url).content.decode()
    assert "Hidden from the model" in seen and "/undo/" not in seen
    other = editor_client.get(f"/sessions/{session.pk}/entry/?id=d4e5f6a7").content.decode()
    assert "Hidden from the model" not in other


def test_a_header_only_session_offers_no_compaction_and_no_legend(make_session, editor_client):
    header = (
        b'{"type":"session","version":3,"id":"0195f3a2-0000-7d2e-9b1a-00000000beef",'
        b'"timestamp":"2025-03-04T05:06:07.089Z","cwd":"/p"}\n'
    )
    session = make_session(header)
    tree = editor_client.get(f"/sessions/{session.pk}/").content.decode()
    assert 'class="legend' not in tree
    compactions = editor_client.get(f"/sessions/{session.pk}/compactions/").content.decode()
    assert "Compact now" not in compactions
    transcript = editor_client.get(_url(session)).content.decode()
    assert "This session has no entries yet." in transcript
    full = editor_client.get(f"/sessions/{make_session().pk}/").content.decode()
    assert 'class="legend' in full


def test_the_tip_of_your_route_picks_up_arrivals(make_session, viewer_client, editor_user):
    session = make_session()
    services.move_cursor(session, viewer_client.user, "1b2c3d4e")
    page = viewer_client.get(_url(session)).content.decode()
    assert "after=1b2c3d4e&amp;tail=1" in page and 'hx-trigger="every 4s"' in page
    tail = _url(session, "after=1b2c3d4e&tail=1")
    assert viewer_client.get(tail, HTTP_HX_REQUEST="true").status_code == 204
    services.move_cursor(session, editor_user, "1b2c3d4e")
    new = services.append_message(session, editor_user, {"role": "user", "content": "next!"})
    arrived = viewer_client.get(tail, HTTP_HX_REQUEST="true").content.decode()
    assert f'data-entry="{new.entry.entry_id}"' in arrived and "next!" in arrived
    assert f"after={new.entry.entry_id}&amp;tail=1" in arrived  # and it keeps listening
    # A viewed route (?leaf=) is a fixed route: it does not listen.
    viewed = viewer_client.get(_url(session, "leaf=d4e5f6a7")).content.decode()
    assert "tail=1" not in viewed


def test_the_tree_tab_says_when_entries_arrive(make_session, viewer_client, editor_user):
    session = make_session()
    page = viewer_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "?arrivals=1b2c3d4e" in page and 'hx-trigger="every 5s"' in page
    poll = f"/sessions/{session.pk}/?arrivals=1b2c3d4e"
    assert viewer_client.get(poll, HTTP_HX_REQUEST="true").status_code == 204
    services.append_message(session, editor_user, {"role": "user", "content": "more"})
    note = viewer_client.get(poll, HTTP_HX_REQUEST="true").content.decode()
    assert "1 new entry" in note and "<html" not in note
