"""`NodeTable`: nodes made on demand fold exactly like the dict of every node."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.session.graph import GraphNode, NodeTable, TreeShape, fold_tree


def _rows(seed: int, n: int, start: int = 0) -> list[tuple[str, str | None, str, str | None]]:
    rng = random.Random(seed)
    out: list[tuple[str, str | None, str, str | None]] = []
    for i in range(start, start + n):
        ids = [r[0] for r in out] or [f"e{start - 1}"]
        parent = (
            None if rng.random() < 0.03 else (ids[-1] if rng.random() < 0.8 else rng.choice(ids))
        )
        kind = rng.choice(["message"] * 8 + ["compaction", "branch_summary", "label"])
        role = rng.choice(["user", "assistant", "toolResult", ""]) if kind == "message" else None
        out.append((f"e{i}", parent, kind, role))
    return out


def _plain(rows) -> dict[str, GraphNode]:
    return {r[0]: GraphNode(r[0], r[1], r[2], r[3] or None) for r in rows}


def _fold(nodes, shape, cursor):
    parent = shape.parent  # the route from the shape: asking every node would make them all
    path, leaf = [], cursor
    while leaf and leaf not in path:
        path.append(leaf)
        leaf = parent.get(leaf)
    graph = fold_tree(nodes, active_path=path[::-1], cursor_id=cursor, shape=shape, max_nodes=40)
    return [
        (i.kind, i.entry_id, i.parent_key, i.count, i.leaves, i.user_turns, i.node)
        for i in graph.items
    ]


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 400), cut=st.floats(0, 1))
def test_a_table_folds_like_the_dict_of_its_nodes(seed, n, cut):
    rows = _rows(seed, n)
    shape = TreeShape.build(rows)
    cursor = rows[int(cut * (len(rows) - 1))][0]
    table = NodeTable.of(rows)
    assert table == _plain(rows) and len(table) == len(rows)
    assert _fold(table, shape, cursor) == _fold(_plain(rows), shape, cursor)


def test_only_the_walked_nodes_are_made():
    rows = _rows(4, 5_000)
    table = NodeTable.of(rows)
    _fold(table, TreeShape.build(rows), rows[-1][0])
    assert 0 < len(table._made) < len(rows)


def test_marks_replace_their_nodes_and_leave_the_kept_table_plain():
    rows = _rows(7, 300)
    table = NodeTable.of(rows)
    marked_id = rows[10][0]
    mark = replace(table[marked_id], label="here", flags=frozenset(["hidden"]))
    marked = table.marked({marked_id: mark, "not-an-entry": mark})
    assert marked[marked_id] is mark and "not-an-entry" not in marked
    assert table[marked_id].label is None
    expected = {**_plain(rows), marked_id: mark}
    shape = TreeShape.build(rows)
    assert _fold(marked, shape, marked_id) == _fold(expected, shape, marked_id)


def test_an_extended_table_equals_a_fresh_one_and_a_repeated_id_is_made_again():
    rows = _rows(9, 200)
    table = NodeTable.of(rows)
    old_node = table[rows[5][0]]
    more = _rows(10, 50, start=200)
    more.append((rows[5][0], rows[0][0], "compaction", None))  # an id repeated later
    grown = table.extended(more)
    assert grown == _plain(rows + more)
    assert grown[rows[5][0]].type == "compaction" and table[rows[5][0]] is old_node
    assert len(table) == 200 and table.extended([]) is table


def test_an_earlier_table_does_not_answer_for_ids_appended_after_it():
    rows = _rows(11, 100)
    table = NodeTable.of(rows)
    table[rows[3][0]]
    grown = table.extended(_rows(12, 10, start=100))  # no repeated id: the made nodes copy
    assert grown["e105"].id == "e105" and "e105" not in table
    with pytest.raises(KeyError):
        table["e105"]
