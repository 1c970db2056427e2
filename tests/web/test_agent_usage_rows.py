"""A Claude Code or Codex reply's usage is shown once, where the import counted it.

Claude Code writes one record per content block of a reply (thinking, text, tool call) and
repeats the reply's usage on each; the import counts it on the last record and marks the
others with ``usageOnEntry``. Codex's token counts land on the entry that was the tip when
they arrived, so a reasoning item carries zeros. Their Transcript rows and entry panels
read "0 reported · $0.0000" and "in 0 · out 0" as if those replies had cost nothing; they
now show no usage (and, for Claude Code, the record that holds it). A Pi entry's recorded
zeros are still shown: that is what Pi wrote.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from explorer import agent_import
from explorer.models import Entry, Session
from tests.conftest import FIXTURES_DIR
from tests.web.test_tool_pairs import CLAUDE, CODEX, _calls, _pi, _user

pytestmark = pytest.mark.django_db


def _zero_usage_replies(session: Session) -> dict[str, dict]:
    """Assistant entries whose stored usage is all zeros, by id, with their messages."""
    out = {}
    for eid, raw in Entry.objects.filter(session=session, role="assistant").values_list(
        "entry_id", "raw"
    ):
        message = json.loads(raw)["message"]
        usage = message.get("usage") or {}
        if not any(usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite")):
            out[eid] = message
    return out


@pytest.mark.agent_fixtures
@pytest.mark.parametrize("path", [CLAUDE, CODEX], ids=["claude-code", "codex"])
def test_a_reply_s_usage_shows_once(path, viewer_client):
    agent_import.import_agent_file(str(path))
    (session,) = Session.objects.exclude(agent="pi")
    zero = _zero_usage_replies(session)
    assert zero, "the example holds replies whose usage is counted on another entry"
    page = viewer_client.get(reverse("explorer:transcript", args=[session.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert any(f'data-entry="{eid}"' in html for eid in zero)  # such a reply is on the page
    assert "0 reported · $0.0000" not in html
    for eid, message in zero.items():
        panel = viewer_client.get(reverse("explorer:entry", args=[session.pk]), {"id": eid})
        text = panel.content.decode()
        assert "in 0 · out 0" not in text, eid
        counted_on = message.get("usageOnEntry")
        if session.agent == "claude-code":
            assert counted_on, eid
            assert "counted on the reply's last record" in text
            assert f"?entry={counted_on}" in text
            assert "usage counted on" in html
        else:
            assert counted_on is None
    # The replies that do carry the usage still show it.
    assert " reported · $" in html


def test_a_pi_reply_s_recorded_zeros_are_shown(viewer_client):
    zero = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
            "cost": {"total": 0}}  # fmt: skip
    reply = _calls("a1", "u1", [])
    reply["message"].update(content=[{"type": "text", "text": "ok"}], usage=zero)
    session = _pi([_user("u1", None, "hi"), reply])
    html = viewer_client.get(
        reverse("explorer:transcript", args=[session.pk]), {"leaf": "a1"}
    ).content.decode()
    assert "0 reported · $0.0000" in html
    panel = viewer_client.get(reverse("explorer:entry", args=[session.pk]), {"id": "a1"})
    assert "in 0 · out 0" in panel.content.decode()


assert FIXTURES_DIR  # the examples' folder (the marker deselects these tests without it)
