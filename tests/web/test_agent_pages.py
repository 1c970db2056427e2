"""The pages of a stored Claude Code or Codex session, as an editor sees them: what the model saw
is not offered for editing (context edits, compaction, turns, Undo), site data is (labels,
renames, comments, archives); a route continues as a Pi session that is edited instead."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from explorer.models import Entry, Session
from tests.conftest import FIXTURES_DIR
from tests.session.agent_files import claude_code_session, codex_session

pytestmark = pytest.mark.django_db

CC_EDGE = FIXTURES_DIR / "claude-code" / "claude-code-log" / "edge_cases.jsonl"

TABS = [
    "",
    "transcript/",
    "context/",
    "compactions/",
    "compare/",
    "timeline/",
    "search/?q=turn",
    "integrity/",
    "problems/",
    "secrets/",
    "review/",
    "live/",
]

# What an editor is offered on a Pi session's pages and never on an agent's: the edit form,
# the Undo form, the compaction form, the summary on leaving a route, the turn form.
MODEL_EDIT_MARKS = ("/edit/?", "/undo/", "/compact/", "/navigate/?target", 'id="turn-form"')


def _imported(agent: str, tmp_path) -> Session:
    if agent == "claude-code":
        claude_code_session(
            tmp_path / "p", turns=8, compact_at=(4,), rewind_at=2, agent_at=1, big_at=0
        )
    else:
        codex_session(tmp_path / "p", turns=8, compact_at=(4,), rollback_at=2, big_at=0)
    call_command("import_sessions", str(tmp_path / "p"))
    return Session.objects.exclude(session_id__contains=":agent-").get(
        session_id__startswith=f"{agent}:"
    )


def _first_message(session: Session) -> str:
    return (
        Entry.objects.filter(session=session, type="message", depth__gt=0)
        .order_by("position")
        .first()
        .entry_id
    )


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_no_tab_offers_an_editor_to_edit_what_the_agent_sent(agent, tmp_path, editor_client):
    session = _imported(agent, tmp_path)
    off_route = [
        e.entry_id
        for e in Entry.objects.filter(session=session, type="message").order_by("-position")[:40]
    ]
    target = _first_message(session)
    pages = [*TABS, f"entry/?id={target}", *(f"entry/?id={e}" for e in off_route)]
    for page in pages:
        response = editor_client.get(f"/sessions/{session.pk}/{page}")
        assert response.status_code == 200, page
        body = response.content.decode()
        for mark in MODEL_EDIT_MARKS:
            assert mark not in body, (page, mark)
    # Site data stays editable: label, rename, archive, comments.
    panel = editor_client.get(f"/sessions/{session.pk}/entry/?id={target}").content.decode()
    assert "/label/?target=" in panel
    page = editor_client.get(f"/sessions/{session.pk}/").content.decode()
    assert f"/sessions/{session.pk}/rename/" in page
    live = editor_client.get(f"/sessions/{session.pk}/live/").content.decode()
    assert "continue a route as a Pi session to send messages" in live
    review = editor_client.get(f"/sessions/{session.pk}/review/?entry={target}")
    assert review.status_code == 200


def test_a_pi_session_still_offers_them(editor_client, make_session):
    """The same marks are there on a Pi session (the test above can fail)."""
    session = make_session()
    compactions = editor_client.get(f"/sessions/{session.pk}/compactions/").content.decode()
    assert "/compact/" in compactions
    live = editor_client.get(f"/sessions/{session.pk}/live/").content.decode()
    assert 'id="turn-form"' in live
    target = Entry.objects.filter(session=session, type="message").order_by("position").first()
    context = editor_client.get(f"/sessions/{session.pk}/context/").content.decode()
    panel = editor_client.get(f"/sessions/{session.pk}/entry/?id={target.entry_id}")
    assert "/edit/?" in context or "/edit/?" in panel.content.decode()


def _codex_line(kind: str, payload: dict) -> bytes:
    record = {"timestamp": "2026-10-12T10:00:00.000Z", "type": kind, "payload": payload}
    return json.dumps(record).encode() + b"\n"


def _codex_user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


@pytest.mark.agent_fixtures
def test_integrity_lists_what_the_claude_code_reading_rules_found(viewer_client):
    """The shared edge-case file: two duplicate uuids and a dangling parent, on the Integrity tab
    and in its JSON, with the original file's line numbers."""
    call_command("import_sessions", str(CC_EDGE))
    session = Session.objects.get()
    page = viewer_client.get(f"/sessions/{session.pk}/integrity/").content.decode()
    assert "Duplicate uuids" in page and "of the Claude Code file" in page
    data = viewer_client.get(f"/sessions/{session.pk}/integrity/?format=json").json()
    found = {s["key"]: s for s in data["sections"]}
    assert len(found["cc-duplicates"]["items"]) == 2
    assert [i["code"] for i in found["cc-dangling"]["items"]] == ["dangling-parent"]
    assert found["cc-cycles"]["items"] == []
    assert found["cc-duplicates"]["agent"] == "claude-code"
    line = found["cc-dangling"]["items"][0]["line"]
    record = json.loads(CC_EDGE.read_bytes().split(b"\n")[line - 1])
    assert record["uuid"] == found["cc-dangling"]["items"][0]["id"]
    assert data["total"] >= 3


def test_integrity_checks_codex_compaction_history_against_the_route(tmp_path, viewer_client):
    meta = _codex_line("session_meta", {"id": "019a2000-0000-7000-8000-0000000000ab", "cwd": "/w"})
    body = (
        _codex_line("response_item", _codex_user("kept"))
        + _codex_line("event_msg", {"type": "thread_rolled_back", "num_turns": 1})
        + _codex_line("response_item", _codex_user("other branch"))
    )
    history = [_codex_user("kept"), _codex_user("S")]
    bad = _codex_line("compacted", {"message": "", "replacement_history": history})
    path = tmp_path / "rollout-2026-10-12T10-00-00-019a2000-0000-7000-8000-0000000000ab.jsonl"
    path.write_bytes(meta + body + bad)
    call_command("import_sessions", str(path))
    session = Session.objects.get()
    data = viewer_client.get(f"/sessions/{session.pk}/integrity/?format=json").json()
    [section] = [s for s in data["sections"] if s["key"] == "codex-compaction-history"]
    assert [(i["code"], i["line"]) for i in section["items"]] == [("compaction-history", 5)]
    assert "1 compaction checked" in section["help"]
    page = viewer_client.get(f"/sessions/{session.pk}/integrity/").content.decode()
    assert "Compaction history against the route" in page and "of the Codex file" in page


def test_a_pi_session_has_no_reading_rule_sections(viewer_client, make_session):
    session = make_session()
    data = viewer_client.get(f"/sessions/{session.pk}/integrity/?format=json").json()
    assert not any("agent" in s for s in data["sections"])


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_continue_as_a_pi_session(agent, tmp_path, editor_client, viewer_client):
    """The action on an agent session's pages stores the route as a Pi v3 session that the
    engine validates, whose route and projection are the agent session's at that leaf, that
    an editor may edit, and that links back (and is linked from the agent session)."""
    from explorer import files, queries, services
    from explorer.session.diagnostics import validate_bytes
    from explorer.session.formats import load_foreign
    from explorer.session.manager import SessionManager

    session = _imported(agent, tmp_path)
    path = next(p for p in (tmp_path / "p").rglob("*.jsonl") if "agent-" not in p.name)
    foreign = load_foreign(str(path))
    leaf = foreign.current_leaf
    page = editor_client.get(f"/sessions/{session.pk}/transcript/").content.decode()
    assert "Continue as a Pi session" in page
    assert (
        "Continue as a Pi session"
        not in viewer_client.get(f"/sessions/{session.pk}/transcript/").content.decode()
    )

    response = editor_client.post(f"/sessions/{session.pk}/branch.jsonl", {"leaf": leaf})
    assert response.status_code == 302
    new = Session.objects.exclude(pk=session.pk).exclude(session_id__contains=":agent-").get()
    assert new.agent == "pi" and response.url == f"/sessions/{new.pk}/"

    data = b"".join(files.iter_export(new))
    assert [p for p in validate_bytes(data).problems if p.severity == "error"] == []
    manager = SessionManager.load_readonly(data)
    assert manager.get_header()["version"] == 3
    assert [e["id"] for e in manager.get_branch()] == [r.id for r in foreign.route(leaf)]
    # The projection: what the app shows of the Pi session at its leaf is what it showed of the
    # agent's route for Claude Code (derived). For Codex the agent session shows the history
    # Codex recorded at the compaction, while the Pi copy is projected by Pi's rule (the
    # compaction's summary, then what follows): Pi has no entry for a recorded context.
    mine = queries.context_summary(new, leaf, 200_000, 16_384)
    theirs = queries.context_summary(session, leaf, 200_000, 16_384)
    if agent == "claude-code":
        assert [r["projected"] for r in mine["rows"]] == [r["projected"] for r in theirs["rows"]]
    else:
        mine_roles = [role for r in mine["rows"] for _, role, _ in r["projected"]]
        theirs_roles = [role for r in theirs["rows"] for _, role, _ in r["projected"]]
        assert mine_roles[0] == "compactionSummary" and theirs_roles[0] != "compactionSummary"
        assert len(theirs_roles) == len(foreign.context(leaf))
    if agent == "claude-code":
        boundary_of = {v: k for k, v in foreign.summary_of.items()}
        projected = [
            p.source_entry["id"]
            for p in manager.build_session_projection().entries
            for _ in p.messages
        ]
        assert projected == [boundary_of.get(i, i) for i, _ in foreign.context(leaf)]
    # Links both ways.
    assert (
        f'href="/sessions/{session.pk}/"'
        in editor_client.get(f"/sessions/{new.pk}/").content.decode()
    )
    assert (
        f'href="/sessions/{new.pk}/"'
        in editor_client.get(f"/sessions/{session.pk}/timeline/").content.decode()
    )
    # It is edited like any Pi session: compaction offered, a context edit accepted.
    assert "/compact/" in editor_client.get(f"/sessions/{new.pk}/compactions/").content.decode()
    target = Entry.objects.filter(session=new, type="message").order_by("position").first()
    services.add_context_edit(new, editor_client.user, target.entry_id, None, leaf_id=leaf)
    assert Entry.objects.filter(session=new, type="context_edit").count() == 1


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_every_tab_says_where_its_projection_comes_from(agent, tmp_path, viewer_client):
    """Below the header, in the tab's own content: derived (Claude Code) or read from the file
    (Codex); a Pi session's tabs say nothing of the kind."""
    session = _imported(agent, tmp_path)
    mark = 'data-projection="derived"' if agent == "claude-code" else 'data-projection="recorded"'
    for tab in (t for t in TABS if t != "problems/"):  # Problems is a page, not a tab
        body = viewer_client.get(f"/sessions/{session.pk}/{tab}").content.decode()
        content = body.split('aria-label="Session views"', 1)[1]
        assert content.count(mark) == 1, tab
        assert "data-projection=" not in body.split('aria-label="Session views"', 1)[0], tab


def test_a_pi_sessions_tabs_say_nothing_of_a_source(viewer_client, make_session):
    session = make_session()
    for tab in TABS:
        body = viewer_client.get(f"/sessions/{session.pk}/{tab}").content.decode()
        assert "data-projection=" not in body, tab


@pytest.mark.parametrize(
    ("page", "tab"),
    [
        ("compact/?preview=1", "compactions"),
        ("edit/?target={target}", "context"),
    ],
)
def test_an_edit_form_asked_for_directly_answers_with_the_reason(
    page, tab, tmp_path, editor_client
):
    """Before any preview (a compaction's preview would call the summarizer)."""
    session = _imported("codex", tmp_path)
    before = session.entry_count
    url = f"/sessions/{session.pk}/" + page.format(target=_first_message(session))
    response = editor_client.get(url, follow=True)
    assert response.redirect_chain[-1][0] == f"/sessions/{session.pk}/{tab}/"
    assert "Codex session: what its model saw is not edited here" in response.content.decode()
    undo = editor_client.post(
        f"/sessions/{session.pk}/undo/", {"target": _first_message(session)}, follow=True
    )
    assert "what its model saw is not edited here" in undo.content.decode()
    session.refresh_from_db()
    assert session.entry_count == before
