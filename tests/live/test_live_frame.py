"""Live is a tab of the session frame; Cancel only while a turn runs; errors in words."""

from __future__ import annotations

import pytest
from django.urls import reverse

from explorer import html
from explorer.session.describe import error_in_words

pytestmark = pytest.mark.django_db


def test_live_is_a_tab_of_the_session_frame(editor_client, make_session, settings):
    settings.SESSIONS_LLM = {"SESSIONS_LLM_BASE_URL": "http://127.0.0.1:9/v1"}
    session = make_session()
    page = editor_client.get(reverse("explorer:live", args=[session.pk])).content.decode()
    # The frame: header with the session's name and actions, and the tab bar with Live current.
    assert 'id="session-name"' in page and "Export JSONL" in page
    assert f'href="/sessions/{session.pk}/live/" aria-current="page" data-key="live"' in page
    assert f'href="/sessions/{session.pk}/transcript/"' in page
    # No turn runs: Cancel is there but disabled.
    cancel = page[page.index('id="cancel-turn"') : page.index(">Cancel</button>")]
    assert "disabled" in cancel
    tree = editor_client.get(reverse("explorer:session_detail", args=[session.pk]))
    assert 'data-key="live"' in tree.content.decode()


def test_model_errors_are_said_in_words_with_the_stored_text_beside():
    refused = "ConnectionRefusedError: [Errno 111] Connection refused"
    assert error_in_words(refused).startswith("The model server refused the connection")
    assert "API key" in error_in_words("401 Unauthorized: bad key")
    assert error_in_words("something new") == "something new"
    assert error_in_words(None) == ""
    end = str(html.turn_swap({"event": "end", "stop_reason": "error", "error_message": refused}))
    assert "refused the connection" in end and "[Errno 111]" in end and "turn-status error" in end
    failed = str(html.turn_swap({"event": "error", "message": f"The turn failed: {refused}"}))
    assert "The turn failed: The model server refused the connection" in failed
