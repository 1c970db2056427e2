"""Migration 0030: the stored row texts of a multi-MB reply of thinking alone, written when
its title was its stop reason ("stop"), are titled "(thinking) …" as the pages title it now;
other rows are left alone, and going back gives the earlier titles again."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import connection

from explorer import conf, line_text_store
from explorer.analysis.line_texts import line_texts
from explorer.secrets import redact_entry
from explorer.session import jsonfmt
from explorer.survival_store import mask_stamp
from tests.web.migration_states import migration_states

BEFORE = [("explorer", "0029_agent_file_uses")]
AFTER = [("explorer", "0030_big_line_titles")]
SECRET = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"
BIG = line_text_store.BIG_LINE


def _reply(eid: str, parent: str | None, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "message", "id": eid, "parentId": parent,
            "timestamp": "2026-11-02T10:00:00.000Z",
            "message": {"role": "assistant", "content": content, "stopReason": "stop",
                        "timestamp": 1}}  # fmt: skip


def _lines() -> list[dict[str, Any]]:
    thought = f"Plan: the token {SECRET} leaked; rotate it first. " + "z" * BIG
    return [
        {
            "type": "message",
            "id": "u0",
            "parentId": None,
            "timestamp": "2026-11-02T10:00:00.000Z",
            "message": {"role": "user", "content": "think", "timestamp": 1},
        },  # fmt: skip
        _reply("k1", "u0", [{"type": "thinking", "thinking": thought}]),
        _reply("k2", "k1", [{"type": "thinking", "thinking": "Second " + "q" * BIG}]),
        _reply("x1", "k2", [{"type": "text", "text": "Said " + "w" * BIG}]),
    ]


def _old_texts(value: dict[str, Any]) -> str:
    """The row 0027's rule wrote: today's texts with each title the stop reason."""
    texts = json.loads(jsonfmt.dumps(line_texts(redact_entry(value, key=conf.secrets_key()))))
    texts["ctx"][0] = texts["cmp"][1] = texts["cmp"][2] = texts["list"]["title"] = "stop"
    texts["row"][2] = "stop"
    return jsonfmt.dumps(texts)


def _rows(session_pk: int) -> dict[str, tuple[str, str]]:
    with connection.cursor() as cur:  # raw SQL: today's models may expect later tables
        cur.execute(
            "SELECT e.entry_id, t.texts, t.mask FROM explorer_biglinetext t "
            "JOIN explorer_entry e ON e.id = t.entry_id WHERE t.session_id = %s",
            [session_pk],
        )
        return {eid: (texts, mask) for eid, texts, mask in cur.fetchall()}


@pytest.mark.django_db(transaction=True)
def test_migration_0030_titles_thinking_rows_as_the_pages_do():
    values = _lines()
    raws = [json.dumps(v, separators=(",", ":")) for v in values]
    mask = mask_stamp(frozenset())
    with migration_states() as migrate:
        apps = migrate(BEFORE)
        OldSession = apps.get_model("explorer", "Session")
        OldEntry = apps.get_model("explorer", "Entry")
        OldText = apps.get_model("explorer", "BigLineText")
        stored = OldSession.objects.create(session_id="s-0030", header_raw="{}")
        entries = OldEntry.objects.bulk_create(
            OldEntry(session=stored, entry_id=v["id"], parent_id=v.get("parentId"),
                     type=v["type"], role=v["message"]["role"], position=k + 1, line_no=k + 2,
                     raw=raw, size=len(raw.encode()))
            for k, (v, raw) in enumerate(zip(values, raws, strict=True))
        )  # fmt: skip
        pks = {e.entry_id: e.pk for e in OldEntry.objects.filter(session=stored)}
        assert len(entries) == 4
        x1_texts = jsonfmt.dumps(line_texts(values[3]))
        OldText.objects.bulk_create(
            [
                OldText(entry_id=pks["k1"], session=stored, texts=_old_texts(values[1]), mask=mask),
                # Written under a masking the session no longer has: a page ignores it.
                OldText(entry_id=pks["k2"], session=stored, texts=_old_texts(values[2]), mask="x"),
                OldText(entry_id=pks["x1"], session=stored, texts=x1_texts, mask=mask),
            ]
        )
        before = _rows(stored.pk)

        migrate(AFTER)
        after = _rows(stored.pk)
        want = jsonfmt.dumps(line_texts(redact_entry(values[1], key=conf.secrets_key())))
        assert after["k1"] == (want, mask)
        title = json.loads(after["k1"][0])["row"][2]
        assert title.startswith("(thinking) Plan: the token ") and SECRET not in after["k1"][0]
        assert "k2" not in after  # the page parses that line, as it did
        assert after["x1"] == before["x1"]  # a reply with text: its title did not change

        migrate(BEFORE)  # and back: the earlier titles
        back = _rows(stored.pk)
        assert back["k1"] == before["k1"] and back["x1"] == before["x1"]

        migrate()  # the newest state: the page reads the row, as the engine titles it
        from explorer.models import Session

        session = Session.objects.get(session_id="s-0030")
        got = line_text_store.stored_texts(session, ["k1", "x1"])
        assert got["k1"].row[2] == json.loads(want)["row"][2]
