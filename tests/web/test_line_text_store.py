"""The texts rows show of a multi-MB line are stored when the line is (``line_text_store``):
each equals what the row builders compute from the parsed line under the same masking, the
pages answer alike with and without the rows, and a cold Compactions, Compare or Raw vs
projected request parses no big line it shows only as a row."""

from __future__ import annotations

import json
import re
from typing import Any
from unittest import mock

import pytest
from django.core.cache import cache
from django.db import transaction
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.django import TestCase as HypothesisTestCase

from explorer import line_text_store, queries, services, storage
from explorer.analysis.line_texts import kept_row, line_texts
from explorer.models import BigLineText, Entry, SecretFinding, Session
from explorer.queries.entries import load_entries
from tests.web.test_compare_omitted import HEADER, SECRET, _big_parses, _reply, _tool, _user

pytestmark = pytest.mark.django_db

BIG = 300_000  # characters of a big tool result: above line_text_store.BIG_LINE
# A secret starting inside the 220 characters a preview shows and ending after them.
EDGE = "w" * 200 + f" key {SECRET} "


def assert_stored_texts(session: Session, big_line: int | None = None) -> int:
    """Every entry whose line is at least ``big_line`` bytes (not a compaction, an object)
    has its row, under the masking the page has now, equal to ``analysis.line_texts`` of
    the line as a page reads it; no other entry has one. Returns the rows checked."""
    big_line = line_text_store.BIG_LINE if big_line is None else big_line
    rows = dict(BigLineText.objects.filter(session=session).values_list("entry__entry_id", "texts"))
    wanted = set(
        Entry.objects.filter(session=session, size__gte=big_line)
        .exclude(type="compaction")
        .values_list("entry_id", flat=True)
    )
    queries.forget_reads()
    cache.clear()
    shown = load_entries(session, wanted)
    assert set(rows) == set(shown)
    stored = line_text_store.stored_texts(session, wanted)
    masked = _masked_entries(session)
    assert set(stored) == set(rows)  # the page's masking is the rows'
    for entry_id, entry in shown.items():
        want = line_texts(entry)
        assert json.loads(rows[entry_id]) == json.loads(json.dumps(want)), entry_id
        got = stored[entry_id]
        assert (got.context, got.compare, got.listed) == (
            (want["ctx"][0], list(want["ctx"][1])),
            want["cmp"],
            want["list"],
        )
        assert got.kept == kept_row(entry)
        if entry_id in masked:
            assert SECRET not in rows[entry_id]
    return len(rows)


def _masked_entries(session: Session) -> set[str]:
    """Entries holding a secret the scanner found that is not marked a false positive."""
    return set(
        SecretFinding.objects.filter(session=session)
        .exclude(status=SecretFinding.FALSE_POSITIVE)
        .values_list("entry_id", flat=True)
    )


# -- generated sessions ------------------------------------------------------------------------

WORDS = st.sampled_from(["alpha", "beta", " ", "\n\n", "\t", "  x  ", "é", "📎", "\u2028", "ok."])


@st.composite
def texts(draw: Any) -> str:
    """A message text of a few KB: words and runs of whitespace, maybe a secret (near the
    start, at the preview's edge, or far in)."""
    body = "".join(draw(st.lists(WORDS, min_size=0, max_size=60)))
    pad = draw(st.integers(0, 3000))
    secret = draw(st.sampled_from(["", "start", "edge", "far"]))
    text = body + "z" * pad
    if secret == "start":
        text = f"token {SECRET} " + text
    elif secret == "edge":
        text = EDGE[: draw(st.integers(150, len(EDGE) - 5))] + f" {SECRET} " + text
    elif secret == "far":
        text = text + f" then {SECRET} "
    return text


@st.composite
def sessions(draw: Any) -> list[dict[str, Any]]:
    """A tree of user messages, tool results (text blocks or a string), assistant replies
    and custom messages, each parented on a random earlier entry, with a compaction."""
    n = draw(st.integers(2, 9))
    out: list[dict[str, Any]] = [_user("e0", None, draw(texts()) + "q" * 1100)]  # one big
    for i in range(1, n):
        parent = out[draw(st.integers(0, i - 1))]["id"]
        kind = draw(st.sampled_from(["user", "tool", "reply", "custom", "compaction"]))
        text = draw(texts())
        if kind == "user":
            out.append(_user(f"e{i}", parent, text))
        elif kind == "tool":
            out.append(_tool(f"e{i}", parent, text))
        elif kind == "reply":
            out.append(_reply(f"e{i}", parent, text))
        elif kind == "custom":
            out.append({"type": "custom_message", "id": f"e{i}", "parentId": parent,
                        "timestamp": "2025-03-04T05:06:08.000Z", "customType": "note",
                        "content": text, "display": True})  # fmt: skip
        else:
            out.append({"type": "compaction", "id": f"e{i}", "parentId": parent,
                        "timestamp": "2025-03-04T05:06:08.000Z", "summary": text,
                        "firstKeptEntryId": parent, "tokensBefore": 9})  # fmt: skip
    return out


def _jsonl(entries: list[dict[str, Any]]) -> bytes:
    return ("\n".join(json.dumps(x) for x in [HEADER, *entries]) + "\n").encode()


class GeneratedSessions(HypothesisTestCase):
    """Imported, then a few lines appended (the two writers), every big line's row equals
    the row builders' texts of the masked line; after a finding is marked a false
    positive, no row is read under the new masking (the pages parse the lines)."""

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(sessions(), st.integers(0, 3))
    def test_rows_equal_the_builders(self, entries, appended):
        with mock.patch.object(line_text_store, "BIG_LINE", 1024):
            head, tail = entries[: len(entries) - appended], entries[len(entries) - appended :]
            session = services.import_bytes(_jsonl(head)).session
            for value in tail:
                with transaction.atomic():
                    storage.append_lines(session, _jsonl([value]).split(b"\n", 1)[1])
            session = Session.objects.get(pk=session.pk)
            assert_stored_texts(session, 1024)
            finding = SecretFinding.objects.filter(session=session).first()
            if finding is not None:
                finding.status = SecretFinding.FALSE_POSITIVE
                finding.save()
                queries.forget_reads()
                wanted = Entry.objects.filter(session=session).values_list("entry_id", flat=True)
                assert line_text_store.stored_texts(session, wanted) == {}
        session.delete()


# -- the pages ---------------------------------------------------------------------------------


def _session_lines() -> list[dict[str, Any]]:
    """Four big tool results (one with a secret cut at the preview's edge), a compaction
    replacing the first two, and two branches: A below the compaction, B from t3."""
    lines = [_user("u0", None, "read them")]
    parent = "u0"
    for n in range(4):
        text = EDGE + "y" * BIG if n == 1 else f"{n} " + "x" * BIG
        lines.append(_tool(f"t{n}", parent, text))
        parent = f"t{n}"
    lines.append(_reply("r0", "t3", "read"))
    lines.append({"type": "compaction", "id": "c0", "parentId": "r0",
                  "timestamp": "2025-03-04T05:06:10.000Z", "summary": "read four files",
                  "firstKeptEntryId": "t2", "tokensBefore": 300000})  # fmt: skip
    lines += [_user("u1", "c0", "left"), _reply("r1", "u1", "went left")]
    lines += [_user("u2", "t3", "right"), _reply("r2", "u2", "went right")]
    return lines


TOKEN = re.compile(r'(csrfmiddlewaretoken" value="|"X-CSRFToken": "|nonce=")[^"]+')


def _requests(session: Session) -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """(url, query, headers) of each tab's page, partial and JSON."""
    out = []
    for name, query in (
        ("explorer:compactions", {"leaf": "r1", "c": "c0"}),
        ("explorer:compare", {"a": "r1", "b": "r2"}),
        ("explorer:compare", {"a": "r2", "b": "t1"}),
        ("explorer:context", {"leaf": "r2", "limit": "1000"}),
        ("explorer:context", {"leaf": "r1", "limit": "3"}),
    ):
        url = reverse(name, args=[session.pk])
        out += [
            (url, query, {}),
            (url, query, {"HX-Request": "true"}),
            (url, {**query, "format": "json"}, {}),
        ]
    return out


def _answers(client, session: Session) -> list[str]:
    out = []
    for url, query, headers in _requests(session):
        queries.forget_reads()
        cache.clear()
        r = client.get(url, query, headers=headers)
        assert r.status_code == 200, (url, query)
        out.append(TOKEN.sub(r"\1T", r.content.decode()))
    return out


def test_pages_answer_alike_with_and_without_the_rows(viewer_client, make_session):
    session = make_session(_jsonl(_session_lines()))
    assert assert_stored_texts(session) == 4
    with_rows = _answers(viewer_client, session)
    assert SECRET not in "".join(with_rows)
    BigLineText.objects.filter(session=session).delete()  # as before migration 0027
    assert with_rows == _answers(viewer_client, session)


def test_generated_session_pages_answer_alike_with_and_without_the_rows(
    viewer_client, make_session, monkeypatch, tmp_path
):
    """Seed 6 (four compactions, six branch points) with every line of 1,500 bytes or more
    counted big, for the rows and the stand-ins alike: every tab's page, partial and JSON at
    several leaves (Compare between them) is the same with the rows and without."""
    from benchmarks.gen_session import generate_session
    from explorer.queries import omitted
    from tests.web.test_compare_omitted import _leaves

    monkeypatch.setattr(line_text_store, "BIG_LINE", 1500)
    monkeypatch.setattr(omitted, "BIG_LINE", 1500)
    src = generate_session(tmp_path / "gen.jsonl", entries=1200, branch_points=6, seed=6)
    session = make_session(src.read_bytes())
    assert assert_stored_texts(session, 1500) > 20
    leaves = _leaves(session)
    picked = [leaves[0], leaves[len(leaves) // 2], leaves[-1]]
    asked: list[tuple[str, dict[str, str]]] = []
    for leaf in picked:
        asked += [
            ("explorer:compactions", {"leaf": leaf}),
            ("explorer:context", {"leaf": leaf, "limit": "1000"}),
            ("explorer:context", {"leaf": leaf, "limit": "5"}),
        ]
    asked += [("explorer:compare", {"a": a, "b": b}) for a in picked for b in picked if a != b]
    # The Tree and Live route rows and the Tree's drawn entries (titles, roles).
    asked += [(name, {"leaf": leaf}) for leaf in picked for name in TREE_AND_LIVE]

    def answers() -> list[str]:
        out = []
        for name, query in asked:
            url = reverse(name, args=[session.pk])
            for params, headers in (
                (query, {}),
                (query, {"HX-Request": "true"}),
                ({**query, "format": "json"}, {}),
            ):
                queries.forget_reads()
                cache.clear()
                r = viewer_client.get(url, params, headers=headers)
                assert r.status_code == 200, (name, params)
                out.append(TOKEN.sub(r"\1T", r.content.decode()))
        return out

    with_rows = answers()
    BigLineText.objects.filter(session=session).delete()
    assert with_rows == answers()


def test_under_another_masking_the_pages_read_the_lines(viewer_client, make_session):
    """A finding marked a false positive since the rows were written: the pages show the
    secret in clear, as the lines read now give it, not the masked stored texts."""
    session = make_session(_jsonl(_session_lines()))
    finding = SecretFinding.objects.get(session=session)
    finding.status = SecretFinding.FALSE_POSITIVE
    finding.save()
    with_rows = _answers(viewer_client, session)
    assert SECRET[:12] in "".join(with_rows)
    BigLineText.objects.filter(session=session).delete()
    assert with_rows == _answers(viewer_client, session)


def _cold_json(client, session: Session, name: str, query: dict[str, str]) -> dict[str, Any]:
    queries.forget_reads()
    cache.clear()
    r = client.get(reverse(name, args=[session.pk]), {**query, "format": "json"})
    assert r.status_code == 200
    return r.json()


@pytest.mark.parametrize(
    ("name", "query", "read", "unstored"),
    [
        # t0, t1 replaced and t2, t3 kept, listed as rows: none read (the check is stored).
        ("explorer:compactions", {"leaf": "r1", "c": "c0"}, 0, 4),
        # t3 the common ancestor, titled; the contexts' big results stood in for, but t1
        # (it holds a secret, so its estimate is not the stored one) read for B's context.
        ("explorer:compare", {"a": "r1", "b": "r2"}, 1, 3),
        # t2, t3 listed on A's side, t1 the ancestor (read for B's context, as above).
        ("explorer:compare", {"a": "r2", "b": "t1"}, 1, 3),
        # Every row of B's route shown: t0, t2, t3 stood in for, t1 read for the context.
        ("explorer:context", {"leaf": "r2", "limit": "1000"}, 1, 4),
    ],
)
def test_a_cold_request_reads_no_big_line_it_shows_as_a_row(
    viewer_client, make_session, monkeypatch, name, query, read, unstored
):
    session = make_session(_jsonl(_session_lines()))
    sizes = _big_parses(monkeypatch)
    answer = _cold_json(viewer_client, session, name, query)
    assert len(sizes) == read
    del sizes[:]
    BigLineText.objects.filter(session=session).delete()
    assert _cold_json(viewer_client, session, name, query) == answer
    assert len(sizes) == unstored  # without the rows, the lines shown are read
    text = json.dumps(answer)
    assert "3 xxxx" in text and SECRET not in text


TREE_AND_LIVE = ("explorer:session_detail", "explorer:live")


@pytest.mark.parametrize("name", TREE_AND_LIVE)
def test_tree_and_live_rows_read_the_stored_texts(viewer_client, make_session, monkeypatch, name):
    """The Tree's drawn entries and the route rows of the Tree and Live tabs take a big
    line's title and role from its stored texts: the page is the same without the rows, and
    reads fewer big lines with them."""
    session = make_session(_jsonl(_session_lines()))
    sizes = _big_parses(monkeypatch)

    def cold_page() -> str:
        queries.forget_reads()
        cache.clear()
        r = viewer_client.get(reverse(name, args=[session.pk]), {"leaf": "r1"})
        assert r.status_code == 200
        return TOKEN.sub(r"\1T", r.content.decode())

    page = cold_page()
    with_rows = len(sizes)
    del sizes[:]
    BigLineText.objects.filter(session=session).delete()
    assert cold_page() == page
    assert with_rows < len(sizes), (with_rows, len(sizes))
    assert "3 xxxx" in page and SECRET not in page


# -- migration 0027 ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_migration_0027_fills_the_rows_of_sessions_stored_before_it():
    """Entries stored at 0026 (through that state's models) get their rows from 0027: the
    row builders' texts of each big line under the masking the page has; back at 0026 the
    table goes."""
    from django.db import connection

    from explorer.secrets import redact_entry
    from explorer.session import jsonfmt
    from tests.web.migration_states import migration_states

    values = _session_lines()
    raws = [json.dumps(v, separators=(",", ":")) for v in values]
    with migration_states() as migrate:
        apps = migrate([("explorer", "0026_survival_checks")])
        OldSession = apps.get_model("explorer", "Session")
        OldEntry = apps.get_model("explorer", "Entry")
        stored = OldSession.objects.create(session_id="s-0027", header_raw="{}")
        OldEntry.objects.bulk_create(
            OldEntry(session=stored, entry_id=v["id"], parent_id=v.get("parentId"),
                     type=v["type"], position=k + 1, line_no=k + 2, raw=raw,
                     size=len(raw.encode()))
            for k, (v, raw) in enumerate(zip(values, raws, strict=True))
        )  # fmt: skip
        migrate([("explorer", "0027_big_line_texts")])
        with connection.cursor() as cur:  # raw SQL: today's code may expect later tables
            cur.execute(
                "SELECT e.entry_id, t.texts FROM explorer_biglinetext t "
                "JOIN explorer_entry e ON e.id = t.entry_id WHERE t.session_id = %s",
                [stored.pk],
            )
            got = dict(cur.fetchall())
        from explorer import conf

        want = {
            v["id"]: jsonfmt.dumps(line_texts(redact_entry(v, key=conf.secrets_key())))
            for v, raw in zip(values, raws, strict=True)
            if len(raw) >= line_text_store.BIG_LINE
        }
        assert set(want) == {"t0", "t1", "t2", "t3"} and got == want
        assert SECRET not in got["t1"]
        migrate()  # the newest state
        session = Session.objects.get(session_id="s-0027")
        assert set(line_text_store.stored_texts(session, want)) == set(want)
        migrate([("explorer", "0026_survival_checks")])  # and back: the table goes
        assert "explorer_biglinetext" not in connection.introspection.table_names()


def test_a_grown_import_stores_the_rows_of_its_new_lines(make_session):
    """The file imported again with more lines (the grown import's batch writer): its new
    big line gets its row like the first import's."""
    lines = _session_lines()
    session = make_session(_jsonl(lines))
    assert assert_stored_texts(session) == 4
    more = [_tool("t4", "r2", "4 " + "v" * BIG), _reply("r3", "t4", "done")]
    result = services.import_bytes(_jsonl(lines + more))
    assert result.ok and result.session.pk == session.pk
    session = Session.objects.get(pk=session.pk)
    assert assert_stored_texts(session) == 5
