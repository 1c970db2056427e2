"""manage.py import_sessions with Claude Code project folders and Codex session folders:
stored as their Pi form, idempotent and incremental, original bytes kept, agent shown."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from explorer.models import Entry, Session
from tests.conftest import SMALL_SESSION
from tests.session.agent_files import claude_code_session, codex_session

pytestmark = pytest.mark.django_db


def _codex_line(kind: str, payload: dict, second: int) -> bytes:
    stamp = f"2026-10-12T10:00:{second:02d}.000Z"
    return json.dumps({"timestamp": stamp, "type": kind, "payload": payload}).encode() + b"\n"


def _codex_turn(n: int) -> bytes:
    return b"".join(
        [
            _codex_line(
                "response_item",
                {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": f"q{n}"}],
                },
                n,
            ),
            _codex_line(
                "response_item",
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": f"a{n}"}],
                },
                n,
            ),
            _codex_line(
                "event_msg",
                {
                    "type": "token_count",
                    "info": {
                        "total_token_usage": {"input_tokens": 100 * n},
                        "last_token_usage": {
                            "input_tokens": 100,
                            "cached_input_tokens": 40,
                            "output_tokens": 7,
                        },
                    },
                },
                n,
            ),
        ]
    )


def test_claude_code_and_codex_folders_import_beside_pi_files(tmp_path, capsys):
    projects = tmp_path / "claude" / "projects"
    main, facts, agent = claude_code_session(
        projects / "-home-dev-generated",
        turns=30,
        compact_at=(10, 20),
        rewind_at=5,
        agent_at=3,
        big_at=0,
    )
    codex_root = tmp_path / "codex"
    rollout, codex_facts = codex_session(
        codex_root, turns=12, compact_at=(6,), rollback_at=4, big_at=0
    )
    pi_dir = tmp_path / "pi"
    pi_dir.mkdir()
    (pi_dir / "small.jsonl").write_bytes(SMALL_SESSION)

    call_command("import_sessions", str(projects), str(codex_root), str(pi_dir))
    # Four sessions: the main one, its sub-agent, the rollout and the Pi file.
    assert "4 new, 0 grown, 0 unchanged, 0 rejected" in capsys.readouterr().out
    assert Session.objects.count() == 4
    by_agent = {s.agent: s for s in Session.objects.exclude(session_id__contains=":agent-")}
    assert set(by_agent) == {"pi", "claude-code", "codex"}

    claude = Session.objects.get(session_id="claude-code:7d1c0c57-0000-4000-8000-00000000c0de")
    assert claude.name == "Generated session"
    assert claude.entry_count == facts.records and claude.leaf_count == len(facts.routes)
    assert bytes(claude.source_original) == main.read_bytes()
    # The reading rules' findings are stored with the original file's line numbers.
    lines = set(claude.problems.values_list("line", flat=True))
    assert set(facts.skipped_lines) <= lines
    # Costs are estimates from the price list, stored like recorded ones.
    assert sum(Entry.objects.filter(session=claude).values_list("cost", flat=True)) > 0
    sub = Session.objects.get(session_id__endswith=":agent-a9e7")
    assert sub.agent == "claude-code" and sub.name == "Look"
    assert bytes(sub.source_original) == agent.read_bytes()

    codex = by_agent["codex"]
    assert codex.entry_count == codex_facts.records
    assert codex.leaf_count == len(codex_facts.routes)
    assert by_agent["pi"].session_id == "0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a2b"

    call_command("import_sessions", str(projects), str(codex_root), str(pi_dir))
    assert "0 new, 0 grown, 4 unchanged, 0 rejected" in capsys.readouterr().out


def test_a_grown_codex_file_adds_only_its_new_entries(tmp_path, capsys):
    day = tmp_path / "sessions" / "2026" / "10" / "12"
    day.mkdir(parents=True)
    path = day / "rollout-2026-10-12T10-00-00-019a2000-0000-7000-8000-00000000abcd.jsonl"
    meta = _codex_line(
        "session_meta",
        {
            "id": "019a2000-0000-7000-8000-00000000abcd",
            "timestamp": "2026-10-12T10:00:00Z",
            "cwd": "/w",
        },
        0,
    )
    path.write_bytes(meta + _codex_turn(1) + _codex_turn(2))
    call_command("import_sessions", str(tmp_path / "sessions"))
    session = Session.objects.get(session_id__startswith="codex:")
    assert session.entry_count == 4
    first_ids = list(Entry.objects.filter(session=session).values_list("entry_id", "raw"))
    with path.open("ab") as fh:
        fh.write(_codex_turn(3))
    call_command("import_sessions", str(tmp_path / "sessions"))
    assert "0 new, 1 grown, 0 unchanged" in capsys.readouterr().out
    session.refresh_from_db()
    assert session.entry_count == 6
    # Earlier entries are unchanged rows; the original bytes follow the file.
    assert (
        list(Entry.objects.filter(session=session).values_list("entry_id", "raw"))[:4] == first_ids
    )
    assert bytes(session.source_original) == path.read_bytes()


def test_the_session_list_shows_each_sessions_agent(tmp_path, viewer_client):
    codex_session(tmp_path / "codex", turns=3, compact_at=(), rollback_at=2, big_at=0)
    (tmp_path / "small.jsonl").write_bytes(SMALL_SESSION)
    call_command("import_sessions", str(tmp_path / "codex"), str(tmp_path / "small.jsonl"))
    page = viewer_client.get("/").content.decode()
    assert page.count('class="badge agent"') == 2
    assert ">Codex</span>" in page and ">Pi</span>" in page


def test_the_session_list_filters_by_agent(tmp_path, viewer_client):
    codex_session(tmp_path / "codex", turns=3, compact_at=(), rollback_at=2, big_at=0)
    (tmp_path / "small.jsonl").write_bytes(SMALL_SESSION)
    call_command("import_sessions", str(tmp_path / "codex"), str(tmp_path / "small.jsonl"))

    def ids(agent: str) -> list[str]:
        page = viewer_client.get("/", {"agent": agent, "format": "json"}).json()
        return sorted(s["agent"] for s in page["sessions"])

    assert ids("codex") == ["codex"]
    assert ids("pi") == ["pi"]
    assert ids("") == ["codex", "pi"]
    assert ids("nonsense") == ["codex", "pi"]
    assert 'option value="codex" selected' in viewer_client.get("/?agent=codex").content.decode()


def test_a_claude_code_session_exports_its_original_file(tmp_path, admin_client):
    main, _, _ = claude_code_session(
        tmp_path / "p", turns=6, compact_at=(3,), rewind_at=2, agent_at=1, big_at=0
    )
    call_command("import_sessions", str(main))
    session = Session.objects.get()
    response = admin_client.get(f"/sessions/{session.pk}/export.jsonl")
    assert b"".join(response.streaming_content) == main.read_bytes()
    pi_form = admin_client.get(f"/sessions/{session.pk}/export.jsonl", {"form": "pi"})
    first = b"".join(pi_form.streaming_content).split(b"\n", 1)[0]
    assert json.loads(first)["type"] == "session"


def test_the_upload_page_takes_claude_code_and_codex_files(tmp_path, admin_client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    main, facts, agent = claude_code_session(
        tmp_path / "p", turns=6, compact_at=(3,), rewind_at=2, agent_at=1, big_at=0
    )
    rollout, _ = codex_session(tmp_path / "c", turns=3, compact_at=(), rollback_at=2, big_at=0)
    uploads = [SimpleUploadedFile(path.name, path.read_bytes()) for path in (main, agent, rollout)]
    response = admin_client.post("/import/", {"files": uploads})
    assert response.status_code == 200, response.content[:500]
    agents = sorted(s.agent for s in Session.objects.all())
    assert agents == ["claude-code", "claude-code", "codex"]
    # The sub-agent file is its own session, told apart from its main one by its name.
    assert Session.objects.filter(session_id__endswith=":agent-a9e7").count() == 1
    main_session = Session.objects.get(
        session_id="claude-code:7d1c0c57-0000-4000-8000-00000000c0de"
    )
    assert main_session.entry_count == facts.records
    assert bytes(main_session.source_original) == main.read_bytes()


READ_PAGES = [
    "",
    "graph.svg",
    "transcript/",
    "context/",
    "compactions/",
    "compare/",
    "timeline/",
    "search/?q=turn",
    "integrity/",
    "problems/",
    "stats/",
    "secrets/",
    "review/",
    "export.html",
]


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_every_read_page_answers_for_an_imported_session(agent, tmp_path, admin_client):
    """Server side only (the Chromium run of every page is the web half's): each page of a
    stored Claude Code or Codex session renders."""
    if agent == "claude-code":
        claude_code_session(
            tmp_path / "p", turns=8, compact_at=(4,), rewind_at=2, agent_at=1, big_at=0
        )
    else:
        codex_session(tmp_path / "p", turns=8, compact_at=(4,), rollback_at=2, big_at=0)
    call_command("import_sessions", str(tmp_path / "p"))
    session = Session.objects.exclude(session_id__contains=":agent-").get(
        session_id__startswith=f"{agent}:"
    )
    for page in READ_PAGES:
        response = admin_client.get(f"/sessions/{session.pk}/{page}")
        assert response.status_code == 200, (page, response.status_code)
    # The session's pages say its costs are estimates and from which price list.
    page = admin_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "Costs are estimates priced with genai-prices" in page
    assert ("derived from the records" in page) == (agent == "claude-code")


def test_a_rename_in_the_app_survives_the_files_growth(tmp_path, capsys, admin_user):
    from explorer import services

    main, _, _ = claude_code_session(
        tmp_path / "p", turns=4, compact_at=(), rewind_at=2, agent_at=1, big_at=0
    )
    data = main.read_bytes()
    cut = data.rfind(b"\n")  # drop the crash's half line so the file can grow cleanly
    main.write_bytes(data[: cut + 1])
    call_command("import_sessions", str(main))
    session = Session.objects.get()
    assert session.name == "Generated session"
    services.rename_session(session, admin_user, "Our name")
    with main.open("ab") as fh:
        fh.write(
            json.dumps(
                {
                    "type": "user",
                    "uuid": "later-1",
                    "parentUuid": None,
                    "sessionId": "7d1c0c57-0000-4000-8000-00000000c0de",
                    "timestamp": "2026-11-02T00:00:00.000Z",
                    "message": {"role": "user", "content": "later"},
                }
            ).encode()
            + b"\n"
        )
    call_command("import_sessions", str(main))
    assert "1 grown" in capsys.readouterr().out
    session.refresh_from_db()
    assert session.name == "Our name"
    assert Entry.objects.filter(session=session, entry_id="later-1").exists()


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_route_continues_as_a_valid_pi_session(agent, tmp_path, admin_client):
    """The route's download (*Download this branch*) of a stored Claude Code or Codex session is
    a Pi v3 file the engine validates, that imports as a Pi session, and whose projection is the
    stored form's at that leaf."""
    from explorer.session.diagnostics import validate_bytes
    from explorer.session.formats import load_foreign
    from explorer.session.manager import SessionManager

    if agent == "claude-code":
        path = claude_code_session(
            tmp_path / "p", turns=8, compact_at=(4,), rewind_at=2, agent_at=1, big_at=0
        )[0]
    else:
        path = codex_session(tmp_path / "p", turns=8, compact_at=(4,), rollback_at=2, big_at=0)[0]
    call_command("import_sessions", str(path))
    session = Session.objects.exclude(session_id__contains=":agent-").get()
    foreign = load_foreign(str(path))
    leaf = foreign.current_leaf
    response = admin_client.get(f"/sessions/{session.pk}/branch.jsonl", {"leaf": leaf})
    data = b"".join(response.streaming_content) if response.streaming else response.content
    assert [p for p in validate_bytes(data).problems if p.severity == "error"] == []
    manager = SessionManager.load_readonly(data)
    assert manager.get_leaf_id() == leaf
    assert [e["id"] for e in manager.get_branch()] == [r.id for r in foreign.route(leaf)]
    if agent == "claude-code":
        boundary_of = {v: k for k, v in foreign.summary_of.items()}
        projected = [
            p.source_entry["id"]
            for p in manager.build_session_projection().entries
            for _ in p.messages
        ]
        assert projected == [boundary_of.get(i, i) for i, _ in foreign.context(leaf)]
    continued = admin_client.post(f"/sessions/{session.pk}/branch.jsonl", {"leaf": leaf})
    assert continued.status_code == 302
    assert Session.objects.exclude(session_id__contains=":").get().agent == "pi"


def test_what_the_model_saw_is_not_edited_in_a_stored_agent_file(tmp_path, admin_user):
    from explorer import services, turns
    from explorer.session.errors import SessionError

    codex_session(tmp_path / "c", turns=3, compact_at=(), rollback_at=2, big_at=0)
    call_command("import_sessions", str(tmp_path / "c"))
    session = Session.objects.get()
    before = session.entry_count
    target = Entry.objects.filter(session=session).order_by("position").first().entry_id
    with pytest.raises(SessionError, match="Codex session: what its model saw is not edited"):
        services.add_context_edit(session, admin_user, target, None)
    with pytest.raises(SessionError, match="compaction"):
        services.compact_now(session, admin_user)
    with pytest.raises(turns.TurnError, match="a new turn"):
        turns.start_turn(session, admin_user, "hello", background=False)
    assert Entry.objects.filter(session=session).count() == before
    # Labels and names are site data: allowed.
    services.set_label(session, admin_user, target, "start")
    assert Entry.objects.filter(session=session, type="label").count() == 1


def test_a_claude_code_workflow_journal_is_skipped_in_a_project_folder(tmp_path, capsys):
    main, _, _ = claude_code_session(
        tmp_path / "p", turns=3, compact_at=(), rewind_at=2, agent_at=1, big_at=0
    )
    run = main.parent / main.stem / "subagents" / "workflows" / "wf_1"
    run.mkdir(parents=True)
    (run / "journal.jsonl").write_text('{"type": "started", "key": "v2:a", "agentId": "a1"}\n')
    call_command("import_sessions", str(tmp_path / "p"))
    out = capsys.readouterr().out
    assert "journal.jsonl: skipped, a Claude Code workflow journal" in out
    assert "2 new, 0 grown, 0 unchanged, 0 rejected" in out


def test_a_codex_session_is_named_by_its_first_typed_turn(tmp_path, viewer_client):
    """A rollout carries no title: the list names it by the first turn the user typed,
    not by the injected environment context Codex writes as a user message before it."""
    thread = "019a2000-0000-7000-8000-0000000000f7"
    injected = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "<environment_context><cwd>/w</cwd>"}],
    }
    data = (
        _codex_line("session_meta", {"id": thread, "cwd": "/w"}, 0)
        + _codex_line("response_item", injected, 0)
        + _codex_turn(1)
    )
    path = tmp_path / f"rollout-2026-10-12T10-00-00-{thread}.jsonl"
    path.write_bytes(data)
    call_command("import_sessions", str(path))
    [row] = viewer_client.get("/", {"format": "json"}).json()["sessions"]
    assert row["name"] == "q1"
    assert "environment_context" not in viewer_client.get("/").content.decode()
