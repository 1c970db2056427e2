"""Search on PostgreSQL: the pg_trgm GIN index of migration 0011 serves the search query."""

from __future__ import annotations

import pytest
from django.db import connection

from explorer import queries
from explorer.models import EntryText

pytestmark = [pytest.mark.needs_postgres, pytest.mark.django_db]


def _plan(qs) -> str:
    sql, params = qs.query.sql_with_params()
    with connection.cursor() as cur:
        # A tiny table (and statistics left by earlier tests): ask which index can serve the
        # condition itself. Only bitmap scans stay allowed, and a B-tree can drive one only
        # through a condition on its own columns, which the text search is not.
        for knob in ("enable_seqscan", "enable_indexscan", "enable_indexonlyscan"):
            cur.execute(f"SET LOCAL {knob} = off")
        cur.execute("EXPLAIN " + sql, params)
        return "\n".join(row[0] for row in cur.fetchall())


def test_the_trigram_index_exists():
    with connection.cursor() as cur:
        cur.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s",
                    ["explorer_entrytext_text_trgm"])  # fmt: skip
        (definition,) = cur.fetchone()
    assert "gin_trgm_ops" in definition


def test_search_uses_the_trigram_index_where_icontains_cannot(make_session):
    make_session()
    ours = _plan(queries._text_matches("hello world"))
    assert "explorer_entrytext_text_trgm" in ours, ours
    # What ``icontains`` compiles to (UPPER(text) LIKE UPPER(...)) is not served by it.
    theirs = _plan(EntryText.objects.filter(text__icontains="hello world"))
    assert "explorer_entrytext_text_trgm" not in theirs, theirs


def test_wildcards_in_the_query_are_literal(make_session):
    session = make_session()
    assert queries.search_entries("hello", session=session)["total"] >= 1
    assert queries.search_entries("h_llo", session=session)["total"] == 0
    assert queries.search_entries("%", session=session)["total"] == 0
