"""Each entry's cost is stored when it is written (``files.entry_fields``) and
``queries.entry_costs`` reads the column: after every write path (an import, a grown
file, a web append, a follower's lines, a fork, and a file the migration filled), the
stored costs must equal what parsing every line again gives."""

from __future__ import annotations

import json

import pytest
from django.core.cache import cache
from django.db import connection

from explorer import queries, services
from explorer.models import Entry, Session
from explorer.session import jsonfmt
from explorer.session.describe import cost_of
from tests.conftest import PI_FIXTURES, SMALL_SESSION

pytestmark = pytest.mark.django_db

LAST_ID = "1b2c3d4e"  # SMALL_SESSION's last entry
PI_LARGE = PI_FIXTURES / "large-session.jsonl"


def _parsed_costs(session: Session) -> dict[str, float]:
    """The costs by parsing every stored line: assistant messages and the costed kinds."""
    out = {}
    for eid, raw in Entry.objects.filter(session=session).values_list("entry_id", "raw"):
        d = jsonfmt.loads(raw)
        m = d.get("message") if isinstance(d, dict) else None
        assistant = (
            d.get("type") == "message" and isinstance(m, dict) and m.get("role") == "assistant"
        )
        if assistant or d.get("type") in ("usage", "compaction", "branch_summary"):
            c = cost_of(d)
            if c:
                out[eid] = c
    return out


def _assert_exact(session: Session) -> None:
    cache.clear()
    queries._GROWN.clear()
    parsed = _parsed_costs(session)
    assert queries.entry_costs(session) == parsed
    stored = dict(Entry.objects.filter(session=session).values_list("entry_id", "cost"))
    assert {k: v for k, v in stored.items() if v} == parsed


def _assistant_line(entry_id: str, parent: str, cost: float) -> str:
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2}
    usage["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost}
    message = {
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": usage,
        "stopReason": "stop",
        "timestamp": 1741064900000,
    }
    return json.dumps(
        {
            "type": "message",
            "id": entry_id,
            "parentId": parent,
            "timestamp": "2025-03-04T05:08:20.000Z",
            "message": message,
        },
        separators=(",", ":"),
    )


def test_every_write_path_stores_the_costs_a_fresh_parse_gives(editor_user, admin_user):
    session = services.import_bytes(SMALL_SESSION, source_path="s.jsonl").session
    assert _parsed_costs(session)  # the small session has priced replies
    _assert_exact(session)
    grown = SMALL_SESSION + (_assistant_line("77cc0001", LAST_ID, 0.5) + "\n").encode()
    services.import_bytes(grown, source_path="s.jsonl")
    session.refresh_from_db()
    _assert_exact(session)
    assert queries.entry_costs(session)["77cc0001"] == 0.5
    message = json.loads(_assistant_line("x", "77cc0001", 0.75))["message"]
    web = services.append_message(session, editor_user, message, leaf_id="77cc0001")
    session.refresh_from_db()
    _assert_exact(session)
    assert queries.entry_costs(session)[web.entries[0].entry_id] == 0.75
    line = _assistant_line("77cc0002", web.entries[0].entry_id, 1.25)
    assert services.append_lines_verbatim(session, [line], ["77cc0002"], source="follow") == 1
    _assert_exact(session)
    assert queries.entry_costs(session)["77cc0002"] == 1.25
    fork = services.fork_session(session, admin_user)
    _assert_exact(fork)
    assert sorted(queries.entry_costs(fork).values()) == sorted(
        queries.entry_costs(session).values()
    )


def test_user_and_tool_lines_carry_no_cost_whatever_they_say():
    """Only assistant replies and the costed kinds are priced, as before the column."""
    line = json.loads(_assistant_line("77cc0003", LAST_ID, 9.0))
    line["message"]["role"] = "user"
    data = SMALL_SESSION + (json.dumps(line, separators=(",", ":")) + "\n").encode()
    session = services.import_bytes(data).session
    assert Entry.objects.get(session=session, entry_id="77cc0003").cost == 0
    assert "77cc0003" not in queries.entry_costs(session)
    _assert_exact(session)


@pytest.mark.pi_fixtures
def test_a_real_pi_session_stores_the_costs_a_fresh_parse_gives():
    session = services.import_bytes(PI_LARGE.read_bytes(), source_path=str(PI_LARGE)).session
    assert _parsed_costs(session)
    _assert_exact(session)


@pytest.mark.django_db(transaction=True)
def test_migration_0013_fills_the_costs_of_stored_entries():
    from django.db.migrations.executor import MigrationExecutor

    old = [("explorer", "0012_search_index_batch_fill")]
    new = [("explorer", "0013_entry_cost_skeleton_index")]
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(old)
        apps = executor.loader.project_state(old).apps
        OldSession = apps.get_model("explorer", "Session")
        OldEntry = apps.get_model("explorer", "Entry")
        stored = OldSession.objects.create(session_id="s-0012", header_raw="{}")
        lines = [
            _assistant_line(f"e{k}", f"e{k - 1}" if k else None, 0.1 * (k + 1)) for k in range(4)
        ]
        lines.append(
            '{"type":"message","id":"e9","parentId":"e3","message":{"role":"user","content":"hi"}}'
        )
        lines.append("not json at all")
        OldEntry.objects.bulk_create(
            OldEntry(
                session=stored,
                entry_id=json.loads(line)["id"] if line.startswith("{") else "bad",
                type="message",
                role="user" if '"user"' in line or not line.startswith("{") else "assistant",
                position=k + 1,
                line_no=k + 2,
                raw=line,
            )
            for k, line in enumerate(lines)
        )
        executor = MigrationExecutor(connection)
        executor.migrate(new)
        # The models of 0013 (later migrations add columns today's models read).
        NewEntry = executor.loader.project_state(new).apps.get_model("explorer", "Entry")
        costs = dict(NewEntry.objects.filter(session_id=stored.pk).values_list("entry_id", "cost"))
        assert costs == {"e0": 0.1, "e1": 0.2, "e2": 0.1 * 3, "e3": 0.4, "e9": 0.0, "bad": 0.0}
        executor = MigrationExecutor(connection)
        executor.migrate(old)
        with connection.cursor() as cur:
            columns = [
                c.name
                for c in connection.introspection.get_table_description(cur, "explorer_entry")
            ]
        assert "cost" not in columns
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    # Migrated forward again, 0013 filled the costs again; today's reads see them.
    session = Session.objects.get(pk=stored.pk)
    assert queries.entry_costs(session) == {k: v for k, v in costs.items() if v}
