"""Folding session trees into a bounded graph, and the DOT it produces."""

from __future__ import annotations

from collections import Counter

from explorer.session.graph import GraphNode, dot_quote, fold_tree, to_dot


def linear(n: int, prefix: str = "e", parent: str | None = None) -> list[GraphNode]:
    out = []
    for i in range(n):
        nid = f"{prefix}{i}"
        out.append(GraphNode(nid, parent, "message", "user" if i % 2 == 0 else "assistant"))
        parent = nid
    return out


def test_a_linear_chain_folds_to_root_chain_leaf():
    g = fold_tree(linear(1000))
    kinds = [i.kind for i in g.items]
    assert kinds == ["entry", "chain", "entry"]  # root (no parent), 998 folded, leaf
    assert g.items[1].count == 998
    assert g.total_entries == 1000


def test_branch_points_labels_and_compactions_stay_individual():
    nodes = linear(50)
    nodes[20] = GraphNode("e20", "e19", "compaction")
    nodes[30] = GraphNode("e30", "e29", "message", "user", label="checkpoint")
    nodes.append(GraphNode("x1", "e10", "message", "user"))
    g = fold_tree(nodes)
    entries = {i.entry_id for i in g.items if i.kind == "entry"}
    assert {"e0", "e10", "e20", "e30", "e49", "x1"} <= entries
    assert next(i for i in g.items if i.entry_id == "e10").is_branch_point


def test_the_graph_stays_bounded_however_bushy():
    nodes = linear(20000)
    for b in range(0, 20000, 5):
        nodes += linear(4, prefix=f"b{b}_", parent=f"e{b}")
    path = [n.id for n in nodes[:20000]]
    g = fold_tree(nodes, active_path=path, cursor_id="e19999", max_nodes=200)
    assert len(g.items) <= 450
    assert g.truncated
    assert any(i.kind == "subtree" for i in g.items) or any(i.side_branches for i in g.items)
    # the cursor and the root are always drawn
    assert {"e0", "e19999"} <= {i.entry_id for i in g.items if i.kind == "entry"}


def test_expanding_a_chain_and_opening_a_subtree():
    nodes = linear(100)
    g = fold_tree(nodes, expanded=["e1"])
    assert Counter(i.kind for i in g.items)["entry"] == 100
    sub = fold_tree(nodes + linear(10, prefix="s", parent="e50"), root_id="s0")
    assert sub.items[0].entry_id == "s0" and sub.total_entries == 110
    assert all(i.entry_id.startswith("s") for i in sub.items)


def test_active_route_reads_straight_down_in_rows():
    nodes = linear(10) + linear(3, prefix="s", parent="e4")
    g = fold_tree(nodes, active_path=[f"e{i}" for i in range(10)], cursor_id="e9")
    rows = g.rows()
    main = [indent for item, indent in rows if item.active]
    assert set(main) == {0}
    assert any(indent == 1 for item, indent in rows if not item.active)


def test_cycles_and_dangling_parents_do_not_hang():
    nodes = [
        GraphNode("a", "b", "message"),
        GraphNode("b", "a", "message"),
        GraphNode("c", "missing", "message"),
    ]
    g = fold_tree(nodes)
    assert "c" in {i.entry_id for i in g.items}


def test_dot_escapes_hostile_text():
    assert dot_quote('x"\\N\ny') == '"x\\"\\\\N y"'
    nodes = [
        GraphNode(
            "r", None, "message", "user", label='a" ] ; evil [ URL="javascript:1', title="\\G\\N"
        )
    ]
    dot = to_dot(fold_tree(nodes), href=lambda item: "/s/?entry=" + item.entry_id)
    assert 'URL="/s/?entry=r"' in dot
    assert 'URL="javascript' not in dot
    assert "\\\\G\\\\N" in dot


def test_active_edges_and_classes_are_marked():
    nodes = linear(5) + linear(2, prefix="s", parent="e2")
    dot = to_dot(
        fold_tree(nodes, active_path=["e0", "e1", "e2", "e3", "e4"], cursor_id="e4"), selected="e2"
    )
    assert (
        "ge-active" in dot and "ge-edge-active" in dot and "ge-selected" in dot and "ge-leaf" in dot
    )
