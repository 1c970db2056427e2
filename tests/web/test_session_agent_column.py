"""`Session.agent` is a column: set when a session is created, read by the list's filter, its
badge and its JSON, and filled for sessions stored before it (migration 0020)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection

from explorer.models import Session
from tests.conftest import SMALL_SESSION
from tests.session.agent_files import claude_code_session, codex_session
from tests.web.migration_states import migration_states

pytestmark = pytest.mark.django_db

OLD = [("explorer", "0019_archived_branches")]
NEW = [("explorer", "0020_session_agent")]


def _three(tmp_path) -> None:
    codex_session(tmp_path / "codex", turns=3, compact_at=(), rollback_at=2, big_at=0)
    claude_code_session(tmp_path / "cc", turns=3, compact_at=(), rewind_at=2, agent_at=0, big_at=0)
    (tmp_path / "small.jsonl").write_bytes(SMALL_SESSION)
    call_command(
        "import_sessions",
        str(tmp_path / "codex"),
        str(tmp_path / "cc"),
        str(tmp_path / "small.jsonl"),
    )


def test_the_column_is_set_when_a_session_is_created(tmp_path):
    _three(tmp_path)
    stored = dict(Session.objects.values_list("session_id", "agent"))
    # The Claude Code folder holds a sub-agent file too: its own session.
    assert sorted(stored.values()) == ["claude-code", "claude-code", "codex", "pi"]
    for session_id, agent in stored.items():
        expected = session_id.split(":", 1)[0] if ":" in session_id else "pi"
        assert agent == expected


def test_list_filter_badge_and_json_read_the_column(tmp_path, viewer_client):
    _three(tmp_path)
    codex = Session.objects.get(agent="codex")
    # The column, not the id's prefix, decides: a session whose column says Pi is a Pi one.
    Session.objects.filter(pk=codex.pk).update(agent="pi")

    def agents(agent: str) -> list[tuple[str, str]]:
        page = viewer_client.get("/", {"agent": agent, "format": "json"}).json()
        return sorted((s["id"].split(":", 1)[0], s["agent"]) for s in page["sessions"])

    assert [a for _, a in agents("pi")] == ["pi", "pi"]
    assert agents("codex") == []
    assert [a for _, a in agents("claude-code")] == ["claude-code", "claude-code"]
    page = viewer_client.get("/?agent=pi").content.decode()
    assert page.count('class="badge agent"') == 2 and ">Codex</span>" not in page


def test_an_unknown_filter_value_lists_every_session(tmp_path, viewer_client):
    _three(tmp_path)
    page = viewer_client.get("/", {"agent": "nonsense", "format": "json"}).json()
    assert len(page["sessions"]) == 4


@pytest.mark.django_db(transaction=True)
def test_migration_0020_fills_the_column_from_the_stored_ids():
    """At 0019 (historical models only, never today's code) three sessions are stored; 0020
    gives each its agent from its id's prefix; going back drops the column again."""
    with migration_states() as migrate:
        OldSession = migrate(OLD).get_model("explorer", "Session")
        for sid in ("codex:019a-old", "claude-code:7d1c-old", "0195f3a2-old-pi"):
            OldSession.objects.create(session_id=sid, header_raw="{}")
        NewSession = migrate(NEW).get_model("explorer", "Session")
        found = dict(NewSession.objects.values_list("session_id", "agent"))
        assert found == {
            "codex:019a-old": "codex",
            "claude-code:7d1c-old": "claude-code",
            "0195f3a2-old-pi": "pi",
        }
        migrate(OLD)
        with connection.cursor() as cur:
            columns = [
                c.name
                for c in connection.introspection.get_table_description(cur, "explorer_session")
            ]
        assert "agent" not in columns
    # Forward again, today's reads see the filled column.
    assert Session.objects.filter(agent="codex").get().session_id == "codex:019a-old"
    assert Session.objects.get(session_id="0195f3a2-old-pi").agent == "pi"


def test_the_admin_lists_and_filters_sessions_by_agent(tmp_path, admin_client):
    _three(tmp_path)
    page = admin_client.get("/admin/explorer/session/", {"agent__exact": "codex"})
    assert page.status_code == 200
    body = page.content.decode()
    assert "codex:" in body and "claude-code:" not in body
