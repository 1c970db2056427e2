"""A tree's records and shape in flat arrays: what a reader loads in milliseconds.

:class:`~explorer.session.graph.TreeShape` holds a 50,000-entry tree as dicts of lists and
tuples; a worker that loads a kept copy of one unpickles 150,000 containers (about 30 ms),
and a :class:`~explorer.session.graph.NodeTable` of the same records another 50,000 tuples.
:class:`PackedTree` holds the same facts, the ``(id, parent, type, role)`` records and the
shape `TreeShape.build` gives them, as one list of ids and a few integer arrays, so loading
it is a list and some buffer copies. It answers through the same mappings ``fold_tree``
reads (``children``, ``sizes``, ``parent``, ``roots``, ``missing``, and ``rows`` for a
``NodeTable``), each item made when asked for.

It grows like the tree: :meth:`PackedTree.extended` returns a new tree with appended
records, sharing the packed part (never changed once packed) and copying only the arrays
(buffer copies) and what was added since packing. The rules are ``TreeShape.extend``'s;
when they call for a fresh build (a repeated id, a record naming a later or absent one),
or once more than :data:`OVERLAY_AT_MOST` records were added after packing, it returns None
and the caller packs the whole tree again.

A tree with a repeated id is not packed (:meth:`PackedTree.pack` returns None): which
record of an id the shape attaches and which the node table shows differ there, and such
files are rare enough to take the dict forms.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from explorer.session.graph import TreeShape

OVERLAY_AT_MOST = 4096  # records added after packing before the caller packs afresh

_NO_SIZE = -1
_UNSET: Any = object()


class PackedTree:
    """``(id, parent id, type, role)`` records in file order and their tree shape."""

    __slots__ = (
        "ids",
        "parent_at",
        "kinds",
        "roles",
        "words",
        "kid_start",
        "kids",
        "total",
        "leaf_count",
        "root_ids",
        "missing",
        "odd_parent",
        "packed",
        "added_kids",
        "_index",
        "_added_index",
    )

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.parent_at = array("i")  # position of the attached parent, -1 for a root
        self.kinds = array("H")  # type of each record, as a position in ``words``
        self.roles = array("H")  # role of each record, as a position in ``words``
        self.words: list[Any] = []  # the distinct types and roles (None among them)
        self.kid_start = array("i")  # children of packed record i: kids[kid_start[i]:...[i+1]]
        self.kids = array("i")
        self.total = array("i")  # entries below and including each record, -1: unreachable
        self.leaf_count = array("i")  # leaves below and including each record
        self.root_ids: list[str] = []
        self.missing: set[str] = set()
        self.odd_parent: dict[int, Any] = {}  # raw parent of each record not attached
        self.packed = 0  # records packed; those after it were added by ``extended``
        self.added_kids: dict[int, list[int]] = {}  # children added after packing, by parent
        self._index: dict[str, int] | None = None
        self._added_index: dict[str, int] = {}

    # -- building ---------------------------------------------------------------------------

    @classmethod
    def pack(
        cls, records: Sequence[Sequence[Any]], shape: TreeShape | None = None
    ) -> PackedTree | None:
        """``records`` (file order) packed with ``shape`` (their ``TreeShape.build``, made
        here when not given); None when an id repeats or an id is not a string."""
        ids = [r[0] for r in records]
        if len(set(ids)) != len(ids) or not all(type(i) is str for i in ids):
            return None
        if shape is None:
            shape = TreeShape.build(records)
        self = cls()
        index = {eid: k for k, eid in enumerate(ids)}
        words: dict[Any, int] = {}
        kinds = [words.setdefault(r[2], len(words)) for r in records]
        roles = [words.setdefault(r[3], len(words)) for r in records]
        if len(words) > 65535:
            return None
        parent_at = [-1] * len(ids)
        attached = shape.parent
        for k, r in enumerate(records):
            p = attached.get(r[0])
            if p is None:
                self.odd_parent[k] = r[1]
            else:
                parent_at[k] = index[p]
        kid_start = [0]
        kids: list[int] = []
        children = shape.children
        for eid in ids:
            below = children.get(eid)
            if below:
                kids.extend(index[c] for c in below)
            kid_start.append(len(kids))
        sizes = shape.sizes
        none = (_NO_SIZE, _NO_SIZE)
        counts = [sizes.get(eid, none) for eid in ids]
        self.ids = ids
        self.parent_at = array("i", parent_at)
        self.kinds = array("H", kinds)
        self.roles = array("H", roles)
        self.words = list(words)
        self.kid_start = array("i", kid_start)
        self.kids = array("i", kids)
        self.total = array("i", [c[0] for c in counts])
        self.leaf_count = array("i", [c[1] for c in counts])
        self.root_ids = list(shape.roots)
        self.missing = set(shape.missing)
        self.packed = len(ids)
        self._index = index
        return self

    def __getstate__(self) -> tuple[Any, ...]:
        # The id index is left out: made again from the ids it costs less than unpickling.
        return tuple(getattr(self, name) for name in _PICKLED)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(_PICKLED, state, strict=True):
            setattr(self, name, value)
        self._index = None
        self._added_index = {k: i for i, k in enumerate(self.ids[self.packed :], self.packed)}

    # -- lookups ----------------------------------------------------------------------------

    def _packed_index(self) -> dict[str, int]:
        """Id → position of the packed records, made on first use (a racing reader makes
        an equal one) and shared by every tree extended from this one."""
        index = self._index
        if index is None:
            # dict(zip(...)) builds in C: half the time of a comprehension (8 against 4 ms
            # for 50,000 ids), paid by the first reader of a loaded copy.
            index = dict(zip(self.ids[: self.packed], range(self.packed), strict=True))
            self._index = index
        return index

    def position(self, eid: Any) -> int | None:
        """File position (among the records) of ``eid``, None when absent."""
        at = self._packed_index().get(eid)
        if at is None and self._added_index:
            at = self._added_index.get(eid)
        return at

    def __len__(self) -> int:
        return len(self.ids)

    def kids_of(self, at: int) -> list[int]:
        """Positions of the children of the record at ``at``, in file order."""
        if at < self.packed:
            start, end = self.kid_start[at], self.kid_start[at + 1]
            out = self.kids[start:end].tolist() if end > start else []
        else:
            out = []
        more = self.added_kids.get(at)
        if more:
            out.extend(more)
        return out

    def row(self, at: int) -> tuple[str, Any, Any, Any]:
        """The record at ``at`` as it was given: (id, parent, type, role)."""
        p = self.parent_at[at]
        parent = self.ids[p] if p >= 0 else self.odd_parent.get(at)
        return (self.ids[at], parent, self.words[self.kinds[at]], self.words[self.roles[at]])

    @property
    def children(self) -> _Children:
        return _Children(self)

    @property
    def sizes(self) -> _Sizes:
        return _Sizes(self)

    @property
    def parent(self) -> _Parents:
        return _Parents(self)

    @property
    def roots(self) -> list[str]:
        return self.root_ids

    @property
    def rows(self) -> _Rows:
        """Id → record, for a :class:`~explorer.session.graph.NodeTable`."""
        return _Rows(self)

    def shape(self) -> TreeShape:
        """The dict form (for a caller that needs one; equal to a fresh build)."""
        return TreeShape(
            dict(self.children.items()),
            list(self.root_ids),
            dict(self.sizes.items()),
            dict(self.parent.items()),
            set(self.missing),
        )

    # -- growing ----------------------------------------------------------------------------

    def extended(self, records: Sequence[Sequence[Any]]) -> PackedTree | None:
        """A new tree with appended ``(id, parent, type, role)`` records (this one is left
        as it is: other readers may be folding it), or None when the rules of
        ``TreeShape.extend`` call for a fresh build or the additions outgrew
        :data:`OVERLAY_AT_MOST`."""
        if not records:
            return self
        if len(self.ids) - self.packed + len(records) > OVERLAY_AT_MOST:
            return None
        batch: set[Any] = set()
        for r in records:
            nid, p = r[0], r[1]
            if type(nid) is not str or nid in batch or nid in self.missing:
                return None
            if self.position(nid) is not None:
                return None
            batch.add(nid)
            if p and p != nid and p not in batch and self.position(p) is None:
                return None  # a missing or later parent: leave it to a full build
        new = self._copy()
        for r in records:
            if not new._add(r):
                return None
        return new

    def _copy(self) -> PackedTree:
        new = PackedTree()
        new.ids = list(self.ids)
        new.parent_at = array("i", self.parent_at)
        new.kinds = array("H", self.kinds)
        new.roles = array("H", self.roles)
        new.words = list(self.words)
        new.kid_start = self.kid_start  # the packed part is never changed: shared
        new.kids = self.kids
        new.total = array("i", self.total)
        new.leaf_count = array("i", self.leaf_count)
        new.root_ids = list(self.root_ids)
        new.missing = set(self.missing)
        new.odd_parent = dict(self.odd_parent)
        new.packed = self.packed
        new.added_kids = {k: list(v) for k, v in self.added_kids.items()}
        new._index = self._packed_index()
        new._added_index = dict(self._added_index)
        return new

    def _word(self, value: Any) -> int | None:
        try:
            return self.words.index(value)
        except ValueError:
            if len(self.words) >= 65535:
                return None
            self.words.append(value)
            return len(self.words) - 1

    def _add(self, r: Sequence[Any]) -> bool:
        nid, p = r[0], r[1]
        kind, role = self._word(r[2]), self._word(r[3])
        if kind is None or role is None:
            return False
        at = len(self.ids)
        self.ids.append(nid)
        self._added_index[nid] = at
        self.kinds.append(kind)
        self.roles.append(role)
        if not p or p == nid:
            self.parent_at.append(-1)
            self.odd_parent[at] = p
            self.root_ids.append(nid)
            self.total.append(1)
            self.leaf_count.append(1)
            return True
        up = self.position(p)
        if up is None or self.total[up] == _NO_SIZE:
            return False  # a parent outside every rooted subtree: a full build decides
        was_leaf = not self.kids_of(up)
        self.added_kids.setdefault(up, []).append(at)
        self.parent_at.append(up)
        self.total.append(1)
        self.leaf_count.append(1)
        more_leaves = 0 if was_leaf else 1
        # Every ancestor counts the new record: a walk as deep as the route (a thousand
        # steps on a big session), so its loop reads locals only.
        total, leaves, parent_at, limit = self.total, self.leaf_count, self.parent_at, len(self.ids)
        steps = 0
        node = up
        while node >= 0:
            total[node] += 1
            leaves[node] += more_leaves
            node = parent_at[node]
            steps += 1
            if steps > limit:  # a loop in the links
                return False
        return True


# What a pickle of a tree holds: every slot but the id indexes.
_PICKLED = tuple(n for n in PackedTree.__slots__ if not n.startswith("_"))


class _View(Mapping):
    __slots__ = ("tree",)

    def __init__(self, tree: PackedTree) -> None:
        self.tree = tree


class _Children(_View):
    """Id → its children's ids in file order, for the records that have children.

    ``fold_tree`` asks for the same entry's children several times over (is it a branch
    point, what comes next in the chain, what to walk), so each answer is kept for the
    life of this view: one view serves one fold."""

    __slots__ = ("_memo",)

    def __init__(self, tree: PackedTree) -> None:
        super().__init__(tree)
        self._memo: dict[Any, list[str] | None] = {}

    def _find(self, key: Any) -> list[str] | None:
        got = self._memo.get(key, _UNSET)
        if got is _UNSET:
            tree = self.tree
            at = tree.position(key)
            got = None
            if at is not None:
                kids = tree.kids_of(at)
                if kids:
                    ids = tree.ids
                    got = [ids[k] for k in kids]
            self._memo[key] = got
        return got  # type: ignore[no-any-return]

    def __getitem__(self, key: Any) -> list[str]:
        got = self._find(key)
        if got is None:
            raise KeyError(key)
        return got

    def get(self, key: Any, default: Any = None) -> Any:
        got = self._find(key)
        return default if got is None else got

    def __contains__(self, key: object) -> bool:
        return self._find(key) is not None

    def __iter__(self) -> Iterator[str]:
        tree = self.tree
        return (tree.ids[k] for k in range(len(tree.ids)) if tree.kids_of(k))

    def __len__(self) -> int:
        return sum(1 for _ in self)


class _Sizes(_View):
    """Id → (entries, leaves) below and including it, for the records a root reaches."""

    def __getitem__(self, key: Any) -> tuple[int, int]:
        at = self.tree.position(key)
        if at is None or self.tree.total[at] == _NO_SIZE:
            raise KeyError(key)
        return (self.tree.total[at], self.tree.leaf_count[at])

    def __contains__(self, key: object) -> bool:
        at = self.tree.position(key)
        return at is not None and self.tree.total[at] != _NO_SIZE

    def __iter__(self) -> Iterator[str]:
        tree = self.tree
        return (tree.ids[k] for k, t in enumerate(tree.total) if t != _NO_SIZE)

    def __len__(self) -> int:
        return sum(1 for t in self.tree.total if t != _NO_SIZE)


class _Parents(_View):
    """Id → attached parent id, for every record that is not a root."""

    def __getitem__(self, key: Any) -> str:
        at = self.tree.position(key)
        if at is None or self.tree.parent_at[at] < 0:
            raise KeyError(key)
        return self.tree.ids[self.tree.parent_at[at]]

    def __contains__(self, key: object) -> bool:
        at = self.tree.position(key)
        return at is not None and self.tree.parent_at[at] >= 0

    def __iter__(self) -> Iterator[str]:
        tree = self.tree
        return (tree.ids[k] for k, p in enumerate(tree.parent_at) if p >= 0)

    def __len__(self) -> int:
        return len(self.tree.ids) - len(self.tree.odd_parent)


class _Rows(_View):
    """Id → (id, parent, type, role), as the records were given."""

    def __getitem__(self, key: Any) -> tuple[str, Any, Any, Any]:
        at = self.tree.position(key)
        if at is None:
            raise KeyError(key)
        return self.tree.row(at)

    def __contains__(self, key: object) -> bool:
        return self.tree.position(key) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.tree.ids)

    def __len__(self) -> int:
        return len(self.tree.ids)
