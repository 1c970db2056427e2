"""A reply of thinking alone (a Claude Code thinking record, a Codex reasoning item) is named
by its thinking in the tree, the graph and every row titled by ``entry_title``, not by its
stop reason ("stop"), and it is not taken for a tool call by the "No tools" filter."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from explorer import agent_import
from explorer.models import Session
from explorer.session.describe import entry_title
from tests.web.test_tool_pairs import CLAUDE, CODEX


def _reply(content: list, **extra) -> dict:
    return {"type": "message", "id": "a", "parentId": None,
            "message": {"role": "assistant", "content": content, "stopReason": "stop", **extra}}  # fmt: skip


def test_a_thinking_only_reply_is_titled_by_its_thinking():
    thought = {"type": "thinking", "thinking": "  Use a\n token bucket.  "}
    assert entry_title(_reply([thought])) == "(thinking) Use a token bucket."
    assert entry_title(_reply([{"type": "thinking", "thinking": ""}])) == "(thinking)"
    # Thinking beside text or a call: the text and the call name it, as before.
    assert entry_title(_reply([thought, {"type": "text", "text": "Done."}])) == "Done."
    call = {"type": "toolCall", "id": "c", "name": "read", "arguments": {}}
    assert entry_title(_reply([thought, call])) == "[read]"
    # No content at all, or an error: as before.
    assert entry_title(_reply([])) == "stop"
    assert entry_title(_reply([thought], errorMessage="overloaded")) == "overloaded"
    # A thought of megabytes is cut to the line.
    big = {"type": "thinking", "thinking": "word " * 1_000_000}
    assert len(entry_title(_reply([big]), 80)) == 80


@pytest.mark.django_db
@pytest.mark.agent_fixtures
@pytest.mark.parametrize(
    ("path", "title"),
    [(CLAUDE, "(thinking) Use a token bucket per API key."),
     (CODEX, "(thinking) Check the CHANGELOG format")],
    ids=["claude-code", "codex"],
)  # fmt: skip
def test_the_tree_names_a_thinking_record_by_its_thinking(path, title, viewer_client):
    agent_import.import_agent_file(str(path))
    (session,) = Session.objects.exclude(agent="pi")
    html = viewer_client.get(reverse("explorer:session_detail", args=[session.pk])).content
    html = html.decode()
    rows = re.findall(r'<li [^>]*data-tool="(\w+)"[^>]*>(.*?)</li>', html, re.S)
    shown = [(tool, row) for tool, row in rows if title in row]
    assert shown, "no tree row names the thinking record by its thinking"
    assert all(tool == "0" for tool, _row in shown)


@pytest.mark.django_db
@pytest.mark.agent_fixtures
def test_the_kept_tail_names_messages_by_role_as_the_replaced_list_does(viewer_client):
    """The Compactions tab listed the replaced entries by role ("user") but the kept tail by
    entry type ("message" for every message)."""
    agent_import.import_agent_file(str(CLAUDE))
    (session,) = Session.objects.exclude(agent="pi")
    body = viewer_client.get(reverse("explorer:compactions", args=[session.pk])).content.decode()
    kept = re.search(r'<ol class="kept-list small">(.*?)</ol>', body, re.S)
    assert kept is not None
    pills = re.findall(r'<span class="pill pill-(\w+)">(\w+)</span>', kept.group(1))
    assert pills and ("user", "user") in pills and ("assistant", "assistant") in pills
    assert ("message", "message") not in pills
