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


def turns(n_turns: int, per_turn: int = 6) -> list[GraphNode]:
    """A linear session of user turns, each followed by `per_turn` assistant/tool entries."""
    out, parent = [], None
    for t in range(n_turns):
        for k in range(per_turn + 1):
            nid = f"t{t}_{k}"
            role = "user" if k == 0 else ("assistant" if k % 2 else "toolResult")
            out.append(GraphNode(nid, parent, "message", role))
            parent = nid
    return out


def test_a_linear_path_reads_as_its_user_turns():
    nodes = turns(30)
    path = [n.id for n in nodes]
    g = fold_tree(nodes, active_path=path, cursor_id=path[-1])
    users = [i.entry_id for i in g.items if i.kind == "entry" and i.node.role == "user"]
    assert users == [f"t{t}_0" for t in range(30)]
    # user, then the folded run of that turn, then the next user message
    kinds = [i.kind for i in g.items]
    assert kinds[:4] == ["entry", "chain", "entry", "chain"]
    chains = [i for i in g.items if i.kind == "chain"]
    assert [c.count for c in chains] == [6] * 29 + [5]  # the last entry is the cursor
    assert all(c.user_turns == 0 and c.active for c in chains)
    # Off the active path nothing changes: one root, one chain, one leaf.
    assert [i.kind for i in fold_tree(nodes).items] == ["entry", "chain", "entry"]


def test_user_turns_beyond_the_budget_are_spread_and_counted():
    nodes = turns(500, per_turn=3)
    path = [n.id for n in nodes]
    g = fold_tree(nodes, active_path=path, cursor_id=path[-1], max_nodes=100)
    assert len(g.items) <= 100
    kept = [
        int(i.entry_id[1:].split("_")[0])
        for i in g.items
        if i.kind == "entry" and i.node.role == "user"
    ]
    assert 30 <= len(kept) <= 40  # 2/5 of the budget, less root and cursor
    assert kept[-15:] == list(range(485, 500))  # the most recent turns all stay
    early = [t for t in kept if t < 485]
    assert early[0] == 0 and max(b - a for a, b in zip(early, early[1:], strict=False)) < 40
    folded = sum(i.user_turns for i in g.items if i.kind == "chain")
    assert folded + len(kept) == 500  # every user message is drawn or counted in a chain
    dot = to_dot(g)
    assert "user msgs folded" in dot and "user messages among them" in dot


def test_folding_is_deterministic():
    nodes = turns(300, per_turn=4) + linear(5, prefix="side", parent="t40_2")
    path = [n.id for n in nodes[: 300 * 5]]
    first = to_dot(fold_tree(nodes, active_path=path, cursor_id=path[-1], max_nodes=120))
    again = to_dot(
        fold_tree(list(reversed(nodes)), active_path=path, cursor_id=path[-1], max_nodes=120)
    )
    assert first == to_dot(fold_tree(nodes, active_path=path, cursor_id=path[-1], max_nodes=120))
    assert {ln for ln in first.splitlines() if "label=" in ln} and first.count("->") == again.count(
        "->"
    )


def test_a_single_entry_between_kept_entries_is_drawn_not_folded():
    # e1 alone sits between the root and a compaction: "⋯ 1 entry" would hide it for nothing.
    nodes = linear(6)
    nodes[2] = GraphNode("e2", "e1", "compaction")
    g = fold_tree(nodes)
    assert not [i for i in g.items if i.kind == "chain" and i.count == 1]
    assert "e1" in {i.entry_id for i in g.items if i.kind == "entry"}
    assert [i.count for i in g.items if i.kind == "chain"] == [2]  # e3, e4 still fold
