"""The files each entry's tool calls name, stored with the entry (``explorer.file_use_store``),
and Compare's "files read and modified" read from them.

For every entry of generated sessions (imported in small batches, grown, appended line by
line), of Pi's own files and of Claude Code and Codex files stored in their Pi form, the
stored uses equal ``describe.file_uses`` of the parsed line; an entry naming no file has no
row. Compare's answer (its dictionary, the JSON, the page and the htmx partial) read from
the rows is the one parsing every tool-calling reply gives, for random leaf pairs of
generated sessions with branches; a use dropped or reordered changes it (so the comparison
can fail). Migration 0028 fills sessions stored before it.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from django.db import connection, transaction
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase as HypothesisTestCase

from benchmarks.gen_session import generate_session
from explorer import file_use_store, queries, services, storage
from explorer.analysis.compare import common_ancestor_index
from explorer.files import store as files_store
from explorer.models import Entry, FileUse, Session
from explorer.queries import compare, compare_tails
from explorer.session import jsonfmt
from explorer.session.describe import file_uses, files_touched
from tests.conftest import FIXTURES_DIR, SMALL_SESSION, pi_fixture_files
from tests.session.test_route_figures import sessions
from tests.web.migration_states import migration_states

HEADER = b'{"type":"session","version":3,"id":"s-files","timestamp":"t","cwd":"/w"}\n'


def _lines(entries: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in entries)


def _expected(session: Session) -> dict[int, list[tuple[str, str]]]:
    """Position → ``file_uses`` of each stored line that names a file, parsed afresh."""
    out = {}
    rows = Entry.objects.filter(session=session).order_by("position")
    for position, raw in rows.values_list("position", "raw"):
        value = jsonfmt.loads(raw)
        uses = file_uses(value) if isinstance(value, dict) else []
        if uses:
            out[position] = uses
    return out


def assert_uses_stored(session: Session) -> int:
    """Every stored entry's uses equal the parse's; an entry naming no file has no row."""
    want = _expected(session)
    positions = Entry.objects.filter(session=session).values_list("position", flat=True)
    assert file_use_store.uses_at(session.pk, positions) == want
    assert FileUse.objects.filter(session=session).count() == len(want)
    return len(want)


# Paths as crafted lines give them: repeats, unicode, a lone surrogate, NUL, empty, not text.
PATHS = st.sampled_from(
    ["a.py", "src/b.ts", "a.py", "docs/ü ñ.md", "x\ud83dy", "nul\x00z", "", 7, None]
)
CALL = st.builds(
    lambda name, path, shape: {
        "type": "toolCall",
        "id": "c",
        "name": name,
        "arguments": {"path": path} if shape == 0 else ({"p": path} if shape == 1 else path),
    },
    st.sampled_from(["read", "write", "edit", "read", "edit", "bash", None]),
    PATHS,
    st.sampled_from([0, 0, 0, 0, 1, 2]),
)
BLOCKS = st.lists(
    st.one_of(CALL, CALL, st.just({"type": "text", "text": "t"}), st.just("odd")), max_size=5
)


@st.composite
def with_files(draw) -> list[Any]:
    """The route figures' generated sessions, most of their messages made replies calling
    file tools (and a few user messages, which name no file however they look)."""
    entries = draw(sessions())
    for entry in entries:
        message = entry.get("message") if isinstance(entry, dict) else None
        if isinstance(message, dict) and draw(st.integers(0, 3)) > 0:
            message["role"] = draw(st.sampled_from(["assistant", "assistant", "user"]))
            message["content"] = draw(BLOCKS)
    return entries


def _storable(entries: list[Any]) -> list[dict] | None:
    dicts = [e for e in entries if isinstance(e, dict)]
    ids = [e.get("id") for e in dicts]
    if len(dicts) != len(entries) or not all(isinstance(i, str) for i in ids):
        return None
    return dicts if len(set(ids)) == len(ids) else None


class GeneratedFileUses(HypothesisTestCase):
    """Generated sessions stored by the import (in small batches or not) and by appends."""

    stored = 0
    named = 0  # entries naming a file, over every example

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        assert cls.stored > 8, "the generated sessions were hardly ever stored"
        assert cls.named > 10, "the generated sessions hardly ever named a file"

    @settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
    @given(with_files(), st.sampled_from([None, 1, 3]))
    def test_imported(self, entries, rows):
        dicts = _storable(entries)
        if dicts is None:
            return
        with mock.patch.object(files_store, "_BATCH_ROWS", rows or files_store._BATCH_ROWS):
            result = services.import_bytes(HEADER + _lines(dicts))
        if result.session is None or not Entry.objects.filter(session=result.session).exists():
            return
        type(self).named += assert_uses_stored(result.session)
        type(self).stored += 1
        result.session.delete()

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(with_files(), st.integers(1, 6))
    def test_appended(self, entries, head):
        dicts = _storable(entries)
        if dicts is None or len(dicts) <= head:
            return
        result = services.import_bytes(HEADER + _lines(dicts[:head]))
        session = result.session
        if session is None or not Entry.objects.filter(session=session).exists():
            return
        for value in dicts[head:]:
            with transaction.atomic():
                try:
                    storage.append_lines(session, _lines([value]))
                except ValueError:
                    break  # a line the append refuses
        type(self).named += assert_uses_stored(session)
        type(self).stored += 1
        session.delete()


def _reply(eid: str, parent: str | None, calls: list[tuple[str, str]]) -> dict:
    return {
        "type": "message",
        "id": eid,
        "parentId": parent,
        "timestamp": "2025-03-04T05:06:07.000Z",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "toolCall", "id": f"{eid}-{k}", "name": n, "arguments": {"path": p}}
                for k, (n, p) in enumerate(calls)
            ],
            "stopReason": "toolUse",
            "timestamp": 1,
        },
    }


@pytest.mark.django_db
def test_lines_appended_through_the_services_get_their_rows():
    """A turn's reply (``append_message``, through the engine) and a followed line
    (``append_lines_verbatim``, the follower's path) each get their row, in call order."""
    session = services.import_bytes(SMALL_SESSION).session
    before = assert_uses_stored(session)
    message = _reply("x", "e5f6a7b8", [("edit", "b.py"), ("read", "a.py"), ("bash", "c")])
    appended = services.append_message(session, None, message["message"], leaf_id="e5f6a7b8")
    assert appended.entry is not None
    reply = Entry.objects.get(session=session, entry_id=appended.entry.entry_id)
    line = _reply("f1", reply.entry_id, [("write", "z.md"), ("read", "z.md")])
    session.refresh_from_db()
    assert services.append_lines_verbatim(session, [json.dumps(line)], ["f1"], source="t") == 1
    followed = Entry.objects.get(session=session, entry_id="f1")
    stored = file_use_store.uses_at(session.pk, [reply.position, followed.position])
    assert stored == {
        reply.position: [("modified", "b.py"), ("read", "a.py")],
        followed.position: [("modified", "z.md"), ("read", "z.md")],
    }
    assert assert_uses_stored(session) == before + 2


@pytest.mark.django_db
def test_a_grown_file_adds_the_rows_of_its_new_lines_only():
    first = [
        {"type": "message", "id": "u0", "parentId": None, "timestamp": "t",
         "message": {"role": "user", "content": "go"}},
        _reply("r1", "u0", [("read", "a.py")]),
        _reply("r2", "later", [("edit", "a.py")]),  # its parent comes later
    ]  # fmt: skip
    data = HEADER + _lines(first)
    session = services.import_bytes(data).session
    assert assert_uses_stored(session) == 2
    grown = data + _lines([_reply("later", "r1", [("write", "n.py")]), _reply("r4", "r2", [])])
    services.import_bytes(grown)
    assert assert_uses_stored(session) == 3


@pytest.mark.pi_fixtures
@pytest.mark.django_db
@pytest.mark.parametrize("path", pi_fixture_files(), ids=lambda p: p.name)
def test_pi_files(path: Path):
    session = services.import_bytes(path.read_bytes(), source_path=str(path)).session
    assert_uses_stored(session)


def _agent_files() -> list[Path]:
    found = sorted((FIXTURES_DIR / "claude-code").rglob("*.jsonl"))[:3]
    found += sorted((FIXTURES_DIR / "codex").rglob("*.jsonl"))[:3]
    return found or [FIXTURES_DIR / "missing.jsonl"]


@pytest.mark.agent_fixtures
@pytest.mark.django_db
@pytest.mark.parametrize("path", _agent_files(), ids=lambda p: p.name)
def test_claude_code_and_codex_files_stored_in_pi_form(path: Path):
    from explorer import agent_import

    result = agent_import.import_agent_file(str(path))
    stored = Session.objects.all()
    assert stored, result
    for session in stored:
        assert_uses_stored(session)


@pytest.mark.django_db
def test_deleting_a_session_deletes_its_rows():
    session = services.import_bytes(HEADER + _lines([_reply("r", None, [("read", "a")])])).session
    other = services.import_bytes(
        HEADER.replace(b"s-files", b"s-other") + _lines([_reply("q", None, [("read", "b")])])
    ).session
    assert FileUse.objects.filter(session=session).count() == 1
    session.delete()
    assert not FileUse.objects.filter(session_id=session.pk).exists()
    assert FileUse.objects.filter(session=other).count() == 1


# ---------------------------------------------------------------------------------------------
# Compare reads the rows


def _parsed_uses(session_pk: int, positions) -> dict[int, list[tuple[str, str]]]:
    """The reference for ``uses_at``: every line at ``positions`` parsed (the old way)."""
    out = {}
    wanted = list(positions)
    rows = Entry.objects.filter(session_id=session_pk, position__in=wanted)
    for position, raw in rows.values_list("position", "raw"):
        uses = file_uses(jsonfmt.loads(raw))
        if uses:
            out[position] = uses
    return out


@contextmanager
def _every_reply_parsed() -> Iterator[None]:
    """Compare as it was before the stored uses: both routes read whole (the walk, not the
    chains' sparse reading) and every calling reply parsed instead of its row."""
    with (
        mock.patch.object(compare, "_compare_by_chains", lambda *args: None),
        mock.patch.object(compare_tails, "uses_at", _parsed_uses),
    ):
        yield


@pytest.fixture
def branched(make_session, tmp_path):
    """A generated session with branches and compactions, plus replies naming several
    files each (in an order that matters: a file read, then modified, then read again)."""
    path = generate_session(
        tmp_path / "f.jsonl", entries=700, branch_points=12, seed=3, compact_after=60_000
    )
    session = make_session(path.read_bytes())
    leaves = [c["id"] for c in queries.leaf_choices(session)]
    for k, leaf in enumerate(leaves[:4]):
        calls = [("read", f"m{k}.py"), ("edit", f"m{k}.py"), ("read", f"n{k}.py"),
                 ("read", "shared.md"), ("write", f"o{k}.py")]  # fmt: skip
        line = _reply(f"multi{k}", leaf, calls)
        services.append_lines_verbatim(session, [json.dumps(line)], [line["id"]], source="t")
        session.refresh_from_db()
    assert assert_uses_stored(session) > 50
    return session


def _pairs(session, n: int, seed: int) -> list[tuple[str, str]]:
    leaves = [c["id"] for c in queries.leaf_choices(session)]
    rng = random.Random(seed)
    pairs = [tuple(rng.sample(leaves, 2)) for _ in range(n)]
    route = queries.light_path(session, leaves[0])
    return [*pairs, (leaves[0], route[len(route) // 2].entry_id), (leaves[1], leaves[1])]


def _files_by_parse(session, a: str, b: str) -> dict[str, Any]:
    la, lb = queries.light_path(session, a), queries.light_path(session, b)
    k = common_ancestor_index([e.entry_id for e in la], [e.entry_id for e in lb])
    out = {}
    for side, route in (("a", la), ("b", lb)):
        files = files_touched(queries.full_path(session, route[k + 1 :]))
        out[f"files_{side}"] = (files["read"], files["modified"])
    return out


def _files_shown(shown: dict[str, Any]) -> dict[str, Any]:
    return {
        f"files_{side}": (shown[f"stats_{side}"]["files_read"], shown[f"stats_{side}"]["files_modified"])
        for side in ("a", "b")
    }  # fmt: skip


def test_random_pairs_show_the_files_parsing_every_reply_gives(branched):
    """The files of each side equal ``files_touched`` over its tail parsed whole, and the
    whole answer equals the one read with every calling reply parsed instead of its row."""
    seen_files = 0
    for a, b in _pairs(branched, 12, seed=27):
        shown = queries.compare_routes(branched, a, b, a)
        assert _files_shown(shown) == _files_by_parse(branched, a, b), (a, b)
        with _every_reply_parsed():
            assert queries.compare_routes(branched, a, b, a) == shown, (a, b)
        seen_files += len(shown["stats_a"]["files_read"]) + len(shown["stats_b"]["files_read"])
    assert seen_files > 10  # the pairs do list files


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda uses: uses[:-1], id="dropped"),
        pytest.param(lambda uses: uses[::-1], id="reordered"),
    ],
)
def test_a_use_dropped_or_reordered_changes_the_answer(branched, change):
    """The comparison above can fail: with each stored list changed, some pair's files
    differ from the parse's."""
    real = file_use_store.decode
    pairs = [*_pairs(branched, 12, seed=27), *_multi_pairs(branched)]
    with mock.patch.object(file_use_store, "decode", lambda text: change(real(text))):
        differ = [
            (a, b)
            for a, b in pairs
            if _files_shown(queries.compare_routes(branched, a, b, a))
            != _files_by_parse(branched, a, b)
        ]
    assert differ


def _multi_pairs(session) -> list[tuple[str, str]]:
    """Pairs whose tails end in the replies naming several files."""
    return [("multi0", "multi1"), ("multi2", "multi3")]


def _without_tokens(html: str) -> str:
    """The page without what differs between two requests of the same page: the CSRF
    token, the CSP nonce."""
    html = re.sub(r'(csrfmiddlewaretoken" value=|X-CSRFToken": |nonce=)"[^"]*"', r"\1", html)
    return re.sub(r'"csrf[^"]*":\s*"[^"]*"', "", html)


def test_page_partial_and_json_are_unchanged_by_the_rows(branched, viewer_client):
    from django.core.cache import cache

    url = reverse("explorer:compare", args=[branched.pk])
    for a, b in [*_pairs(branched, 3, seed=5), *_multi_pairs(branched)]:
        answers = []
        for patched in (False, True):
            with _every_reply_parsed() if patched else nullcontext():
                cache.clear()
                page = viewer_client.get(url, {"a": a, "b": b, "leaf": a}).content.decode()
                cache.clear()
                part = viewer_client.get(
                    url, {"a": a, "b": b, "leaf": a}, HTTP_HX_REQUEST="true"
                ).content.decode()
                cache.clear()
                body = viewer_client.get(url, {"a": a, "b": b, "leaf": a, "format": "json"})
                answers.append((_without_tokens(page), _without_tokens(part), body.json()))
        assert answers[0] == answers[1], (a, b)
        stats = answers[0][2]["result"]["stats_a"]
        if a.startswith("multi") and a != b:  # a reply naming several files ends A
            assert "shared.md" in stats["files_read"], (a, b)


@pytest.mark.django_db
def test_a_reply_holding_a_secret_shows_its_path_masked():
    """A path holding a secret is shown masked, as the parse shows it: that reply is
    parsed, the others read from their rows."""
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    lines = [
        {"type": "message", "id": "u0", "parentId": None, "timestamp": "t",
         "message": {"role": "user", "content": "go"}},
        _reply("r1", "u0", [("read", "plain.py")]),
        _reply("r2", "r1", [("read", f"/tmp/{token}/key.txt")]),
        _reply("r3", "u0", [("read", "other.py")]),
    ]  # fmt: skip
    session = services.import_bytes(HEADER + _lines(lines)).session
    shown = queries.compare_routes(session, "r2", "r3", "r2")
    read = shown["stats_a"]["files_read"]
    assert read[0] == "plain.py" and len(read) == 2 and token not in read[1]
    assert _files_shown(shown) == _files_by_parse(session, "r2", "r3")
    assert shown["stats_b"]["files_read"] == ["other.py"]


# ---------------------------------------------------------------------------------------------
# Migration 0028


@pytest.mark.django_db(transaction=True)
def test_migration_0027_fills_the_sessions_stored_before_it():
    """Entries stored at 0020 get their route figures from 0021/0023, then 0028 fills the
    file uses of the replies whose tool-call count rose: what an import writes today."""
    values = [json.loads(line) for line in SMALL_SESSION.decode().splitlines()[1:]]
    values += [
        _reply("r1", values[-1]["id"], [("read", "a.py"), ("edit", "b.py"), ("bash", "x")]),
        _reply("r2", "r1", [("bash", "ls")]),  # calls tools, names no file
        _reply("r3", "later", [("write", "c.py")]),  # its parent comes later in the file
        _reply("later", "r2", [("read", "d\u00fc.py")]),
    ]
    want = {
        k + 1: [[kind, path] for kind, path in file_uses(v)]
        for k, v in enumerate(values)
        if file_uses(v)
    }
    assert len(want) == 4  # the small session reads one file
    with migration_states() as migrate:
        apps = migrate([("explorer", "0020_session_agent")])
        OldSession = apps.get_model("explorer", "Session")
        OldEntry = apps.get_model("explorer", "Entry")
        stored = OldSession.objects.create(session_id="s-0026", header_raw="{}")
        OldEntry.objects.bulk_create(
            OldEntry(session=stored, entry_id=v["id"], parent_id=v.get("parentId"),
                     type=v["type"], position=k + 1, line_no=k + 2, raw=json.dumps(v))
            for k, v in enumerate(values)
        )  # fmt: skip
        migrate([("explorer", "0027_big_line_texts")])
        assert "explorer_fileuse" not in connection.introspection.table_names()
        migrate([("explorer", "0028_file_uses")])
        # Read with raw SQL: today's code may expect later tables.
        with connection.cursor() as cur:
            cur.execute(
                "SELECT position, uses FROM explorer_fileuse WHERE session_id = %s", [stored.pk]
            )
            assert {p: json.loads(u) for p, u in cur.fetchall()} == want
        migrate()  # the newest state
        session = Session.objects.get(session_id="s-0026")
        assert assert_uses_stored(session) == 4
        migrate([("explorer", "0027_big_line_texts")])  # and back: the table goes
        assert "explorer_fileuse" not in connection.introspection.table_names()
