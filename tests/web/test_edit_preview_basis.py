"""The context-edit preview compares one basis: the engine's estimate before and after the
edit (every message estimated). The provider's figure is shown apart and labelled; it once
stood as the "before" of an estimate (1,920 → 34 for hiding a 35-token message)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from explorer.session.describe import tokens_of
from explorer.session.messages import session_entry_to_context_messages
from tests.conftest import SMALL_SESSION

pytestmark = pytest.mark.django_db

# The small session up to its last answer (reported: 1,312 tokens), with no edit yet, so the
# engine's figure before the edit is the provider's usage.
ANSWERED = b"".join(SMALL_SESSION.splitlines(keepends=True)[:5])
TOOL_RESULT = {
    "type": "message",
    "message": {"role": "toolResult", "toolCallId": "call_1", "toolName": "read",
                "content": [{"type": "text", "text": "hello world"}], "isError": False},
}  # fmt: skip


def test_hiding_a_message_previews_its_own_size_not_the_provider_figure(
    editor_client, make_session
):
    session = make_session(ANSWERED)
    url = reverse("explorer:edit", args=[session.pk])
    data = editor_client.get(url, {"target": "c3d4e5f6", "mode": "hide", "format": "json"}).json()
    preview = data["preview"]
    hidden = tokens_of(session_entry_to_context_messages(TOOL_RESULT))
    assert hidden > 0
    assert preview["delta"] == -hidden == preview["after_tokens"] - preview["before_tokens"]
    assert preview["before_tokens"] < 1312  # an estimate, not the provider's count
    assert preview["before_reported"] == 1312 == preview["before_engine"]

    html = editor_client.get(url, {"target": "c3d4e5f6", "mode": "hide"}).content.decode()
    assert f'<span id="preview-delta" class="good">-{hidden}</span>' in html
    assert "Provider-reported context of the last answer before the edit" in html
    assert "1312" in html.split('id="preview-reported"')[1].split("</div>")[0]


def test_the_effect_badge_does_not_repeat_itself(editor_client, make_session):
    session = make_session(ANSWERED)
    html = editor_client.get(
        reverse("explorer:edit", args=[session.pk]), {"target": "c3d4e5f6", "mode": "hide"}
    ).content.decode()
    effect = html.split('id="preview-effect"')[1].split("</div>")[0]
    assert "hidden hidden" not in effect and "(preview)" not in effect
    assert 'badge st-hidden">hidden</span> the model will no longer see this entry' in effect
