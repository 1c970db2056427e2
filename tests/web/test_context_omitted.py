"""Raw vs projected stands in for the multi-MB lines of the live range (``queries.omitted``)
and reads them only for the window of rows that shows them: the answer is the one every
line parsed gives, and a cold request parses no such line it does not show."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.cache import cache
from django.urls import reverse

from benchmarks.gen_session import generate_session
from explorer import queries, services
from explorer.models import Entry
from explorer.queries import omitted
from tests.web.test_compare_omitted import (
    BIG_LINE,
    _big_parses,
    _big_session_lines,
    _leaves,
    _reply,
    _user,
)

pytestmark = pytest.mark.django_db


def _cold(client, session, leaf: str, **params: Any) -> dict[str, Any]:
    queries.forget_reads()
    cache.clear()
    url = reverse("explorer:context", args=[session.pk])
    r = client.get(url, {"leaf": leaf, "format": "json", **params})
    assert r.status_code == 200
    return r.json()


def _every_row(client, session, leaf: str, monkeypatch, big_line: int) -> dict[str, Any]:
    monkeypatch.setattr(omitted, "BIG_LINE", big_line)
    return _cold(client, session, leaf, limit=1000)


def _with_tail(lines: list[dict[str, Any]], leaf: str, n: int) -> list[dict[str, Any]]:
    """``lines`` and ``n`` short turns below ``leaf``: the big rows leave the newest window."""
    parent = leaf
    for i in range(n):
        lines += [_user(f"q{i}", parent, f"more {i}"), _reply(f"p{i}", f"q{i}", f"ok {i}")]
        parent = f"p{i}"
    return lines


def _compacted(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A compaction below branch A keeping history from t1: t0 is folded."""
    return [*lines, {"type": "compaction", "id": "ca", "parentId": "ra",
                     "timestamp": "2025-03-04T05:06:10.000Z", "summary": "read four files",
                     "firstKeptEntryId": "t1", "tokensBefore": 300000}]  # fmt: skip


@pytest.mark.parametrize(
    ("shape", "read"),
    [("plain", set()), ("edit", {"t1"}), ("secret", {"t2"}), ("compaction", set())],
)
def test_rows_not_shown_parse_no_big_line(viewer_client, make_session, monkeypatch, shape, read):
    lines = _big_session_lines(edit=shape == "edit", secret=shape == "secret")
    leaf = {"edit": "ea", "compaction": "ca"}.get(shape, "ra")
    if shape == "compaction":
        lines = _compacted(lines)
    lines = _with_tail(lines, leaf, 3)
    session = make_session(("\n".join(json.dumps(x) for x in lines) + "\n").encode())
    reference = _every_row(viewer_client, session, "p2", monkeypatch, 10**12)
    monkeypatch.setattr(omitted, "BIG_LINE", BIG_LINE)
    sizes = _big_parses(monkeypatch)
    window = _cold(viewer_client, session, "p2", limit=4)
    # Every figure is the one of every line parsed; the window is that answer's last rows.
    assert {k: v for k, v in window.items() if k not in ("rows", "rows_from", "next")} == {
        k: v for k, v in reference.items() if k not in ("rows", "rows_from", "next")
    }
    assert window["rows"] == reference["rows"][-4:]
    assert len(sizes) == len(read)  # only lines that could not be stood in for
    assert {r["id"] for r in reference["rows"]} >= {"t1", "t2", "t3"}
    del sizes[:]
    assert _every_row(viewer_client, session, "p2", monkeypatch, BIG_LINE) == reference
    # Each shown stand-in shows the texts stored with its line (``line_text_store``): only
    # the lines that could not be stood in for are read, as for the window.
    assert len(sizes) == len(read)
    # The page and its partial show the same rows, titles of the big lines included.
    url = reverse("explorer:context", args=[session.pk])
    cache.clear()
    page = viewer_client.get(url, {"leaf": "p2", "limit": 1000}).content.decode()
    partial = viewer_client.get(
        url, {"leaf": "p2", "limit": 1000}, headers={"HX-Request": "true"}
    ).content.decode()
    for text in ("3 xxxxxxxx", "1 xxxxxxxx"):
        assert text in page and text in partial


def test_an_append_after_stand_ins_answers_as_a_fresh_build(
    viewer_client, make_session, monkeypatch
):
    """The alignment kept with stand-ins goes on after an append, as a fresh build would;
    neither window reads a big line (their texts are stored with them)."""
    lines = _with_tail(_big_session_lines(), "ra", 2)
    session = make_session(("\n".join(json.dumps(x) for x in lines) + "\n").encode())
    url = reverse("explorer:context", args=[session.pk])
    sizes = _big_parses(monkeypatch)
    viewer_client.get(url, {"leaf": "p1", "format": "json", "limit": 1000})
    assert len(sizes) == 0  # the window shows the four big results: their stored texts
    message = {"role": "user", "content": "one more", "timestamp": 9}
    services.append_message(session, None, message, leaf_id="p1")
    session.refresh_from_db()
    new_leaf = Entry.objects.filter(session=session).order_by("-position")[0].entry_id
    extended = viewer_client.get(url, {"leaf": new_leaf, "format": "json", "limit": 1000}).json()
    assert len(sizes) == 0
    assert extended == _every_row(viewer_client, session, new_leaf, monkeypatch, 10**12)
    assert extended["rows"][-1]["raw_text"] == "one more"


def test_generated_sessions_answer_as_with_every_line_parsed(
    viewer_client, make_session, editor_user, monkeypatch, tmp_path
):
    """Seed 6: four compactions, context edits, six branch points and one more edit made
    through the app; every line counts as big (BIG_LINE 0), so every eligible message of
    every live range is stood in for, and read for the window."""
    src = generate_session(tmp_path / "gen.jsonl", entries=1200, branch_points=6, seed=6)
    session = make_session(src.read_bytes())
    light = queries.light_path(session, queries.default_leaf_id(session))
    target = next(e.entry_id for e in reversed(light) if e.type == "message")
    services.add_context_edit(session, editor_user, target, None, leaf_id=light[-1].entry_id)
    session.refresh_from_db()
    for leaf in _leaves(session):
        reference = _every_row(viewer_client, session, leaf, monkeypatch, 10**12)
        assert _every_row(viewer_client, session, leaf, monkeypatch, 0) == reference, leaf
        monkeypatch.setattr(omitted, "BIG_LINE", 0)
        window = _cold(viewer_client, session, leaf, limit=7)
        assert window["rows"] == reference["rows"][-7:]
        assert window["projected_tokens"] == reference["projected_tokens"]


@pytest.mark.pi_fixtures
def test_pi_fixtures_answer_as_with_every_line_parsed(viewer_client, make_session, monkeypatch):
    from tests.conftest import pi_fixture_files

    for path in pi_fixture_files():
        session = make_session(path.read_bytes())
        for leaf in _leaves(session):
            reference = _every_row(viewer_client, session, leaf, monkeypatch, 10**12)
            got = _every_row(viewer_client, session, leaf, monkeypatch, 0)
            assert got == reference, (path.name, leaf)
