"""`full_path` reads a route's rows by primary key; what it returns must be what reading
them by entry id returns, including for index rows whose key does not name their entry."""

from __future__ import annotations

import pytest

from explorer import queries

from . import crafted

pytestmark = pytest.mark.django_db

HEADER = crafted.header("3b1f0a52-7c7e-4f0e-9d3c-6a2b9e8d1c44")
OTHER = crafted.header("9c2e4d11-1a3b-4c5d-8e6f-7a8b9c0d1e2f")


def _entries(prefix: str, n: int, word: str = "text") -> list[dict]:
    out, parent = [], None
    for k in range(n):
        role = "user" if k % 2 == 0 else "assistant"
        eid = f"{prefix}{k:03d}"
        out.append(
            crafted.message(eid, parent, role, f"{word} {k} é \u2028", k, usage=crafted.usage(10))
        )
        parent = eid
    return out


def _by_id(session, light) -> list[dict]:
    data = queries.load_entries(session, [e.entry_id for e in light])
    return [data[e.entry_id] for e in light if e.entry_id in data]


def test_reading_by_key_returns_what_reading_by_id_returns():
    session = crafted.imported(crafted.session_bytes(HEADER, _entries("m", 30)), "a.jsonl")
    light = queries.light_path(session, "m029")
    assert len(light) == 30 and all(e.pk for e in light)
    path = queries.full_path(session, light)
    assert path == _by_id(session, light)
    assert [e["id"] for e in path] == [e.entry_id for e in light]


def test_rows_whose_key_names_another_entry_are_read_by_id():
    session = crafted.imported(crafted.session_bytes(HEADER, _entries("m", 6)), "a.jsonl")
    other = crafted.imported(crafted.session_bytes(OTHER, _entries("m", 6, "other")), "b.jsonl")
    light = queries.light_path(session, "m005")
    foreign = queries.light_path(other, "m005")  # the same ids, rows of another session
    mixed = [
        light[0]._replace(pk=0),  # no key
        light[1]._replace(pk=light[2].pk),  # the key of another entry of the route
        light[2]._replace(pk=foreign[2].pk),  # the same entry id in another session
        *light[3:],
    ]
    path = queries.full_path(session, mixed)
    assert path == _by_id(session, light)
    assert [e["id"] for e in path] == [e.entry_id for e in light]
    # The other session's row was not taken for this one's.
    assert path[2]["message"]["content"].startswith("text 2")
