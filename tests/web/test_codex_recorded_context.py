"""What the model saw after a Codex compaction: the app's Raw vs projected, Compactions and
Integrity tabs (and their JSON) show the replacement history Codex recorded, from one
projection, and agree with the engine's `context` read from the original file."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from explorer.models import Session
from explorer.session.formats import load_foreign_bytes
from tests.conftest import FIXTURES_DIR
from tests.session.agent_files import codex_session

pytestmark = pytest.mark.django_db

CODEX_OWN = FIXTURES_DIR / "codex" / "own" / "sessions" / "2026" / "10" / "12"
PARENT = CODEX_OWN / "rollout-2026-10-12T10-00-00-019a2000-0000-7000-8000-0000000000e1.jsonl"


def _line(kind: str, payload: dict) -> bytes:
    record = {"timestamp": "2026-10-12T10:00:00.000Z", "type": kind, "payload": payload}
    return json.dumps(record).encode() + b"\n"


def _user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _assistant(text: str) -> dict:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
    }


def _engine_texts(data: bytes, leaf: str) -> list[str]:
    from explorer.session.describe import message_preview

    foreign = load_foreign_bytes(data, "codex")
    return [message_preview(m, 220) for _, m in foreign.context(leaf)]


@pytest.mark.agent_fixtures
def test_context_tab_projects_the_recorded_history_of_the_fixture(viewer_client):
    call_command("import_sessions", str(PARENT))
    session = Session.objects.get()
    data = PARENT.read_bytes()
    leaf = load_foreign_bytes(data, "codex").current_leaf
    view = viewer_client.get(f"/sessions/{session.pk}/context/?leaf={leaf}&format=json").json()
    shown = [text for row in view["rows"] for _, _, text in row["projected"]]
    assert shown == _engine_texts(data, leaf)
    compaction = next(r for r in view["rows"] if r["status"] == "summary")
    assert "context Codex recorded" in compaction["reason"]
    # The history keeps the first typed turn and carries the summary: both are sent.
    assert any("add a CHANGELOG entry for 1.4" in t for t in shown)
    assert any(t.startswith("Summary:") for t in shown)
    page = viewer_client.get(f"/sessions/{session.pk}/context/?leaf={leaf}").content.decode()
    assert "context Codex recorded at this compaction" in page


@pytest.mark.agent_fixtures
def test_compactions_tab_and_json_list_the_recorded_messages(viewer_client):
    call_command("import_sessions", str(PARENT))
    session = Session.objects.get()
    data = viewer_client.get(f"/sessions/{session.pk}/compactions/?format=json").json()
    recorded = data["detail"]["recorded_context"]
    history = next(
        json.loads(line)["payload"]["replacement_history"]
        for line in PARENT.read_bytes().splitlines()
        if b'"compacted"' in line
    )
    assert recorded["items"] == len(history)
    assert recorded["encrypted"] is False
    assert [m["role"] for m in recorded["messages"]] == [i["role"] for i in history]
    page = viewer_client.get(f"/sessions/{session.pk}/compactions/").content.decode()
    assert "Context Codex recorded" in page and 'class="recorded-list' in page


@pytest.mark.agent_fixtures
def test_integrity_compares_each_recorded_history_with_the_engine(viewer_client):
    call_command("import_sessions", str(PARENT))
    session = Session.objects.get()
    data = viewer_client.get(f"/sessions/{session.pk}/integrity/?format=json").json()
    [section] = [s for s in data["sections"] if s["key"] == "codex-recorded-context"]
    assert section["items"] == []
    [row] = section["compactions"]
    # Typed turns on the compaction's route: the first, and the one after the rollback.
    assert (row["typed"], row["kept"], row["dropped"], row["not_typed"]) == (2, 1, 1, 0)
    assert row["agrees"] is True and row["encrypted"] is False
    page = viewer_client.get(f"/sessions/{session.pk}/integrity/").content.decode()
    assert "Recorded context against the engine" in page and "recorded-checks" in page


def test_an_encrypted_compaction_is_shown_as_such_never_guessed(tmp_path, viewer_client):
    thread = "019a2000-0000-7000-8000-0000000000aa"
    encrypted = {"type": "compaction", "encrypted_content": "gAAAAsecret-not-a-summary"}
    data = (
        _line("session_meta", {"id": thread, "cwd": "/w"})
        + _line("response_item", _user("first task"))
        + _line("response_item", _assistant("done first"))
        + _line(
            "compacted", {"message": "", "replacement_history": [_user("first task"), encrypted]}
        )
        + _line("response_item", _user("second task"))
        + _line("response_item", _assistant("done second"))
    )
    path = tmp_path / f"rollout-2026-10-12T10-00-00-{thread}.jsonl"
    path.write_bytes(data)
    call_command("import_sessions", str(path))
    session = Session.objects.get()
    view = viewer_client.get(f"/sessions/{session.pk}/context/?leaf=L6&format=json").json()
    shown = [(role, text) for row in view["rows"] for _, role, text in row["projected"]]
    assert [r for r, _ in shown] == ["user", "compactionSummary", "user", "assistant"]
    assert "encrypted compaction" in shown[1][1]
    assert "gAAAA" not in json.dumps(view)
    assert [t for _, t in shown] == _engine_texts(data, "L6")
    row = next(r for r in view["rows"] if r["status"] == "summary")
    assert "summary encrypted" in row["reason"]
    comp = viewer_client.get(f"/sessions/{session.pk}/compactions/?format=json").json()
    assert comp["detail"]["recorded_context"]["encrypted"] is True
    integ = viewer_client.get(f"/sessions/{session.pk}/integrity/?format=json").json()
    [section] = [s for s in integ["sections"] if s["key"] == "codex-recorded-context"]
    assert section["compactions"][0]["encrypted"] is True
    assert section["compactions"][0]["agrees"] is True


def test_generated_session_every_leaf_agrees_with_the_engine(tmp_path, viewer_client):
    """A generated rollout with two compactions (one encrypted) and a rollback: the context
    shown at each leaf is the engine's, and the tokens after each compaction are those of
    the recorded history, not of a one-message summary."""
    path, _ = codex_session(tmp_path / "p", turns=14, compact_at=(5, 10), rollback_at=3, big_at=0)
    call_command("import_sessions", str(path))
    session = Session.objects.get()
    data = path.read_bytes()
    foreign = load_foreign_bytes(data, "codex")
    for leaf in foreign.leaves():
        view = viewer_client.get(f"/sessions/{session.pk}/context/?leaf={leaf}&format=json")
        shown = [text for row in view.json()["rows"] for _, _, text in row["projected"]]
        assert shown == _engine_texts(data, leaf), leaf
    integ = viewer_client.get(f"/sessions/{session.pk}/integrity/?format=json").json()
    [section] = [s for s in integ["sections"] if s["key"] == "codex-recorded-context"]
    assert len(section["compactions"]) == 2 and section["items"] == []
    assert all(c["agrees"] for c in section["compactions"])


def test_a_pi_session_continued_from_the_route_keeps_pis_rule(tmp_path, editor_client):
    """The recorded history is attached to loaded copies only: the route stored as a Pi
    session projects its compaction as Pi does (the summary)."""
    thread = "019a2000-0000-7000-8000-0000000000ab"
    history = [_user("first task"), _user("Summary: first task done")]
    data = (
        _line("session_meta", {"id": thread, "cwd": "/w"})
        + _line("response_item", _user("first task"))
        + _line("response_item", _assistant("done first"))
        + _line("compacted", {"message": "", "replacement_history": history})
        + _line("response_item", _user("second task"))
    )
    path = tmp_path / f"rollout-2026-10-12T10-00-00-{thread}.jsonl"
    path.write_bytes(data)
    call_command("import_sessions", str(path))
    session = Session.objects.get()
    response = editor_client.post(f"/sessions/{session.pk}/branch.jsonl", {"leaf": "L5"})
    assert response.status_code in (200, 302)
    copy = Session.objects.exclude(pk=session.pk).get()
    view = editor_client.get(f"/sessions/{copy.pk}/context/?leaf=L5&format=json").json()
    roles = [role for row in view["rows"] for _, role, _ in row["projected"]]
    assert roles == ["compactionSummary", "user"]


def test_timeline_after_a_codex_compaction_is_the_engines_figure(tmp_path):
    """The Timeline's projected figure at each reply after a Codex compaction is the
    engine's (``pisession context --leaf``, stored with the entry), not Raw vs projected's.

    It once followed the recorded history like Raw vs projected (34 tokens there against
    the engine's 32 at the last reply here); since the tab reads the stored route figures,
    which are the engine's on the stored lines (a stored line never carries the recorded
    history), the engine's answer is what it shows."""
    from explorer import queries
    from explorer.models import Entry
    from explorer.session import jsonfmt
    from explorer.session.context import projection_from_path
    from explorer.session.tokens import estimate_projected_context_tokens

    path, _ = codex_session(tmp_path / "p", turns=10, compact_at=(4,), rollback_at=2, big_at=0)
    call_command("import_sessions", str(path))
    session = Session.objects.get()
    leaf = queries.default_leaf_id(session)
    figures = queries.timeline_figures(session, leaf)
    after = [p for p in figures["points"] if p.index > next(m.index for m in figures["marks"])]
    assert after
    raw = dict(Entry.objects.filter(session=session).values_list("entry_id", "raw"))
    light = queries.light_path(session, leaf)
    for point in after:
        route = [jsonfmt.loads(raw[e.entry_id]) for e in light[: point.index + 1]]
        engine = estimate_projected_context_tokens(projection_from_path(route), route)
        assert point.projected == int(engine), point


def test_a_joined_forks_own_compaction_shows_its_recorded_history(tmp_path, viewer_client):
    parent_id = "019a2000-0000-7000-8000-0000000000c1"
    fork_id = "019a2000-0000-7000-8000-0000000000c2"
    prefix = _line("response_item", _user("task a")) + _line("response_item", _assistant("did a"))
    parent = _line("session_meta", {"id": parent_id, "cwd": "/w"}) + prefix
    history = [_user("task a"), _user("task c"), _user("Summary: a and c done")]
    fork = (
        _line("session_meta", {"id": fork_id, "cwd": "/w", "forked_from_id": parent_id})
        + _line("session_meta", {"id": parent_id, "cwd": "/w"})
        + prefix
        + _line("response_item", _user("task c"))
        + _line("compacted", {"message": "", "replacement_history": history})
        + _line("response_item", _user("task d"))
    )
    (tmp_path / f"rollout-2026-10-12T10-00-00-{parent_id}.jsonl").write_bytes(parent)
    (tmp_path / f"rollout-2026-10-12T10-30-00-{fork_id}.jsonl").write_bytes(fork)
    call_command("import_sessions", str(tmp_path))
    session = Session.objects.get()
    leaf = f"{fork_id}:L7"
    view = viewer_client.get(f"/sessions/{session.pk}/context/?leaf={leaf}&format=json").json()
    shown = [text for row in view["rows"] for _, _, text in row["projected"]]
    assert shown == _engine_texts(fork, "L7")
    assert shown == ["task a", "task c", "Summary: a and c done", "task d"]


def test_an_append_without_a_compaction_reads_no_history_again(tmp_path, monkeypatch):
    """The recorded histories are kept per compaction count: a grown file whose new lines
    hold no compaction is not parsed again for them (a followed session's every turn)."""
    from explorer import codex_context

    thread = "019a2000-0000-7000-8000-0000000000ac"
    history = [_user("first task"), _user("Summary: done")]
    data = (
        _line("session_meta", {"id": thread, "cwd": "/w"})
        + _line("response_item", _user("first task"))
        + _line("compacted", {"message": "", "replacement_history": history})
    )
    path = tmp_path / f"rollout-2026-10-12T10-00-00-{thread}.jsonl"
    path.write_bytes(data)
    call_command("import_sessions", str(path))
    session = Session.objects.get()
    assert set(codex_context.recorded_histories(session)) == {"L3"}
    path.write_bytes(data + _line("response_item", _user("next")))
    call_command("import_sessions", str(path))
    session.refresh_from_db()

    def no_read(_session):
        raise AssertionError("the file was parsed again")

    monkeypatch.setattr(codex_context, "engine_session", no_read)
    assert set(codex_context.recorded_histories(session)) == {"L3"}


def test_compare_projects_the_recorded_history_at_each_entry(tmp_path, viewer_client):
    """Compare's projected figure of a Codex route after a compaction is Raw vs projected's
    (the recorded history), not the stored route figure, which follows Pi's rule (the
    summary alone): the two differ between a compaction and the next reply (whose reported
    usage then counts), so the separate Codex path is what Compare shows there."""
    from explorer import conf, queries, route_store
    from explorer.models import Entry

    path, _ = codex_session(tmp_path / "p", turns=14, compact_at=(5, 10), rollback_at=3, big_at=0)
    call_command("import_sessions", str(path))
    session = Session.objects.get()
    leaf = queries.default_leaf_id(session)
    window, reserve = conf.window_and_reserve()
    differs = 0
    for eid in Entry.objects.filter(session=session).values_list("entry_id", flat=True):
        shown = queries.compare_routes(session, eid, leaf, leaf)
        summary = queries.context_summary(session, eid, window, reserve)
        assert shown["projected_a"] == summary["projected_tokens"], eid
        stored = route_store.figures_at(session, eid)
        assert stored is not None
        differs += stored.context_tokens != shown["projected_a"]
    assert differs  # where the recorded history outweighs the one-message summary
    page = viewer_client.get(f"/sessions/{session.pk}/compare/?a=L69&b={leaf}&format=json")
    assert (
        page.json()["result"]["projected_a"]
        == queries.context_summary(session, "L69", window, reserve)["projected_tokens"]
    )
