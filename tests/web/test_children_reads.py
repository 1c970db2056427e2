"""Reads of children by parent look each parent up in the ``entry_children`` index.

Every page that shows a branch switcher, an entry's children or a tool call's result asks
for children by parent. With the covering ``entry_skeleton`` index present, SQLite (which
keeps no statistics unless told to) walked the whole session through that index for these
reads whenever it held every column asked for: 6 to 13 ms a query on 50,000 entries, and a
minute for the recursive walk behind a branch switcher. The plan is what these tests hold.
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from explorer import queries
from explorer.models import Entry

pytestmark = pytest.mark.django_db


def _plans(run) -> list[tuple[str, str]]:
    """(SQL, plan) of each query ``run`` makes that reads entries by parent."""
    with CaptureQueriesContext(connection) as seen:
        run()
    out = []
    for q in seen.captured_queries:
        if "parent_id" not in q["sql"] or "explorer_entry" not in q["sql"]:
            continue
        with connection.cursor() as cur:
            cur.execute("EXPLAIN QUERY PLAN " + q["sql"])
            plan = " | ".join(str(row[-1]) for row in cur.fetchall())
        out.append((q["sql"], plan))
    return out


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's planner only")
def test_children_reads_use_the_children_index(make_session):
    session = make_session()
    root = "a1b2c3d4"  # two children: a branch point
    reads = {
        "children_roles": lambda: queries.children_roles(session, [root]),
        "siblings_of": lambda: queries.siblings_of(session, [root, "b2c3d4e5"]),
        "newest_leaf_under": lambda: queries.newest_leaf_under(session, root),
    }
    for name, run in reads.items():
        plans = _plans(run)
        assert plans, name
        for sql, plan in plans:
            assert "entry_children" in plan, (name, sql, plan)
            assert "entry_skeleton" not in plan, (name, sql, plan)


def test_children_reads_answer_as_before(make_session):
    """The extra column asked for to steer the plan changes no answer."""
    session = make_session()
    root = "a1b2c3d4"
    assert queries.children_roles(session, [root]) == [
        ("b2c3d4e5", "assistant"),
        ("e5f6a7b8", "assistant"),
    ]
    assert queries.siblings_of(session, [root, "b2c3d4e5"]) == {root: ["b2c3d4e5", "e5f6a7b8"]}
    newest = Entry.objects.filter(session=session).order_by("-position")[0].entry_id
    assert queries.newest_leaf_under(session, root) == newest


def test_entry_panel_children_use_the_children_index(make_session, viewer_client):
    session = make_session()
    url = f"/sessions/{session.pk}/entry/?id=a1b2c3d4&format=json"
    with CaptureQueriesContext(connection) as seen:
        answer = viewer_client.get(url)
    assert answer.status_code == 200
    assert [c[0] for c in answer.json()["children"]] == ["b2c3d4e5", "e5f6a7b8"]
    child_reads = [q["sql"] for q in seen.captured_queries if '"parent_id" = ' in q["sql"]]
    assert child_reads
    if connection.vendor == "sqlite":
        for sql in child_reads:
            with connection.cursor() as cur:
                cur.execute("EXPLAIN QUERY PLAN " + sql)
                plan = " | ".join(str(row[-1]) for row in cur.fetchall())
            assert "entry_children" in plan, plan
