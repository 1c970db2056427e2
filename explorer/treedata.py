"""Database reads for the explorer pages: light paths, chosen entries, the folded tree.

A page never loads a whole session. Paths come from one recursive query over the indexed
parent links and carry only index columns; raw lines are fetched only for the entries a page
shows. The one whole-session read (the tree skeleton for the graph: id, parent, type, role)
skips the payload and its folded result is cached under a key that changes whenever the
session gains an entry, so repeated graph requests on any worker sharing the cache are cheap.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.core.cache import cache
from django.db import connection

from explorer.models import Entry, Leaf, Session
from explorer.session import jsonfmt
from explorer.session.describe import entry_role, entry_title
from explorer.session.graph import FoldedGraph, FoldedItem, GraphNode, fold_tree

TREE_CACHE_SECONDS = 3600


@dataclass(frozen=True, slots=True)
class LightEntry:
    entry_id: str
    parent_id: str | None
    type: str
    role: str
    position: int
    size: int
    child_count: int
    target_id: str


_LIGHT_COLS = "entry_id, parent_id, type, role, position, size, child_count, target_id"


_PATH_COLS = "entry_id, parent_id, type, position"


def light_path(session: Session, entry_id: str | None) -> list[LightEntry]:
    """Root→entry index rows in one recursive query; stops on cycles and dangling parents.

    Only columns stored before the raw line are read: SQLite would otherwise step over each
    entry's payload (overflow pages) to reach the later columns, and a path can be thousands
    of entries long. Role, size and child count are left empty here.
    """
    if not entry_id:
        return []
    table = Entry._meta.db_table
    limit = max(session.entry_count, 1) + 1
    sql = f"""
        WITH RECURSIVE walk(entry_id, parent_id, type, position, n) AS (
            SELECT {_PATH_COLS}, 0 FROM {table} WHERE session_id = %s AND entry_id = %s
            UNION ALL
            SELECT e.entry_id, e.parent_id, e.type, e.position, walk.n + 1
            FROM {table} e JOIN walk ON e.session_id = %s AND e.entry_id = walk.parent_id
            WHERE walk.n < %s AND walk.parent_id <> walk.entry_id
        )
        SELECT {_PATH_COLS} FROM walk ORDER BY n DESC
    """
    with connection.cursor() as cur:
        cur.execute(sql, [session.pk, entry_id, session.pk, limit])
        rows = cur.fetchall()
    seen: set[str] = set()
    out: list[LightEntry] = []
    # A cycle repeats ids; keep the walk up to the first repetition (from the entry upwards).
    for r in reversed(rows):
        if r[0] in seen:
            break
        seen.add(r[0])
        out.append(LightEntry(r[0], r[1], r[2], "", r[3], 0, 0, ""))
    out.reverse()
    return out


def load_entries(session: Session, ids: Iterable[str]) -> dict[str, dict]:
    """Parsed entries for the given ids (chunked IN queries)."""
    wanted = list(dict.fromkeys(i for i in ids if i))
    out: dict[str, dict] = {}
    for k in range(0, len(wanted), 500):
        chunk = wanted[k : k + 500]
        for eid, raw in Entry.objects.filter(session=session, entry_id__in=chunk).values_list(
            "entry_id", "raw"
        ):
            try:
                data = jsonfmt.loads(raw)
            except ValueError:
                continue
            if isinstance(data, dict):
                out[eid] = data
    return out


def full_path(session: Session, light: Sequence[LightEntry]) -> list[dict]:
    data = load_entries(session, [e.entry_id for e in light])
    return [data[e.entry_id] for e in light if e.entry_id in data]


def context_path(session: Session, light: Sequence[LightEntry]) -> tuple[list[dict], int]:
    """The part of a path that can still reach the model, parsed; and its start on the path.

    Everything before the newest compaction's first kept entry is folded into that
    compaction: only settings entries there still matter (the newest of each kind is kept,
    since settings are restored over the whole path). Returns (entries, index of the first
    entry of the live range in `light`).
    """
    comp = next((i for i in range(len(light) - 1, -1, -1) if light[i].type == "compaction"), -1)
    if comp < 0:
        return full_path(session, light), 0
    comp_entry = load_entries(session, [light[comp].entry_id]).get(light[comp].entry_id, {})
    fk = comp_entry.get("firstKeptEntryId")
    start = next((i for i in range(comp) if light[i].entry_id == fk), comp)
    # Settings are restored over the whole path: keep the newest thinking-level change and
    # the newest model-setting entry (a model change, or an assistant reply, which overrides
    # it) before the live range. Only the assistant search needs roles, so only it queries.
    head = light[:start]
    thinking = next((e for e in reversed(head) if e.type == "thinking_level_change"), None)
    model_change_i = next(
        (i for i in range(len(head) - 1, -1, -1) if head[i].type == "model_change"), -1
    )
    settings_ids: list[str] = [thinking.entry_id] if thinking else []
    assistant_id = None
    messages = [i for i in range(len(head) - 1, model_change_i, -1) if head[i].type == "message"]
    for k in range(0, len(messages), 16):
        chunk = [head[i].entry_id for i in messages[k : k + 16]]
        found = set(
            Entry.objects.filter(session=session, entry_id__in=chunk, role="assistant").values_list(
                "entry_id", flat=True
            )
        )
        assistant_id = next((c for c in chunk if c in found), None)
        if assistant_id:
            break
    if assistant_id:
        settings_ids.append(assistant_id)
    elif model_change_i >= 0:
        settings_ids.append(head[model_change_i].entry_id)
    chosen = [e for e in light[:start] if e.entry_id in settings_ids] + list(light[start:])
    return full_path(session, chosen), start


def default_leaf_id(session: Session) -> str | None:
    e = (
        Entry.objects.filter(session=session)
        .order_by("-position")
        .values_list("entry_id", flat=True)
        .first()
    )
    return e


def cursor_id(session: Session, user: Any) -> str | None:
    """The user's navigation cursor, or the file's own leaf (its last entry)."""
    if user is not None and getattr(user, "is_authenticated", False):
        leaf = Leaf.objects.filter(session=session, user=user).order_by("-updated").first()
        if (
            leaf is not None
            and leaf.entry_id
            and Entry.objects.filter(session=session, entry_id=leaf.entry_id).exists()
        ):
            return leaf.entry_id
    return default_leaf_id(session)


def entry_exists(session: Session, entry_id: str | None) -> bool:
    return bool(entry_id) and Entry.objects.filter(session=session, entry_id=entry_id).exists()


def content_key(session: Session) -> str:
    """Changes whenever an entry is added (sessions are append-only)."""
    last = (
        Entry.objects.filter(session=session)
        .order_by("-position")
        .values_list("position", flat=True)
        .first()
    )
    # The creation time tells apart a deleted and re-imported session that reuses a pk.
    created = session.created.timestamp() if session.created else 0
    raw = f"{session.pk}:{session.session_id}:{created}:{session.entry_count}:{last}"
    return f"{session.pk}-" + hashlib.sha256(raw.encode()).hexdigest()[:32]


def current_labels(session: Session, key: str | None = None) -> dict[str, str]:
    """Target id → label text, the newest label entry per target winning (file order).

    Cached under the session's content key (labels change only by appending)."""
    ck = "explorer:labels:" + (key or content_key(session))
    hit = cache.get(ck)
    if hit is not None:
        return hit
    labels = _read_labels(session)
    cache.set(ck, labels, TREE_CACHE_SECONDS)
    return labels


def _read_labels(session: Session) -> dict[str, str]:
    labels: dict[str, str] = {}
    for raw in (
        Entry.objects.filter(session=session, type="label")
        .order_by("position")
        .values_list("raw", flat=True)
    ):
        try:
            d = jsonfmt.loads(raw)
        except ValueError:
            continue
        if not isinstance(d, dict):
            continue
        target, text = d.get("targetId"), d.get("label")
        if not isinstance(target, str):
            continue
        if isinstance(text, str) and text:
            labels[target] = text
        else:
            labels.pop(target, None)
    return labels


def _skeleton(session: Session, key: str) -> list[tuple]:
    # The role sits after the payload, so this one read steps over every entry's raw line;
    # it is paid once per session version (cached) and lets the graph keep user turns.
    ck = f"explorer:skel2:{key}"
    rows = cache.get(ck)
    if rows is None:
        rows = list(
            Entry.objects.filter(session=session)
            .order_by("position")
            .values_list("entry_id", "parent_id", "type", "role")
        )
        cache.set(ck, rows, TREE_CACHE_SECONDS)
    return rows


def hidden_targets(
    session: Session, active_ids: set[str], light: Sequence[LightEntry]
) -> dict[str, str]:
    """Targets of context edits on the active path → "hidden" / "replaced" (latest wins)."""
    edits = [e.entry_id for e in light if e.type == "context_edit"]
    if not edits:
        return {}
    data = load_entries(session, edits)
    out: dict[str, str] = {}
    for eid in edits:
        d = data.get(eid, {})
        t = d.get("targetId")
        if isinstance(t, str):
            out[t] = "hidden" if d.get("replacement") is None else "replaced"
    return out


@dataclass
class TreeModel:
    graph: FoldedGraph
    titles: dict[str, str]
    path_ids: list[str]
    cursor: str | None
    flags: dict[str, str] = field(default_factory=dict)  # entry id -> "hidden" / "replaced"


def folded_tree(
    session: Session,
    *,
    cursor: str | None,
    root: str | None = None,
    expanded: Sequence[str] = (),
    selected: str | None = None,
    max_nodes: int = 250,
) -> TreeModel:
    key = content_key(session)
    params = "|".join(
        [key, cursor or "", root or "", ",".join(sorted(expanded)), selected or "", str(max_nodes)]
    )
    ck = "explorer:fold2:" + hashlib.sha256(params.encode()).hexdigest()
    hit = cache.get(ck)
    if hit is not None:
        return _thaw(hit)
    light = light_path(session, cursor)
    path_ids = [e.entry_id for e in light]
    labels = current_labels(session, key)
    flags = hidden_targets(session, set(path_ids), light)
    cache.set(f"explorer:pathflags:{key}:{cursor or ''}", flags, TREE_CACHE_SECONDS)
    nodes = [
        GraphNode(
            r[0], r[1], r[2], r[3] or None, labels.get(r[0]),
            flags=frozenset([flags[r[0]]]) if r[0] in flags else frozenset(),
        )
        for r in _skeleton(session, key)
    ]  # fmt: skip
    graph = fold_tree(
        nodes,
        active_path=path_ids,
        cursor_id=cursor,
        root_id=root,
        expanded=expanded,
        pinned=[selected] if selected else [],
        max_nodes=max_nodes,
    )
    ids = [i.entry_id for i in graph.items if i.kind == "entry"]
    ids += [i.entry_id for i in graph.items if i.kind == "chain"]
    data = load_entries(session, ids)
    titles = {eid: entry_title(d, 60) for eid, d in data.items()}
    for item in graph.items:
        if item.kind == "entry" and item.node is not None:
            # Roles are read here, for the drawn entries only (the skeleton skips them).
            item.node = GraphNode(
                item.node.id, item.node.parent_id, item.node.type, entry_role(data.get(item.node.id, {})) or None,
                item.node.label, titles.get(item.node.id, ""), item.node.flags,
            )  # fmt: skip
    model = TreeModel(graph, titles, path_ids, cursor, flags)
    cache.set(ck, _freeze(model), TREE_CACHE_SECONDS)
    return model


def _freeze(model: TreeModel) -> tuple:
    # Flat form for the cache: nested children lists would make pickling recurse once per
    # tree level, and a folded path can be hundreds of levels deep.
    items = []
    for it in model.graph.items:
        copy = FoldedItem(
            **{f: getattr(it, f) for f in FoldedItem.__dataclass_fields__ if f != "children"}
        )
        items.append(copy)
    return (
        items,
        model.graph.total_entries,
        model.graph.truncated,
        model.titles,
        model.path_ids,
        model.cursor,
        model.flags,
    )


def _thaw(frozen: tuple) -> TreeModel:
    items, total, truncated, titles, path_ids, cursor, flags = frozen
    by_key = {it.key: it for it in items}
    roots = []
    for it in items:
        it.children = []
    for it in items:
        parent = by_key.get(it.parent_key) if it.parent_key else None
        (parent.children if parent is not None else roots).append(it)
    return TreeModel(FoldedGraph(roots, items, total, truncated), titles, path_ids, cursor, flags)


def path_flags(session: Session, cursor: str | None) -> dict[str, str]:
    """Hidden/replaced marks of the cursor's route; usually already cached by the tree page."""
    key = f"explorer:pathflags:{content_key(session)}:{cursor or ''}"
    hit = cache.get(key)
    if hit is None:
        hit = hidden_targets(session, set(), light_path(session, cursor))
        cache.set(key, hit, TREE_CACHE_SECONDS)
    return hit


def chain_entries(
    session: Session, first_id: str, limit: int = 200, stop: str | None = None
) -> list[LightEntry]:
    """The entries of a folded chain, following single children from `first_id` (up to and
    including `stop`, when given)."""
    table = Entry._meta.db_table
    sql = f"""
        WITH RECURSIVE down(entry_id, parent_id, type, role, position, size, child_count,
                            target_id, n) AS (
            SELECT {_LIGHT_COLS}, 0 FROM {table} WHERE session_id = %s AND entry_id = %s
            UNION ALL
            SELECT e.entry_id, e.parent_id, e.type, e.role, e.position, e.size, e.child_count,
                   e.target_id, down.n + 1
            FROM {table} e JOIN down ON e.session_id = %s AND e.parent_id = down.entry_id
            WHERE down.child_count = 1 AND down.n < %s AND down.entry_id <> %s
        )
        SELECT {_LIGHT_COLS} FROM down ORDER BY n
    """
    with connection.cursor() as cur:
        cur.execute(sql, [session.pk, first_id, session.pk, limit - 1, stop or ""])
        return [LightEntry(*r) for r in cur.fetchall()]


def path_before(session: Session, entry_id: str, stop: str, limit: int) -> list[LightEntry]:
    """Up to `limit` ancestors of `entry_id`, in root→entry order, going no higher than `stop`.

    One page of a long route read upwards: cost follows `limit`, not the route's length."""
    table = Entry._meta.db_table
    sql = f"""
        WITH RECURSIVE up(entry_id, parent_id, type, role, position, size, child_count,
                          target_id, n) AS (
            SELECT {_LIGHT_COLS}, 0 FROM {table} WHERE session_id = %s AND entry_id = %s
            UNION ALL
            SELECT e.entry_id, e.parent_id, e.type, e.role, e.position, e.size, e.child_count,
                   e.target_id, up.n + 1
            FROM {table} e JOIN up ON e.session_id = %s AND e.entry_id = up.parent_id
            WHERE up.n < %s AND (up.n = 0 OR up.entry_id <> %s) AND up.parent_id <> up.entry_id
        )
        SELECT {_LIGHT_COLS} FROM up WHERE n > 0 ORDER BY n DESC
    """
    with connection.cursor() as cur:
        cur.execute(sql, [session.pk, entry_id, session.pk, limit, stop])
        rows = [LightEntry(*r) for r in cur.fetchall()]
    seen: set[str] = set()
    out: list[LightEntry] = []
    for e in reversed(rows):  # a cycle would repeat ids: keep the walk up to it
        if e.entry_id in seen:
            break
        seen.add(e.entry_id)
        out.append(e)
    out.reverse()
    return out


def path_after(
    session: Session, entry_id: str, stop: str, limit: int, cursor: str | None
) -> list[LightEntry]:
    """Up to `limit` entries of the cursor's route after `entry_id`, down to `stop` inclusive.

    Single children are followed in one query; at a branch point inside a folded stretch the
    child on the cursor's route is chosen (reading the route only in that rare case)."""
    out: list[LightEntry] = []
    route: set[str] | None = None
    current = entry_id
    seen = {entry_id}
    while len(out) < limit:
        walk = chain_entries(session, current, limit=limit - len(out) + 1, stop=stop)
        fresh = [e for e in walk[1:] if e.entry_id not in seen]
        seen.update(e.entry_id for e in fresh)
        out.extend(fresh)
        tail = walk[-1] if walk else None
        if tail is None or tail.entry_id == stop or len(out) >= limit or tail.child_count <= 1:
            break
        if route is None:
            route = {e.entry_id for e in light_path(session, cursor)}
        nxt = next(
            (
                LightEntry(*r)
                for r in Entry.objects.filter(session=session, parent_id=tail.entry_id)
                .order_by("position")
                .values_list(*_LIGHT_COLS.split(", "))
                if r[0] in route and r[0] not in seen
            ),
            None,
        )
        if nxt is None:
            break
        seen.add(nxt.entry_id)
        out.append(nxt)
        current = nxt.entry_id
        if nxt.entry_id == stop:
            break
    return out[:limit]
