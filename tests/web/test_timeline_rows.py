"""The Timeline reads stored route figures: the same figures as the engine at every leaf,
and a cold request parses no more than the turns and marks it shows.

Each turn's projected figure is the engine's estimate of the route ending at that reply
(``pisession context --leaf``), its "estimate" every message of that projection estimated,
its provider-reported context the engine's one definition of it; all three computed here
from scratch on the stored lines. The page shows them from the entries' ``RouteFigure``
rows (computed once when each entry arrived) and parses only the drawn turns' lines.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchmarks.gen_session import generate_session
from explorer import queries, services, shared_copies
from explorer.models import Entry, Session
from explorer.queries.timeline import MARKS_SHOWN
from explorer.session import jsonfmt
from explorer.session.context import _walk_up, build_entry_index, projection_from_path
from explorer.session.describe import entry_role, finite, provider_context_tokens
from explorer.session.tokens import estimate_every_message, estimate_projected_context
from tests.conftest import SMALL_SESSION, pi_fixture_files

pytestmark = pytest.mark.django_db


def _engine(session: Session) -> tuple[dict[str, dict[str, Any]], dict[str, dict]]:
    """(entry id → the engine's figures of the route ending there, entry id → its line),
    from the stored lines, each route projected from scratch."""
    rows = Entry.objects.filter(session=session).order_by("position").values_list("raw", flat=True)
    lines = [jsonfmt.loads(raw) for raw in rows]
    index = build_entry_index(lines)
    out: dict[str, dict[str, Any]] = {}
    for entry in lines:
        path = _walk_up(entry, index)
        path.reverse()
        projection = projection_from_path(path)
        out[entry["id"]] = {
            "projected": int(finite(estimate_projected_context(projection, path).tokens)),
            "estimate": int(finite(estimate_every_message(projection.messages).tokens)),
            "reported": provider_context_tokens(entry),
        }
    return out, {e["id"]: e for e in lines}


def _cold() -> None:
    """What a new worker starts with: no shared cache, no routes kept."""
    shared_copies.flush()
    cache.clear()
    queries._ROUTES.clear()


def assert_timeline_is_the_engines(session: Session, leaves: list[str]) -> int:
    engine, lines = _engine(session)
    checked = 0
    for leaf in leaves:
        _cold()
        figures = queries.timeline_figures(session, leaf)
        route = [e.entry_id for e in queries.light_path(session, leaf)]
        window = route[figures["clipped"] :]
        turns = [i for i, x in enumerate(window) if entry_role(lines[x]) == "assistant"]
        assert figures["turns"] == len(turns)
        assert figures["path_length"] == len(route)
        for p in figures["points"]:
            want = engine[p.entry_id]
            assert window[p.index] == p.entry_id
            assert (p.projected, p.estimate, p.reported) == (
                want["projected"],
                want["estimate"],
                want["reported"],
            ), (leaf, p)
            assert p.timestamp == lines[p.entry_id].get("timestamp", "")
            checked += 1
        if len(turns) <= 240:
            assert [p.index for p in figures["points"]] == turns
        if turns:
            assert figures["peak"] == max(engine[window[i]]["projected"] for i in turns)
        marks = []
        for i, x in enumerate(window):
            kind = lines[x].get("type")
            if kind == "compaction":
                marks.append((i, x, "compaction", "compaction"))
            elif kind == "context_edit":
                label = "hide" if lines[x].get("replacement") is None else "replace"
                marks.append((i, x, "edit", label))
            elif kind == "branch_summary":
                marks.append((i, x, "branch_summary", "branch summary"))
        got = [(m.index, m.entry_id, m.kind, m.label) for m in figures["marks"]]
        assert got == marks[-MARKS_SHOWN:], leaf  # the newest: the page draws a bounded number
        assert figures["marks_total"] == len(marks)
        counts = {
            k: sum(m[2] == k for m in marks) for k in ("compaction", "edit", "branch_summary")
        }
        assert figures["mark_counts"] == counts
        now = figures["now_point"]
        last_turn = turns[-1] if turns else -1
        if any(m[0] > last_turn and m[2] in ("compaction", "edit") for m in marks):
            assert now is not None
            assert (now["projected"], now["estimate"]) == (
                engine[window[-1]]["projected"],
                engine[window[-1]]["estimate"],
            )
        else:
            assert now is None
    return checked


def _leaves(session: Session, every: int = 1) -> list[str]:
    """Every tip of the session, and every ``every``-th entry besides."""
    rows = list(
        Entry.objects.filter(session=session)
        .order_by("position")
        .values_list("entry_id", "child_count")
    )
    return [x for k, (x, children) in enumerate(rows) if children == 0 or k % every == 0]


def test_a_generated_session_at_every_leaf(tmp_path):
    path = generate_session(
        tmp_path / "g.jsonl", entries=900, branch_points=12, seed=11, compact_after=150
    )
    session = services.import_bytes(path.read_bytes()).session
    kinds = set(Entry.objects.filter(session=session).values_list("type", flat=True))
    assert {"compaction", "context_edit"} <= kinds  # the routes exercise both
    assert assert_timeline_is_the_engines(session, _leaves(session, every=7)) > 1000


def test_the_small_session_and_its_appends_at_every_entry():
    session = services.import_bytes(SMALL_SESSION).session
    services.add_context_edit(session, None, "b2c3d4e5", {"content": "shorter"})
    services.append_message(
        session, None, {"role": "user", "content": "and now?", "timestamp": 1}, leaf_id="e5f6a7b8"
    )
    assert assert_timeline_is_the_engines(session, _leaves(session)) > 0


@pytest.mark.pi_fixtures
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_pi_files_at_every_leaf(path: Path):
    """Figures of the stored (unmasked) lines: a Pi file holding a secret-looking string
    once had its Timeline estimated on the masked entries; the stored figures are the
    engine's on the file as it is, which ``pisession context`` prints."""
    session = services.import_bytes(path.read_bytes(), source_path=str(path)).session
    assert assert_timeline_is_the_engines(session, _leaves(session, every=25)) > 0


def _long_session(pairs: int, edits: int = 0) -> Session:
    lines = [{"type": "session", "version": 3, "id": "s-long", "timestamp": "t", "cwd": "/w"}]
    parent = None
    for k in range(pairs):
        user = {"type": "message", "id": f"u{k}", "parentId": parent, "timestamp": f"t{k}",
                "message": {"role": "user", "content": "word " * 40}}  # fmt: skip
        reply = {"type": "message", "id": f"a{k}", "parentId": f"u{k}", "timestamp": f"t{k}",
                 "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}],
                             "usage": {"input": 100 + k, "output": 5, "cacheRead": 0,
                                       "cacheWrite": 0, "totalTokens": 105 + k}}}  # fmt: skip
        lines += [user, reply]
        parent = f"a{k}"
        if k < edits:
            edit = {"type": "context_edit", "id": f"x{k}", "parentId": parent, "timestamp": "t",
                    "targetId": f"u{k}", "replacement": None}  # fmt: skip
            lines.append(edit)
            parent = f"x{k}"
    data = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    return services.import_bytes(data).session


def _count_parses(monkeypatch) -> list[int]:
    calls: list[int] = []
    original = jsonfmt.loads

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(jsonfmt, "loads", counting)
    return calls


def test_a_cold_request_parses_only_the_turns_and_marks_it_shows(viewer_client, monkeypatch):
    """1,000 turns, about 240 drawn: the page and its JSON each parse the drawn turns'
    lines and the marked edits' (hide or replace), never the route."""
    session = _long_session(1000, edits=5)
    client = viewer_client
    url = f"/sessions/{session.pk}/timeline/"
    for extra in ({}, {"format": "json"}):
        _cold()
        parsed = _count_parses(monkeypatch)
        response = client.get(url, extra)
        assert response.status_code == 200
        monkeypatch.undo()
        drawn = len(queries.timeline_figures(session, queries.default_leaf_id(session))["points"])
        assert 200 < drawn <= 242
        # The header line of the session may be read by the frame around the tab.
        assert len(parsed) <= drawn + 5 + 5, len(parsed)


def test_a_get_writes_no_row(viewer_client):
    session = _long_session(50, edits=2)
    _cold()
    with CaptureQueriesContext(connection) as queries_run:
        for extra in ({}, {"format": "json"}):
            assert viewer_client.get(f"/sessions/{session.pk}/timeline/", extra).status_code == 200
    writes = [
        q["sql"] for q in queries_run.captured_queries
        if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))
    ]  # fmt: skip
    assert writes == []


def test_the_window_start_moves_in_steps():
    from explorer.queries.timeline import TIMELINE_MAX_PATH, TIMELINE_STEP, timeline_window

    assert timeline_window(TIMELINE_MAX_PATH) == 0
    assert timeline_window(TIMELINE_MAX_PATH + 1) == TIMELINE_STEP
    assert timeline_window(TIMELINE_MAX_PATH + TIMELINE_STEP) == 2 * TIMELINE_STEP
    for n in range(TIMELINE_MAX_PATH + 1, TIMELINE_MAX_PATH + 3 * TIMELINE_STEP, 97):
        assert TIMELINE_MAX_PATH - TIMELINE_STEP < n - timeline_window(n) <= TIMELINE_MAX_PATH


def test_compactions_and_edits_are_marked_and_reported_context_is_the_engines():
    """Marks come from the rows' types; provider-reported context is the engine's definition
    (total tokens), as Raw vs projected says it; the estimate line has every message
    estimated."""
    from tests.web.test_explore_logic import path_with_everything

    path = path_with_everything()
    head = {"type": "session", "version": 3, "id": "s-every", "timestamp": "t", "cwd": "/w"}
    data = b"".join(json.dumps(x).encode() + b"\n" for x in [head, *path])
    session = services.import_bytes(data).session
    figures = queries.timeline_figures(session, path[-1]["id"])
    points, marks = figures["points"], figures["marks"]
    assert [p.entry_id for p in points] == ["a1", "a2", "a3"]
    assert {m.kind for m in marks} == {"compaction", "edit"}
    assert points[0].reported == 110 == points[0].projected
    assert 0 < points[0].estimate < 110
    assert figures["chart"]["projected"].count(",") >= 3 and len(figures["chart"]["marks"]) == 3
    assert assert_timeline_is_the_engines(session, [path[-1]["id"]]) == 3
