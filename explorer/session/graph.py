"""Session tree → folded graph → DOT source (a string; rendering to SVG happens elsewhere).

A real session has tens of thousands of entries, almost all of them in long linear runs.
Drawing each entry would give graphviz an impossible layout and the reader an unreadable
picture, so linear chains fold into one node carrying a count. Only entries that matter for
the tree's shape or meaning stay individual: roots, branch points, leaves, labelled entries,
compactions, branch summaries and the cursor. On the active path the user's messages stay
individual too while the budget allows, so a long linear session reads as its turns (user
message, then the folded run of replies and tool calls). A node budget bounds the output
however large or bushy the session is: the active path is placed first, and whatever does not
fit becomes a "subtree" node that can be opened on its own (`root=`).

Pure functions over plain records: no Django, no I/O.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from .gcpause import gc_paused

DEFAULT_MAX_NODES = 250

# Entry types drawn as individual nodes wherever they occur.
DISTINCT_TYPES = frozenset({"compaction", "branch_summary"})


@dataclass(frozen=True, slots=True)
class GraphNode:
    """One session entry as the graph needs it (no message bodies)."""

    id: str
    parent_id: str | None
    type: str
    role: str | None = None
    label: str | None = None  # the user's bookmark, if any
    title: str = ""  # a short description, e.g. the first words of a message
    flags: frozenset[str] = frozenset()  # e.g. "hidden", "replaced", "error", "tools"

    def __reduce__(self) -> tuple:
        """Pickle as the constructor's arguments: a kept figure holds 50,000 nodes, and
        the slotted dataclass's default state per field costs several times as much to
        write to a shared cache and read back."""
        if self.label is None and not self.title and not self.flags:
            return (GraphNode, (self.id, self.parent_id, self.type, self.role))
        return (
            GraphNode,
            (self.id, self.parent_id, self.type, self.role, self.label, self.title, self.flags),
        )


@dataclass(slots=True)
class FoldedItem:
    """One drawn node: a single entry, a folded chain, or a closed subtree."""

    key: str  # DOT node name, unique in one graph
    kind: str  # "entry" | "chain" | "subtree"
    entry_id: str  # the entry; the chain's first entry; the subtree's root
    parent_key: str | None
    count: int = 1  # entries represented
    last_id: str | None = None  # last entry of a chain
    node: GraphNode | None = None  # set for kind == "entry"
    active: bool = False  # on the path from the root to the cursor
    leaves: int = 0  # leaves inside a folded subtree
    side_branches: int = 0  # branches hidden inside a folded stretch of the active path
    merged: int = 1  # closed subtrees gathered in one "subtree" node
    user_turns: int = 0  # user messages folded into a chain
    children: list[FoldedItem] = field(default_factory=list)

    @property
    def is_branch_point(self) -> bool:
        return len(self.children) > 1


@dataclass(slots=True)
class FoldedGraph:
    roots: list[FoldedItem]
    items: list[FoldedItem]
    total_entries: int
    truncated: bool  # some subtrees were closed to respect the budget

    def rows(self) -> list[tuple[FoldedItem, int]]:
        """Depth-first (item, indent) pairs for an indented text tree.

        Like a terminal tree view, a route reads straight down: the active child (or the
        first) of a branch point stays in its parent's column and only the other children
        are indented, so a long active path never drifts to the right.
        """
        out: list[tuple[FoldedItem, int]] = []
        stack: list[tuple[FoldedItem, int]] = [(r, 0) for r in reversed(self.roots)]
        while stack:
            item, indent = stack.pop()
            out.append((item, indent))
            kids = sorted(item.children, key=lambda c: not c.active)
            if not kids:
                continue
            # Side branches first (indented), then the main line continues in this column.
            main, sides = kids[0], kids[1:]
            stack.append((main, indent))
            stack.extend((c, indent + 1) for c in reversed(sides))
        return out


def is_user_turn(node: GraphNode) -> bool:
    return node.type == "message" and node.role == "user"


def spread_pick(ids: Sequence[str], slots: int) -> list[str]:
    """At most `slots` of `ids` (in order): the most recent half, the rest evenly spread over
    the earlier ones, so both the latest turns and the session's overall shape stay visible."""
    if slots <= 0:
        return []
    if len(ids) <= slots:
        return list(ids)
    recent = (slots + 1) // 2
    rest = slots - recent
    earlier = ids[: len(ids) - recent]
    picked = [earlier[(i * len(earlier)) // rest] for i in range(rest)]
    return picked + list(ids[len(ids) - recent :])


def _links(
    records: Sequence[tuple[str, str | None]], known: Iterable[str]
) -> tuple[dict[str, list[str]], list[str]]:
    """Children lists and roots of ``(id, parent id)`` records; ``known``: every id."""
    ids = known if isinstance(known, (set, frozenset, dict)) else set(known)
    children: dict[str, list[str]] = {}
    roots: list[str] = []
    seen: set[str] = set()
    for nid, p in records:
        if nid in seen:  # duplicate ids: the last record wins, attached once
            continue
        seen.add(nid)
        if not p or p == nid or p not in ids:
            roots.append(nid)
        else:
            children.setdefault(p, []).append(nid)
    return children, roots


def _children_map(
    nodes: Sequence[GraphNode],
) -> tuple[dict[str, GraphNode], dict[str, list[str]], list[str]]:
    by_id: dict[str, GraphNode] = {}
    for n in nodes:
        by_id[n.id] = n
    children, roots = _links([(n.id, n.parent_id) for n in nodes], by_id)
    return by_id, children, roots


@dataclass(slots=True)
class TreeShape:
    """A tree's structure alone: children in file order, roots, and (entries, leaves) below
    each node reachable from a root.

    The structure changes only when entries are added, while what is drawn (labels, the
    cursor, what is unfolded) changes with every request; a caller that keeps the shape
    and extends it with the appended records spares `fold_tree` the two passes over every
    entry that dominate a large tree."""

    children: dict[str, list[str]]
    roots: list[str]
    sizes: dict[str, tuple[int, int]]
    parent: dict[str, str]  # attached parent of every non-root
    missing: set[str]  # parent ids named but not present (their children are roots)

    @classmethod
    def build(cls, records: Sequence[Sequence[Any]]) -> TreeShape:
        """The shape of ``(id, parent id, ...)`` records in file order (fields after the
        first two are ignored, so the stored skeleton rows serve as they are).

        One pass makes the children lists, roots, parents and missing ids together (the
        first record of a repeated id is the one attached, as in ``fold_tree``); the
        repeated-id bookkeeping runs only when some id does repeat. The collector is paused
        meanwhile: what is built here is kept, and on a large heap its passes over the new
        lists and tuples took as long as the build itself."""
        with gc_paused():
            return cls._build(records)

    @classmethod
    def _build(cls, records: Sequence[Sequence[Any]]) -> TreeShape:
        ids = {r[0] for r in records}
        children: dict[str, list[str]] = {}
        roots: list[str] = []
        parent: dict[str, str] = {}
        missing: set[str] = set()
        seen: set[str] | None = set() if len(ids) != len(records) else None
        for r in records:
            nid: str = r[0]
            p: str | None = r[1]
            if seen is not None:
                if nid in seen:  # a repeated id: attached once, but its parent may be missing
                    if p and p != nid and p not in ids:
                        missing.add(p)
                    continue
                seen.add(nid)
            if not p or p == nid:
                roots.append(nid)
            elif p in ids:
                kids = children.get(p)
                if kids is None:
                    children[p] = [nid]
                else:
                    kids.append(nid)
                parent[nid] = p
            else:
                roots.append(nid)
                missing.add(p)
        return cls(children, roots, _subtree_sizes(roots, children), parent, missing)

    def extend(self, records: Sequence[tuple[str, str | None]]) -> bool:
        """Add appended records in place. False means the shape is no longer valid and
        must be built again (a repeated id, a record naming a later or absent one, an id
        an earlier record was waiting for, or a parent outside every rooted subtree)."""
        # Looked up in the shape's own maps rather than a union of them: that union is a
        # new set of every id, as costly on a 50,000-entry tree as the rest of an append.
        roots = set(self.roots)

        def present(nid: str) -> bool:
            return nid in self.sizes or nid in self.parent or nid in roots

        batch: set[str] = set()
        for nid, p in records:
            if present(nid) or nid in batch or nid in self.missing:
                return False
            batch.add(nid)
            if p and p != nid and not present(p) and p not in batch:
                return False  # a missing or later parent: leave it to a full build
        for nid, p in records:
            if not p or p == nid:
                self.roots.append(nid)
                self.sizes[nid] = (1, 1)
                continue
            if p not in self.sizes:
                return False
            was_leaf = not self.children.get(p)
            self.children.setdefault(p, []).append(nid)
            self.parent[nid] = p
            self.sizes[nid] = (1, 1)
            more_leaves = 0 if was_leaf else 1
            node: str | None = p
            steps = 0
            while node is not None:
                total, leaves = self.sizes[node]
                self.sizes[node] = (total + 1, leaves + more_leaves)
                node = self.parent.get(node)
                steps += 1
                if steps > len(self.sizes):  # a loop in the links: rebuild
                    return False
        return True


def _subtree_sizes(
    start: Iterable[str], children: dict[str, list[str]]
) -> dict[str, tuple[int, int]]:
    """(entries, leaves) below and including each node reachable from ``start``.

    Children lists attach each id once, so what hangs below distinct starts is a forest:
    one breadth-first listing, summed from its end into two count lists by each node's
    parent position, gives every size without recursion (paths can be 50k deep) and
    without a tuple per node until the answer is zipped together at the end. Should the
    listing meet a node twice (overlapping starts, a hand-made children map), the guarded
    walk below gives the answer instead."""
    starts = list(dict.fromkeys(start))
    order = list(starts)
    up = [-1] * len(order)  # position in ``order`` of each listed node's parent
    most = len(order) + sum(map(len, children.values()))  # a forest lists no more
    inner: list[int] = []  # positions of the nodes with children
    get = children.get
    for at, nid in enumerate(order):  # grows while it is read: children join the end
        kids = get(nid)
        if kids:
            order.extend(kids)
            up.extend([at] * len(kids))
            inner.append(at)
            if len(order) > most:
                break  # a loop in the links
    if len(order) > most or len(set(order)) != len(order):
        return _subtree_sizes_walk(starts, children)
    totals = [1] * len(order)
    leaves = [1] * len(order)
    for at in inner:
        leaves[at] = 0
    for at in range(len(order) - 1, len(starts) - 1, -1):
        p = up[at]
        totals[p] += totals[at]
        leaves[p] += leaves[at]
    return dict(zip(order, zip(totals, leaves, strict=True), strict=True))


def _subtree_sizes_walk(
    start: Iterable[str], children: dict[str, list[str]]
) -> dict[str, tuple[int, int]]:
    """:func:`_subtree_sizes` by a guarded depth-first walk, for links that are no forest."""
    sizes: dict[str, tuple[int, int]] = {}
    for root in start:
        stack: list[tuple[str, bool]] = [(root, False)]
        while stack:
            nid, done = stack.pop()
            if done:
                kids = children.get(nid, ())
                total, leaves = 1, 0 if kids else 1
                for k in kids:
                    t, lv = sizes.get(k, (0, 0))
                    total += t
                    leaves += lv
                sizes[nid] = (total, leaves)
                continue
            if nid in sizes:
                continue
            sizes[nid] = (1, 1)  # provisional; guards against cycles
            stack.append((nid, True))
            stack.extend((k, False) for k in children.get(nid, ()) if k not in sizes)
    return sizes


class KeptShape(Protocol):
    """What ``fold_tree`` reads of a shape: a :class:`TreeShape`, or the same facts behind
    mappings."""

    @property
    def children(self) -> Mapping[str, list[str]]: ...

    @property
    def roots(self) -> list[str]: ...

    @property
    def sizes(self) -> Mapping[str, tuple[int, int]]: ...

    @property
    def parent(self) -> Mapping[str, str]: ...


class QuietRuns(Protocol):
    """What a tree that knows its plain runs tells :func:`fold_walk` (``explorer.session.
    segfold``). A plain entry has one child and is not a root, labelled, of a distinct type
    or kept (pinned, the cursor, and the user turns the walk draws, :meth:`stop_at`): a
    chain of the fold steps over a run of them at once."""

    def path_candidates(self, path: Sequence[str]) -> tuple[Sequence[str], Collection[str]] | None:
        """When ``path`` is the tree's route to its last id (every id in the tree): its ids
        that are not plain or are user messages, in order, and the plain user messages
        among them. Else None (the walk reads the whole path)."""
        ...

    def stop_at(self, ids: Collection[str]) -> None:
        """``ids`` (user turns the walk draws) end the plain runs they are in."""
        ...

    def quiet_after(self, nid: str) -> tuple[int, str, int, str] | None:
        """The plain run right after ``nid`` (its one child onwards) as (entries, last id,
        user messages among them, the id after the run), or None where there is none."""
        ...


def fold_tree(
    nodes: Sequence[GraphNode] | Mapping[str, GraphNode],
    *,
    active_path: Iterable[str] = (),
    cursor_id: str | None = None,
    root_id: str | None = None,
    expanded: Iterable[str] = (),
    pinned: Iterable[str] = (),
    max_nodes: int = DEFAULT_MAX_NODES,
    shape: KeptShape | None = None,
) -> FoldedGraph:
    """Fold `nodes` (any order; parents need not come first) into at most ~`max_nodes` items.

    `shape`: the nodes' :class:`TreeShape` (or the same facts behind mappings) when the
    caller has one (it must describe
    exactly these nodes); used for the whole tree, not for a `root_id` subtree. With a
    shape, `nodes` may be a mapping id → node (the last record of a repeated id, as the
    list would give), so a caller that keeps the nodes too need not rebuild 50,000 of them
    per request; without one, a mapping folds as the list of its values.

    `active_path`: ids from the root to the cursor, highlighted and laid out first.
    `root_id`: draw only the subtree under this entry (on-demand loading of closed subtrees).
    `expanded`: first ids of chains to unfold into individual entries.
    `pinned`: extra ids that must stay individual (e.g. the selected entry).

    User messages on the active path stay individual while about 2/5 of `max_nodes` allows
    (counting the path's other notable entries); beyond that `spread_pick` chooses which,
    and each chain counts the user messages folded into it (`FoldedItem.user_turns`).
    """
    children: dict[str, list[str]]
    roots: list[str]
    by_id: Mapping[str, GraphNode] = {}
    if shape is not None and not root_id:
        by_id = nodes if isinstance(nodes, Mapping) else {n.id: n for n in nodes}
        if len(shape.parent) + len(shape.roots) != len(by_id):
            shape = None  # not these nodes' shape (e.g. read at another moment)
    else:
        shape = None
    if shape is not None:
        children, roots = cast("dict[str, list[str]]", shape.children), shape.roots
    else:
        listed = list(nodes.values()) if isinstance(nodes, Mapping) else nodes
        by_id, children, roots = _children_map(listed)
    starts = [root_id] if root_id and root_id in by_id else roots
    sizes = shape.sizes if shape is not None else _subtree_sizes(starts, children)
    return fold_walk(
        by_id,
        children,
        roots,
        starts,
        sizes,
        active_path=active_path,
        cursor_id=cursor_id,
        expanded=expanded,
        pinned=pinned,
        max_nodes=max_nodes,
    )


def fold_walk(
    by_id: Mapping[str, GraphNode],
    children: Mapping[str, list[str]],
    roots: list[str],
    starts: list[str],
    sizes: Mapping[str, tuple[int, int]],
    *,
    active_path: Iterable[str] = (),
    cursor_id: str | None = None,
    expanded: Iterable[str] = (),
    pinned: Iterable[str] = (),
    max_nodes: int = DEFAULT_MAX_NODES,
    quiet: QuietRuns | None = None,
) -> FoldedGraph:
    """The walk of :func:`fold_tree` once the tree is known: ``children`` and ``sizes`` are
    read only for the entries the walk reaches (and the starts it closes), ``by_id`` only
    for those and the active path, so lazy mappings (``explorer.session.segfold``) fold a
    large tree reading only what is drawn. ``len(by_id)`` is the total shown.

    ``quiet``: where the tree knows its runs of plain entries (:class:`QuietRuns`), the walk
    steps over each run at once and reads the active path's candidates only, instead of
    every entry of the chains it folds; the fold is the same."""
    active_path = list(active_path)
    active = set(active_path)
    expanded_set = set(expanded)
    keep = set(pinned)
    if cursor_id:
        keep.add(cursor_id)

    root_set = set(roots)

    def naturally_interesting(nid: str) -> bool:
        n = by_id[nid]
        return (
            nid in root_set
            or len(children.get(nid, ())) != 1
            or bool(n.label)
            or n.type in DISTINCT_TYPES
            or nid in keep
        )

    # The active path is always drawn, so it gets its own share of the budget: beyond it the
    # stretch between the first few and the last (nearest the cursor) notable entries folds
    # into one chain, and the side branches inside that stretch are counted, not drawn.
    active_next: dict[str, str] = {}
    demoted: set[str] = set()
    known = quiet.path_candidates(active_path) if quiet is not None and active else None
    plain_users: Collection[str] = ()
    if known is not None:
        path_list = active_path  # every id is in the tree (``path_candidates`` checked)
        candidates, plain_users = known
    else:
        path_list = [a for a in active_path if a in by_id] if active else []
        candidates = path_list
    for a, b in zip(path_list, path_list[1:], strict=False):
        active_next[a] = b
    notable = [a for a in candidates if a not in plain_users and naturally_interesting(a)]
    share = max(4, max_nodes // 3)
    if len(notable) > share:
        head = 2
        demoted = set(notable[head : len(notable) - (share - head)]) - keep

    # User turns on the active path get what is left of the path's budget (each adds about
    # two drawn items: the message and the folded run after it).
    turn_slots = max_nodes * 2 // 5 - (len(notable) - len(demoted))
    turns = set(
        spread_pick(
            [
                a
                for a in candidates
                if a in plain_users or (is_user_turn(by_id[a]) and not naturally_interesting(a))
            ],
            turn_slots,
        )
    )
    if quiet is not None:
        quiet.stop_at(turns)

    def interesting(nid: str) -> bool:
        return nid not in demoted and (nid in turns or naturally_interesting(nid))

    def next_in_chain(nid: str) -> str:
        if nid in demoted:
            return active_next.get(nid) or children[nid][0]
        return children[nid][0]

    items: list[FoldedItem] = []
    out_roots: list[FoldedItem] = []
    truncated = False
    counter = 0
    visited: set[str] = set()

    def new_key() -> str:
        nonlocal counter
        counter += 1
        return f"n{counter}"

    def attach(item: FoldedItem, parent: FoldedItem | None) -> None:
        items.append(item)
        if parent is None:
            out_roots.append(item)
        else:
            parent.children.append(item)

    # Priority queue of segment starts: active first, then breadth (depth in items), then order.
    overflow: dict[str | None, FoldedItem] = {}
    seq = 0
    heap: list[tuple[int, int, int, str, int]] = []
    parents: dict[int, FoldedItem | None] = {}

    def push(nid: str, parent: FoldedItem | None, level: int) -> None:
        nonlocal seq
        seq += 1
        parents[seq] = parent
        heapq.heappush(heap, (0 if nid in active else 1, level, seq, nid, seq))

    for r in starts:
        push(r, None, 0)

    while heap:
        _, level, _, start, pid = heapq.heappop(heap)
        parent = parents.pop(pid)
        if start in visited:
            continue
        if len(items) >= max_nodes and start not in active:
            # Over budget: one closed "subtree" node per parent, however many children.
            total, leaves = sizes.get(start, (1, 1))
            pkey = parent.key if parent else None
            stub = overflow.get(pkey)
            if stub is None:
                stub = FoldedItem(new_key(), "subtree", start, pkey, count=total, leaves=leaves)
                overflow[pkey] = stub
                attach(stub, parent)
            else:
                stub.count += total
                stub.leaves += leaves
                stub.merged += 1
                if parent is not None and parent.node is not None:
                    stub.entry_id = parent.node.id  # opening it shows all the siblings
            truncated = True
            continue
        # Walk one segment: a chain of uninteresting single-child entries, then (maybe) an
        # interesting entry, whose children start new segments.
        nid: str | None = start
        chain: list[str] = []  # its first and last ids, ``chain_len`` entries in all
        chain_len = 0
        side_count = 0
        turn_count = 0
        unfold = start in expanded_set
        cur_parent = parent
        while nid is not None and nid not in visited:
            visited.add(nid)
            if interesting(nid) or unfold:
                if chain:
                    cur_parent = _emit_chain(
                        chain, chain_len, cur_parent, active, new_key, attach, side_count,
                        turn_count, by_id,
                    )  # fmt: skip
                    chain = []
                    chain_len = 0
                    side_count = 0
                    turn_count = 0
                item = FoldedItem(
                    new_key(),
                    "entry",
                    nid,
                    cur_parent.key if cur_parent else None,
                    node=by_id[nid],
                    active=nid in active,
                )
                attach(item, cur_parent)
                cur_parent = item
                kids = children.get(nid, ())
                if len(kids) == 1 and unfold:
                    if len(items) >= max_nodes and kids[0] not in active:
                        push(kids[0], cur_parent, level + 1)
                        break
                    nid = kids[0]
                    continue
                for k in kids:
                    push(k, cur_parent, level + 1)
                break
            chain[min(chain_len, 1) :] = [nid]
            chain_len += 1
            turn_count += is_user_turn(by_id[nid])
            if nid in demoted:
                sides = len(children.get(nid, ())) - 1
                side_count += max(0, sides)
                if sides:
                    truncated = True
            elif quiet is not None:
                run = quiet.quiet_after(nid)
                if run is not None:
                    # ``count`` plain entries (one child each, nothing that stops a chain),
                    # ``users`` of them user messages, end at ``last``; ``after`` follows.
                    count, last, users, after = run
                    chain[1:] = [last]
                    chain_len += count
                    turn_count += users
                    nid = after
                    continue
            nxt = next_in_chain(nid) if children.get(nid) else None
            if nxt is None:
                break
            nid = nxt
        if chain:
            _emit_chain(
                chain, chain_len, cur_parent, active, new_key, attach, side_count, turn_count,
                by_id,
            )  # fmt: skip
    return FoldedGraph(out_roots, items, total_entries=len(by_id), truncated=truncated)


def _emit_chain(
    chain: list[str],
    count: int,
    parent: FoldedItem | None,
    active: set[str],
    new_key: Callable[[], str],
    attach: Callable[[FoldedItem, FoldedItem | None], None],
    side_branches: int = 0,
    user_turns: int = 0,
    by_id: Mapping[str, GraphNode] | None = None,
) -> FoldedItem:
    # Folding one entry hides it behind a "⋯ 1 entry" node that is no shorter than the entry
    # itself: draw it as the entry (unless it stands for side branches it does not draw).
    if count == 1 and not side_branches and by_id is not None and chain[0] in by_id:
        single = FoldedItem(
            new_key(),
            "entry",
            chain[0],
            parent.key if parent else None,
            node=by_id[chain[0]],
            active=chain[0] in active,
        )
        attach(single, parent)
        return single
    item = FoldedItem(
        new_key(),
        "chain",
        chain[0],
        parent.key if parent else None,
        count=count,
        last_id=chain[-1],
        active=chain[0] in active,
        side_branches=side_branches,
        user_turns=user_turns,
    )
    attach(item, parent)
    return item


# --- DOT -------------------------------------------------------------------------------

_CONTROL_CHARS = dict.fromkeys([*range(0, 32), 127], " ")


def dot_quote(text: object, limit: int = 48) -> str:
    """A double-quoted DOT string holding `text` literally (no graphviz escapes survive)."""
    s = ("" if text is None else str(text)).translate(_CONTROL_CHARS)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


# Palette (light theme; the page CSS can recolour through classes).
_ROLE_FILL = {
    "user": "#dbeafe",
    "assistant": "#f1f5f9",
    "toolResult": "#f8fafc",
    "system": "#fef9c3",
    "bashExecution": "#e0f2fe",
    "custom": "#ede9fe",
}
_ACCENT = "#2563eb"


def chain_caption(item: FoldedItem) -> str:
    """What a folded chain holds, for its graph node and its text-tree row."""
    text = f"⋯ {item.count} entr{'y' if item.count == 1 else 'ies'}"
    if item.user_turns:
        text += f" · {item.user_turns} user msg{'' if item.user_turns == 1 else 's'} folded"
    if item.side_branches:
        text += f" · {item.side_branches} side branches"
    return text


def _entry_caption(node: GraphNode) -> tuple[str, str]:
    kind = node.role or node.type
    if node.type == "compaction":
        kind = "compaction"
    elif node.type == "branch_summary":
        kind = "branch summary"
    elif node.type == "custom_message":
        kind = "custom message"
    return kind, node.title


def _node_attrs(item: FoldedItem, selected: str | None) -> dict[str, str]:
    cls = ["ge", f"ge-{item.kind}"]
    attrs: dict[str, str] = {"fontsize": "10"}
    if item.kind == "chain":
        attrs.update(
            shape="box", style="rounded,dashed,filled", fillcolor="#ffffff", color="#94a3b8"
        )
        text = chain_caption(item)
        attrs["label"] = dot_quote(text, 60)
        tip = f"{item.count} entries folded"
        if item.user_turns:
            tip += (
                f", {item.user_turns} user message{'' if item.user_turns == 1 else 's'} among them"
            )
        attrs["tooltip"] = dot_quote(tip + "; click to unfold", 100)
    elif item.kind == "subtree":
        attrs.update(shape="folder", style="filled", fillcolor="#f8fafc", color="#64748b")
        what = "subtree" if item.merged == 1 else f"{item.merged} subtrees"
        attrs["label"] = dot_quote(f"+ {what}: {item.count} entries, {item.leaves} leaves", 60)
        attrs["tooltip"] = dot_quote("open this subtree", 80)
    else:
        node = item.node
        assert node is not None
        kind, title = _entry_caption(node)
        lines = [dot_quote(kind, 24)[1:-1]]
        if title:
            lines.append(dot_quote(title, 30)[1:-1])
        if node.label:
            lines.append("label: " + dot_quote(node.label, 24)[1:-1])
        attrs["label"] = '"' + "\\n".join(lines) + '"'
        attrs["tooltip"] = dot_quote(f"{node.type} {node.id}: {title}", 100)
        fill = _ROLE_FILL.get(node.role or "", "#ffffff")
        style = ["rounded", "filled"]
        shape = "box"
        color = "#94a3b8"
        if node.type == "compaction":
            shape, fill, color = "box3d", "#ffedd5", "#ea580c"
            cls.append("ge-compaction")
        elif node.type == "branch_summary":
            shape, fill, color = "hexagon", "#f3e8ff", "#9333ea"
            style = ["filled"]
            cls.append("ge-branch-summary")
        if node.label:
            cls.append("ge-labelled")
            color = "#ca8a04"
        if "hidden" in node.flags:
            style.append("dashed")
            cls.append("ge-hidden")
        if "error" in node.flags:
            color = "#dc2626"
        if "archived" in node.flags:  # the first entry of a branch an editor set aside
            style.append("dashed")
            fill, color = "#f1f5f9", "#64748b"
            cls.append("ge-archived")
            lines.append("(archived)")
            attrs["label"] = '"' + "\\n".join(lines) + '"'

        if not item.children:
            attrs["peripheries"] = "2"
            cls.append("ge-leaf")
        elif len(item.children) > 1:
            cls.append("ge-branch")
            attrs["penwidth"] = "1.6"
        attrs.update(shape=shape, style=",".join(style), fillcolor=fill, color=color)
        if selected and node.id == selected:
            cls.append("ge-selected")
            attrs["color"] = "#0f172a"
            attrs["penwidth"] = "2.5"
    if item.active:
        cls.append("ge-active")
        attrs["color"] = _ACCENT
        attrs["penwidth"] = "2.5" if attrs.get("penwidth") != "2.5" else "3"
        attrs["fontcolor"] = "#1e3a8a"
    attrs["class"] = dot_quote(" ".join(cls))
    attrs["id"] = dot_quote("g-" + item.key)
    for k in ("shape", "style", "fillcolor", "color", "penwidth", "peripheries", "fontcolor"):
        if k in attrs and not attrs[k].startswith('"'):
            attrs[k] = dot_quote(attrs[k])
    return attrs


def to_dot(
    graph: FoldedGraph,
    *,
    href: Callable[[FoldedItem], str] | None = None,
    selected: str | None = None,
) -> str:
    """DOT source for a folded graph. `href(item)` gives each node's link (shown as <a>)."""
    lines = [
        "digraph session {",
        '  graph [rankdir="TB", bgcolor="transparent", nodesep="0.25", ranksep="0.32", '
        'fontname="Helvetica", margin="0.1"];',
        '  node [fontname="Helvetica", margin="0.08,0.04", height="0.3"];',
        '  edge [color="#94a3b8", arrowsize="0.5"];',
    ]
    for item in graph.items:
        attrs = _node_attrs(item, selected)
        if href is not None:
            attrs["URL"] = dot_quote(href(item), 2000)
            attrs["target"] = '"_top"'
        body = ", ".join(f"{k}={v}" for k, v in attrs.items())
        lines.append(f"  {item.key} [{body}];")
    for item in graph.items:
        if item.parent_key:
            if item.active:
                lines.append(
                    f'  {item.parent_key} -> {item.key} [color="{_ACCENT}", penwidth="2.2", class="ge-edge-active"];'
                )
            else:
                lines.append(f"  {item.parent_key} -> {item.key};")
    lines.append("}")
    return "\n".join(lines) + "\n"
