"""The live page and its turn / cancel endpoints (plain Django test client)."""

from __future__ import annotations

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored(make_session):
    return make_session()


def test_it_shows_transcript_tree_meter_and_socket(viewer_client, stored, settings):
    settings.SESSIONS_LLM = {"SESSIONS_LLM_BASE_URL": ""}
    response = viewer_client.get(reverse("explorer:live", args=[stored.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert f'ws-connect="/ws/sessions/{stored.pk}/"' in html
    assert 'hx-ext="ws"' in html
    # The transcript is the Transcript tab's window of the route to the newest entry; the
    # tree is the Tree tab's text tree, with the other branch shown (not flattened away).
    transcript = html.split('id="transcript"', 1)[1].split("</ol>", 1)[0]
    assert 'id="e-1b2c3d4e"' in transcript and 'id="e-e5f6a7b8"' not in transcript
    tree = html.split('id="text-tree"', 1)[1].split("</ul>", 1)[0]
    assert 'data-id="e5f6a7b8"' in tree and 'data-id="1b2c3d4e"' in tree
    assert "live-node" not in html and "tree-children-" not in html  # the old flat tree
    assert 'id="projection-panel"' in html and "<meter" in html
    assert 'data-tip="1b2c3d4e"' in html
    # A viewer cannot send; the page says plainly that no provider is configured.
    assert 'id="turn-form"' not in html
    assert "No model provider is configured" in html


def test_editors_get_the_turn_form(editor_client, stored, settings):
    settings.SESSIONS_LLM = {"SESSIONS_LLM_BASE_URL": "http://127.0.0.1:9/v1"}
    html = editor_client.get(reverse("explorer:live", args=[stored.pk])).content.decode()
    assert 'id="turn-form"' in html and 'id="cancel-turn"' in html
    assert "No model provider is configured" not in html
    assert "Ready." in html


def test_anonymous_visitors_are_sent_to_login(client, stored):
    response = client.get(reverse("explorer:live", args=[stored.pk]))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_viewers_cannot_start_turns(viewer_client, stored):
    response = viewer_client.post(reverse("explorer:live_turn", args=[stored.pk]), {"text": "hi"})
    assert response.status_code == 403


def test_a_turn_without_provider_is_refused_with_a_message(editor_client, stored, settings):
    settings.SESSIONS_LLM = {"SESSIONS_LLM_BASE_URL": ""}
    url = reverse("explorer:live_turn", args=[stored.pk])
    response = editor_client.post(url, {"text": "hi"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 503
    assert "No model provider is configured" in response.content.decode()
    # Without JavaScript: back to the page with the message.
    response = editor_client.post(url, {"text": "hi"}, follow=True)
    assert "No model provider is configured" in response.content.decode()


def test_an_empty_message_is_refused(editor_client, stored, settings):
    settings.SESSIONS_LLM = {"SESSIONS_LLM_BASE_URL": "http://127.0.0.1:9/v1"}
    response = editor_client.post(
        reverse("explorer:live_turn", args=[stored.pk]), {"text": "  "}, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 400
    assert "Type a message first." in response.content.decode()


def test_cancel_without_a_running_turn(editor_client, stored):
    response = editor_client.post(
        reverse("explorer:live_cancel", args=[stored.pk]), HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 200
    assert "No turn is running." in response.content.decode()


def test_a_missing_session_is_404(viewer_client, stored):
    assert viewer_client.get(reverse("explorer:live", args=[stored.pk + 99])).status_code == 404


def test_the_turn_buttons_use_the_site_button_style(editor_client, stored, settings):
    import re

    settings.SESSIONS_LLM = {"SESSIONS_LLM_BASE_URL": "http://127.0.0.1:9/v1"}
    html = editor_client.get(reverse("explorer:live", args=[stored.pk])).content.decode()
    for button_id in ("send-turn", "cancel-turn"):
        tag = re.search(rf'<button[^>]*id="{button_id}"[^>]*>', html, re.S).group(0)
        assert re.search(r'class="[^"]*\bbutton\b', tag), tag


@pytest.mark.django_db(transaction=True)
def test_the_live_page_weighs_the_same_for_500_or_20000_entries(viewer_client, tmp_path):
    """A correctness bound, not a timing: the page is a window of the route and a paged
    tree, so 40 times the entries must not mean 40 times the HTML."""
    from benchmarks.gen_session import generate_session
    from explorer import services

    sizes = {}
    for n in (500, 20_000):
        path = tmp_path / f"s{n}.jsonl"
        generate_session(str(path), entries=n, branch_points=20, seed=n)
        result = services.import_file(str(path), source_path=str(path), user=None)
        assert result.ok
        response = viewer_client.get(reverse("explorer:live", args=[result.session.pk]))
        assert response.status_code == 200
        body = response.content.decode()
        assert body.count('class="t-entry') <= 60
        sizes[n] = len(response.content)
    print("live page bytes", sizes)
    assert sizes[20_000] < 2 * sizes[500], sizes


def test_a_header_only_session_says_no_entries_yet_and_draws_no_graph(viewer_client, make_session):
    header = (
        b'{"type":"session","version":3,"id":"0195f3a2-0000-7d2e-9b1a-00000000beef",'
        b'"timestamp":"2025-03-04T05:06:07.089Z","cwd":"/p"}\n'
    )
    session = make_session(header)
    html = viewer_client.get(reverse("explorer:live", args=[session.pk])).content.decode()
    assert "This session has no entries yet." in html
    assert 'id="live-graph"' not in html and 'class="legend' not in html
    assert 'id="transcript"' in html  # arrivals still have somewhere to go
