"""Raw vs projected extended after an append equals a fresh build, figure for figure.

After an entry is appended at the tip, ``queries._context_summary`` goes on from the
alignment this process kept for the route before it: only the new entries are read and
aligned when they cannot change an earlier row, else every row is aligned again (from the
kept entries). Either way the summary must be the one a fresh build gives: these tests
append entries of every kind one by one and compare after each, and check that the
shortcut is really taken where it may be (one row aligned) and not where it may not.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict

import pytest

from benchmarks.gen_session import generate_session
from explorer import queries, services
from explorer.analysis import projection as analysis
from explorer.analysis.projection import align_projection, summarize_view
from explorer.session.tokens import CompactionSettings

pytestmark = pytest.mark.django_db

USAGE = {"input": 40, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 45,
         "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0.01}}  # fmt: skip
STAMP = "2025-03-04T05:06:08.000Z"


def _assistant(text: str, *, usage: bool = True) -> dict:
    m = {"role": "assistant", "content": [{"type": "text", "text": text}], "api": "a",
         "provider": "p", "model": "m2", "stopReason": "stop", "timestamp": 1741064800000}  # fmt: skip
    if usage:
        m["usage"] = USAGE
    return m


def _user(text: str) -> dict:
    return {"role": "user", "content": text, "timestamp": 1741064800000}


def _tool_result(text: str) -> dict:
    return {"role": "toolResult", "toolCallId": "c-x", "toolName": "read",
            "content": [{"type": "text", "text": text}], "isError": False,
            "timestamp": 1741064800000}  # fmt: skip


class _Counting:
    """Counts the rows ``align_projection`` aligns (each asks for its raw messages once)."""

    def __init__(self, monkeypatch):
        self.n = 0
        real = analysis.session_entry_to_context_messages

        def spy(entry):
            self.n += 1
            return real(entry)

        monkeypatch.setattr(analysis, "session_entry_to_context_messages", spy)

    def take(self) -> int:
        n, self.n = self.n, 0
        return n


def _fresh(session, cursor, window, reserve) -> dict:
    """The summary built from nothing kept (the process's alignments set aside, then put
    back, so the next append still extends the chain of extended ones)."""
    kept = queries.context._ALIGNMENTS
    queries.context._ALIGNMENTS = OrderedDict()
    try:
        return queries._context_summary(session, cursor, window, reserve)
    finally:
        queries.context._ALIGNMENTS = kept


@pytest.fixture
def generated(make_session, tmp_path):
    """Seed 6: compactions and context edits on the default leaf's route."""
    src = generate_session(tmp_path / "gen.jsonl", entries=1500, branch_points=6, seed=6)
    return make_session(src.read_bytes())


def _verbatim(session, entry: dict) -> str:
    tip = queries.default_leaf_id(session)
    line = json.dumps({"parentId": tip, "timestamp": STAMP, **entry})
    assert services.append_lines_verbatim(session, [line], [entry["id"]], source="test") == 1
    return entry["id"]


def _appends(session):
    """(what, appendable, append) for entries of every kind, in the order they are added;
    ``append`` adds one entry at the tip and returns its id."""

    def via(fn, *args):
        def run():
            result = fn(session, None, *args, leaf_id=queries.default_leaf_id(session))
            session.refresh_from_db()
            return result.entries[0].entry_id

        return run

    def raw(entry):
        return lambda: _verbatim(session, entry)

    def msg(eid, message):
        return raw({"type": "message", "id": eid, "message": message})

    def hide_last_user():
        light = queries.light_path(session, queries.default_leaf_id(session))
        target = next(e.entry_id for e in reversed(light) if e.type == "message")
        return via(services.add_context_edit, target, None)()

    def compaction():
        light = queries.light_path(session, queries.default_leaf_id(session))
        first_kept = light[-6].entry_id
        return raw({"type": "compaction", "id": "fe000010", "summary": "All of it so far.",
                    "firstKeptEntryId": first_kept, "tokensBefore": 5000})()  # fmt: skip

    big = "Please look at src/app.py once more. " * 60  # ~550 tokens: over the threshold
    return [
        ("user", True, via(services.append_message, _user(big))),
        ("assistant with usage", True, via(services.append_message, _assistant("Done."))),
        ("toolResult", True, via(services.append_message, _tool_result("print(1)\n" * 40))),
        ("session_info", True, via(services.rename_session, "renamed")),
        ("user", True, via(services.append_message, _user("And the tests?"))),
        (
            "assistant without usage",
            True,
            via(services.append_message, _assistant("Hm.", usage=False)),
        ),  # fmt: skip
        ("context_edit hiding the last message", False, hide_last_user),
        ("user after the edit", True, via(services.append_message, _user("Next."))),
        ("assistant after the edit", True, via(services.append_message, _assistant("Ok."))),
        (
            "context_edit of an entry not yet written",
            False,
            raw(
                {
                    "type": "context_edit",
                    "id": "fe000001",
                    "targetId": "fe000002",
                    "replacement": {"content": "swapped"},
                }
            ),
        ),  # fmt: skip
        ("its target, appended", False, msg("fe000002", _user("the original words"))),
        ("label", True, lambda: via(services.set_label, "fe000002", "flag")()),
        (
            "model_change",
            False,
            raw({"type": "model_change", "id": "fe000003", "provider": "q", "modelId": "m9"}),
        ),  # fmt: skip
        (
            "thinking_level_change",
            False,
            raw({"type": "thinking_level_change", "id": "fe000004", "thinkingLevel": "high"}),
        ),  # fmt: skip
        (
            "system message",
            False,
            msg("fe000005", {"role": "system", "content": "Be brief.", "timestamp": 1741064800000}),
        ),  # fmt: skip
        (
            "custom_message",
            False,
            raw(
                {
                    "type": "custom_message",
                    "id": "fe000006",
                    "customType": "note",
                    "content": "from an extension",
                    "display": True,
                }
            ),
        ),  # fmt: skip
        (
            "user message without content",
            True,
            msg("fe000007", {"role": "user", "timestamp": 1741064800000}),
        ),  # fmt: skip
        ("compaction", False, compaction),
        ("user after the compaction", True, via(services.append_message, _user("Fresh start."))),
        ("assistant after the compaction", True, via(services.append_message, _assistant("Yes."))),
        (
            "branch_summary",
            False,
            raw(
                {
                    "type": "branch_summary",
                    "id": "fe000011",
                    "fromId": "fe000002",
                    "summary": "Tried another way.",
                }
            ),
        ),  # fmt: skip
        ("toolResult", True, via(services.append_message, _tool_result("ok"))),
    ]


def test_each_append_extends_to_what_a_fresh_build_gives(generated, monkeypatch):
    session = generated
    reserve = 16_384
    cursor = queries.default_leaf_id(session)
    start = queries._context_summary(session, cursor, 200_000, reserve)
    assert start["compaction_id"] and start["folded_count"] > 0
    # A window whose threshold the first (big) user message crosses and the next answer's
    # small usage falls back under, so "would compact" changes along the way.
    window = start["projected_tokens"] + reserve + 100
    windows = (window, 200_000)
    for w in windows:
        queries._context_summary(session, cursor, w, reserve)
    count = _Counting(monkeypatch)
    seen_compact = set()
    for what, appendable, append in _appends(session):
        before = len(queries.light_path(session, cursor))
        cursor = append()
        session.refresh_from_db()
        light = queries.light_path(session, cursor)
        assert len(light) == before + 1 and light[-1].entry_id == cursor, what
        for w in windows:
            count.take()
            extended = queries._context_summary(session, cursor, w, reserve)
            aligned = count.take()
            if w != windows[0]:
                assert aligned == 0, what  # the same route at another window: nothing new
            elif appendable:
                assert aligned == 1, what  # only the new entry
            else:  # every row of the live range aligned again
                assert aligned == len(queries._session_alignments(session)[-1].path), what
            fresh = _fresh(session, cursor, w, reserve)
            assert extended == fresh, what
            assert extended["rows"][-1]["id"] == cursor
            if w == window:
                seen_compact.add(extended["would_compact"])
    assert seen_compact == {True, False}


def test_the_page_after_appends_shows_the_fresh_figures(generated, viewer_client):
    from django.urls import reverse

    session = generated
    url = reverse("explorer:context", args=[session.pk])
    viewer_client.get(url)
    for message in (_user("one more question " * 30), _assistant("An answer."), _tool_result("x")):
        services.append_message(session, None, message, leaf_id=queries.default_leaf_id(session))
        session.refresh_from_db()
        data = viewer_client.get(url, {"format": "json"}).json()
        cursor = queries.default_leaf_id(session)
        window, reserve = data["window"], data["window"] - data["threshold"]
        fresh = json.loads(json.dumps(_fresh(session, cursor, window, reserve)))
        assert data["leaf_id"] == cursor
        for key, value in fresh.items():
            assert data[key] == value, key


# --- the engine-side alignment alone -------------------------------------------------------


def _route(tmp_path) -> list[dict]:
    from explorer.session.context import build_session_path

    src = generate_session(tmp_path / "r.jsonl", entries=1000, branch_points=4, seed=5)
    lines = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    return build_session_path([e for e in lines if e.get("type") != "session"])


def test_align_projection_reuse_equals_a_fresh_alignment_at_every_prefix(tmp_path):
    route = _route(tmp_path)
    first = 380  # every prefix from here on: the route's compaction and an edit follow
    kinds = {e.get("type") for e in route[first:]}
    assert {"compaction", "context_edit", "message"} <= kinds
    settings = CompactionSettings(reserve_tokens=16_384)
    prev = align_projection(route[:first], context_window=60_000, settings=settings)
    prev_rows = summarize_view(prev, prev.rows)["rows"]
    reused = 0
    for k in range(first + 1, len(route) + 1):
        path = route[:k]
        fresh = align_projection(path, context_window=60_000, settings=settings)
        ext = align_projection(path, context_window=60_000, settings=settings, reuse=prev)
        assert ext == fresh, k
        if ext.rows[0] is prev.rows[0]:
            reused += 1
            assert analysis._appendable(path[-1])
        summary = summarize_view(ext, ext.rows, (prev.rows, prev_rows))
        assert summary == summarize_view(fresh, fresh.rows), k
        prev, prev_rows = ext, summary["rows"]
    assert reused > (len(route) - first) // 2  # most appends are plain messages


def test_reuse_is_refused_when_the_rows_are_not_of_this_path(tmp_path):
    route = _route(tmp_path)[:300]
    old = align_projection(route[:-1])
    # The same entries, but other objects: the kept rows are not trusted.
    copied = copy.deepcopy(route)
    copied[10]["message"] = {"role": "user", "content": "changed"}
    view = align_projection(copied, reuse=old)
    assert view == align_projection(copied)
    assert view.rows[0] is not old.rows[0]
    # A longer kept view than the path, or none: a fresh alignment.
    assert align_projection(route[:50], reuse=old) == align_projection(route[:50])


def test_a_live_range_too_long_to_keep_is_built_afresh_each_time(generated, monkeypatch):
    monkeypatch.setattr(queries.context, "ALIGNMENT_MAX_PATH", 10)
    session = generated
    queries._context_summary(session, queries.default_leaf_id(session), 200_000, 16_384)
    assert queries._session_alignments(session) == []
    services.append_message(session, None, _user("more"), leaf_id=queries.default_leaf_id(session))
    session.refresh_from_db()
    cursor = queries.default_leaf_id(session)
    summary = queries._context_summary(session, cursor, 200_000, 16_384)
    assert summary == _fresh(session, cursor, 200_000, 16_384)
    assert summary["rows"][-1]["id"] == cursor
