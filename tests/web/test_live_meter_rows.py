"""The Live tab's meter reads the route figures stored with the leaf, and shows what the
engine computes for that leaf's route: for every entry of generated sessions (branches,
compactions, context edits before and after their targets) and every leaf of Pi's files,
``projection_summary`` equals ``context_figures`` on the route parsed from the stored lines,
and the meter as it was computed before (the live range parsed). A cold request parses no
line. A Codex route whose newest compaction carries the context Codex recorded keeps the
meter Raw vs projected's projection gives (the recorded history), as before.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.core.management import call_command
from hypothesis import HealthCheck, given, settings
from hypothesis.extra.django import TestCase as HypothesisTestCase

from explorer import queries, route_store, services
from explorer.analysis.projection import context_figures
from explorer.models import Entry, Session
from explorer.queries.entries import context_path
from explorer.queries.routes import light_path
from explorer.session import jsonfmt
from explorer.session.context import _walk_up, build_entry_index
from tests.conftest import FIXTURES_DIR, SMALL_SESSION, pi_fixture_files
from tests.session.agent_files import codex_session
from tests.session.test_route_figures import sessions

HEADER = b'{"type":"session","version":3,"id":"s-meter","timestamp":"t","cwd":"/w"}\n'
WINDOWS = [(200_000, 16_384), (1_000, 2_000), (0, 0), (37, 5)]
CODEX_PARENT = (
    FIXTURES_DIR / "codex" / "own" / "sessions" / "2026" / "10" / "12"
    / "rollout-2026-10-12T10-00-00-019a2000-0000-7000-8000-0000000000e1.jsonl"
)  # fmt: skip


def _stored(session: Session) -> list[dict[str, Any]]:
    rows = Entry.objects.filter(session=session).order_by("position").values_list("raw", flat=True)
    return [jsonfmt.loads(raw) for raw in rows]


def _engine_meter(path: list[dict[str, Any]], leaf: str, window: int, reserve: int) -> dict:
    """``context_figures`` on the whole route, root first (the engine's path)."""
    return {**context_figures(path, window=window, reserve=reserve), "leaf_id": leaf}


def _parsed_meter(session: Session, leaf: str | None, window: int, reserve: int) -> dict:
    """The meter as ``projection_summary`` computed it before it read stored rows: the
    route's live range parsed (masked, with any recorded context attached)."""
    path, _start = context_path(session, light_path(session, leaf))
    return {**context_figures(path, window=window, reserve=reserve), "leaf_id": leaf}


def assert_meters(session: Session, leaves: list[str] | None = None) -> int:
    """At each leaf (default: every entry), the meter equals the engine's figures of its
    route and the parsed meter's, for several windows; returns how many were checked."""
    entries = _stored(session)
    index = build_entry_index(entries)
    wanted = leaves if leaves is not None else [e["id"] for e in entries]
    for leaf in wanted:
        path = _walk_up(index[leaf], index)
        path.reverse()
        for window, reserve in WINDOWS:
            meter = queries.projection_summary(session, leaf, window=window, reserve=reserve)
            assert meter == _engine_meter(path, leaf, window, reserve), leaf
            assert meter == _parsed_meter(session, leaf, window, reserve), leaf
    return len(wanted)


def _leaves(entries: list[dict[str, Any]]) -> list[str]:
    parents = {e.get("parentId") for e in entries}
    return [e["id"] for e in entries if e["id"] not in parents]


@pytest.mark.django_db
def test_the_small_session_its_appends_and_no_leaf():
    session = services.import_bytes(SMALL_SESSION).session
    services.add_context_edit(session, None, "b2c3d4e5", {"content": "shorter"})
    services.append_message(
        session, None, {"role": "user", "content": "and now?", "timestamp": 1}, leaf_id="e5f6a7b8"
    )
    assert assert_meters(session) == 10
    for leaf in (None, "", "not-an-entry"):
        meter = queries.projection_summary(session, leaf, window=1000, reserve=100)
        assert meter == {"leaf_id": leaf, "messages": 0, "tokens": 0, "window": 1000,
                         "threshold": 900, "percent": 0}  # fmt: skip
        assert meter == _parsed_meter(session, leaf, 1000, 100)


class GeneratedSessions(HypothesisTestCase):
    """Generated sessions the import accepts (unique string ids, no parentId cycle)."""

    stored = 0

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        assert cls.stored > 15, "the generated sessions were hardly ever stored"

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(sessions())
    def test_every_entry(self, entries):
        dicts = [e for e in entries if isinstance(e, dict)]
        ids = [e.get("id") for e in dicts]
        if len(dicts) != len(entries) or not all(isinstance(i, str) for i in ids):
            return
        if len(set(ids)) != len(ids):
            return
        data = HEADER + b"".join(json.dumps(e).encode() + b"\n" for e in dicts)
        session = services.import_bytes(data).session
        if session is None or not Entry.objects.filter(session=session).exists():
            return
        assert_meters(session)
        type(self).stored += 1
        session.delete()


@pytest.mark.pi_fixtures
@pytest.mark.django_db
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_every_leaf_of_a_pi_file(path: Path):
    session = services.import_bytes(path.read_bytes(), source_path=str(path)).session
    entries = _stored(session)
    # Every leaf, and the entries where the projection changes shape (and the one after).
    shaped = [
        e["id"]
        for k, e in enumerate(entries)
        if e.get("type") in ("compaction", "context_edit", "branch_summary")
        or (k and entries[k - 1].get("type") == "compaction")
    ]
    leaves = list(dict.fromkeys([*_leaves(entries), *shaped]))
    assert assert_meters(session, leaves) >= 1


@pytest.mark.django_db
def test_a_cold_meter_reads_one_row_and_parses_no_line(monkeypatch, django_assert_num_queries):
    compaction = {"type": "compaction", "id": "c1", "parentId": "1b2c3d4e", "summary": "s",
                  "firstKeptEntryId": "d4e5f6a7", "tokensBefore": 900}  # fmt: skip
    data = SMALL_SESSION + json.dumps(compaction).encode() + b"\n"
    session = services.import_bytes(data).session
    want = _parsed_meter(session, "c1", 1000, 100)
    assert want["messages"] == 2 and want["tokens"] > 0  # the summary and the kept reply
    session = Session.objects.get(pk=session.pk)  # nothing kept on the object
    cache.clear()
    parsed: list[Any] = []
    real = jsonfmt.loads

    def counted(text: Any) -> Any:
        parsed.append(text)
        return real(text)

    monkeypatch.setattr(jsonfmt, "loads", counted)
    with django_assert_num_queries(1):
        meter = queries.projection_summary(session, "c1", window=1000, reserve=100)
    assert meter == want
    assert parsed == []
    # The parsed meter does parse the route (the count would see a parse).
    _parsed_meter(session, "c1", 1000, 100)
    assert parsed


@pytest.mark.django_db
def test_a_stored_figure_changed_is_what_the_meter_shows():
    """The meter is the stored row's (not a parse that happens to agree)."""
    session = services.import_bytes(SMALL_SESSION).session
    entry = Entry.objects.get(session=session, entry_id="d4e5f6a7")
    from explorer.models import RouteFigure

    RouteFigure.objects.filter(entry=entry).update(messages=41, context_tokens=500.7)
    meter = queries.projection_summary(session, "d4e5f6a7", window=1000, reserve=100)
    assert (meter["messages"], meter["tokens"], meter["percent"]) == (41, 500, 50)


def _codex_meters_as_before(session: Session) -> int:
    """At every entry, the meter equals the parsed meter (with the recorded history);
    returns at how many entries the stored engine figures differ from it."""
    differs = 0
    for eid in Entry.objects.filter(session=session).values_list("entry_id", flat=True):
        for window, reserve in WINDOWS[:2]:
            meter = queries.projection_summary(session, eid, window=window, reserve=reserve)
            assert meter == _parsed_meter(session, eid, window, reserve), eid
        stored = route_store.figures_at(session, eid)
        assert stored is not None
        differs += stored.messages != meter["messages"]
    return differs


@pytest.mark.django_db
def test_a_codex_route_after_a_compaction_shows_the_recorded_history(tmp_path):
    path, _ = codex_session(tmp_path / "p", turns=14, compact_at=(5, 10), rollback_at=3, big_at=0)
    call_command("import_sessions", str(path))
    session = Session.objects.get()
    # Where the recorded history is not Pi's one-message summary, the stored count differs:
    # the meter there is the parsed one, as it was.
    assert _codex_meters_as_before(session) > 0


@pytest.mark.agent_fixtures
@pytest.mark.django_db
def test_the_codex_fixture_with_a_compaction_keeps_its_meter():
    call_command("import_sessions", str(CODEX_PARENT))
    session = Session.objects.get()
    assert session.agent == "codex" and session.compaction_count
    assert _codex_meters_as_before(session) > 0
    leaf = queries.default_leaf_id(session)
    recorded = queries.projection_summary(session, leaf, window=1000, reserve=100)
    stored = route_store.figures_at(session, leaf)
    assert stored is not None and recorded["messages"] != stored.messages


@pytest.mark.django_db
def test_a_codex_route_before_any_compaction_reads_the_row(tmp_path, monkeypatch):
    path, _ = codex_session(tmp_path / "p", turns=8, compact_at=(6,), rollback_at=3, big_at=0)
    call_command("import_sessions", str(path))
    session = Session.objects.get()
    early = next(
        eid
        for eid in Entry.objects.filter(session=session)
        .order_by("position")
        .values_list("entry_id", flat=True)[3:]
        if (f := route_store.figures_at(session, eid)) is not None and f.compaction_id is None
    )
    want = _parsed_meter(session, early, 1000, 100)
    parsed: list[Any] = []
    real = jsonfmt.loads
    monkeypatch.setattr(jsonfmt, "loads", lambda text: parsed.append(text) or real(text))
    assert queries.projection_summary(session, early, window=1000, reserve=100) == want
    assert parsed == []


@pytest.mark.django_db
def test_a_secret_on_the_route_counts_as_the_model_saw_it():
    """The meter's estimate is the engine's on the stored lines (``pisession context``, the
    text the model was sent), as the Timeline's and Compare's are, not an estimate of the
    masked text the pages show in its place (a placeholder of another length)."""
    secret = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    text = f"my token is {secret}, and a key sk-ant-api03-{'x' * 90} too"
    entry = {"type": "message", "id": "u1", "parentId": None, "timestamp": "t",
             "message": {"role": "user", "content": text}}  # fmt: skip
    session = services.import_bytes(HEADER + json.dumps(entry).encode() + b"\n").session
    meter = queries.projection_summary(session, "u1", window=1000, reserve=100)
    assert meter == _engine_meter([entry], "u1", 1000, 100)
    masked = _parsed_meter(session, "u1", 1000, 100)
    assert meter["tokens"] > masked["tokens"] and meter["messages"] == masked["messages"] == 1


@pytest.mark.django_db
def test_the_live_json_parses_no_line_and_says_what_the_page_does(viewer_client, monkeypatch):
    """``?format=json`` of the Live tab (the route's length and tip, the turn state and the
    meter) is read from index rows and the tip's stored figures: no tree or transcript row
    is built for it, so no line is parsed; its figures are the page's."""
    from django.urls import reverse

    from explorer.views.live import tail_window

    session = services.import_bytes(SMALL_SESSION).session
    services.append_message(
        session, None, {"role": "user", "content": "and now?", "timestamp": 1}, leaf_id="e5f6a7b8"
    )
    url = reverse("explorer:live", args=[session.pk])
    cache.clear()
    parsed: list[Any] = []
    real = jsonfmt.loads
    monkeypatch.setattr(jsonfmt, "loads", lambda text: parsed.append(text) or real(text))
    data = viewer_client.get(url, {"format": "json"}).json()
    assert parsed == []
    monkeypatch.setattr(jsonfmt, "loads", real)
    newest = queries.default_leaf_id(session)
    page = tail_window(session, newest)
    assert (data["route_length"], data["tip"]) == (page["route_length"], page["tip"]) == (3, newest)
    assert data["projection"] == _parsed_meter(session, newest, *_window())
    assert data["ws_path"] == f"/ws/sessions/{session.pk}/" and data["can_edit"] is False
    assert set(data) == {"route_length", "tip", "cursor_entry", "last_position",
                         "provider_configured", "turn_running", "can_edit", "ws_path",
                         "projection"}  # fmt: skip
    html = viewer_client.get(url).content.decode()
    assert f'data-tokens="{data["projection"]["tokens"]}"' in html


def _window() -> tuple[int, int]:
    from explorer import conf

    return conf.window_and_reserve()
