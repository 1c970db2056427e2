"""Every read of stored sessions: routes, entries, cursors, labels, the folded tree, the list.

A page never loads a whole session. A route is one recursive query over the indexed parent
links (:func:`light_path`, cycle-safe) carrying only index columns; raw lines are fetched
only for the entries a page shows. The whole-session reads (the tree skeleton for the graph,
the labels) skip the payload and are cached by :func:`cached` under a key that changes
whenever the session gains an entry, so any worker sharing the cache reuses them.

Nothing here writes: the user's cursor is looked up (:func:`cursor_id`), never created.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.core.cache import cache
from django.db import connection
from django.db.models import OuterRef, Q, QuerySet, Subquery

from explorer.models import Entry, Leaf, Session
from explorer.session import jsonfmt
from explorer.session.describe import cost_of, entry_role, entry_text, entry_title, total_tokens_of
from explorer.session.graph import FoldedGraph, FoldedItem, GraphNode, fold_tree

T = TypeVar("T")

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
    pk: int = 0


_LIGHT_COLS = "entry_id, parent_id, type, role, position, size, child_count, target_id, id"


_PATH_COLS = "entry_id, parent_id, type, position, id"


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
        WITH RECURSIVE walk(entry_id, parent_id, type, position, id, n) AS (
            SELECT {_PATH_COLS}, 0 FROM {table} WHERE session_id = %s AND entry_id = %s
            UNION ALL
            SELECT e.entry_id, e.parent_id, e.type, e.position, e.id, walk.n + 1
            FROM {table} e JOIN walk ON e.session_id = %s AND e.entry_id = walk.parent_id
            WHERE walk.n < %s AND walk.parent_id <> walk.entry_id
        )
        SELECT {_PATH_COLS} FROM walk ORDER BY n DESC
    """
    with connection.cursor() as cur:
        cur.execute(sql, [session.pk, jsonfmt.visible(entry_id), session.pk, limit])
        rows = cur.fetchall()
    seen: set[str] = set()
    out: list[LightEntry] = []
    # A cycle repeats ids; keep the walk up to the first repetition (from the entry upwards).
    for r in reversed(rows):
        if r[0] in seen:
            break
        seen.add(r[0])
        out.append(LightEntry(r[0], r[1], r[2], "", r[3], 0, 0, "", r[4]))
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
    """The file's own leaf: its last entry in file order."""
    e = (
        Entry.objects.filter(session=session)
        .order_by("-position")
        .values_list("entry_id", flat=True)
        .first()
    )
    return e


def cursor_id(session: Session, user: Any) -> str | None:
    """The entry the user's navigation cursor is on, or the file's own leaf (its last entry)
    when the user has none yet or it points nowhere. The one read-only cursor lookup: the
    row itself is created by ``services.cursor_for`` on the first write."""
    if user is not None and getattr(user, "is_authenticated", False):
        leaf = Leaf.objects.filter(session=session, name=f"user:{user.pk}").first()
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


def cached(session: Session, name: str, builder: Callable[[], T], *, timeout: int = 0) -> T:
    """``builder()`` computed once per session version and shared through the cache.

    ``name`` says what is cached (and its parameters); the session's content key is part of
    the cache key, so an append makes every cached figure of that session stale at once and
    nothing needs invalidating. ``timeout`` 0 means :data:`TREE_CACHE_SECONDS`.
    """
    key = (
        "explorer:"
        + hashlib.sha256(
            f"{content_key(session)}|{name}".encode("utf-8", "surrogatepass")
        ).hexdigest()
    )
    hit = cache.get(key)
    if hit is not None:
        return hit
    value = builder()
    cache.set(key, value, timeout or TREE_CACHE_SECONDS)
    return value


def current_labels(session: Session) -> dict[str, str]:
    """Target id → label text, the newest label entry per target winning (file order).

    Cached per session version (labels change only by appending)."""
    return cached(session, "labels", lambda: _read_labels(session))


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


def _skeleton(session: Session) -> list[tuple]:
    # The role sits after the payload, so this one read steps over every entry's raw line;
    # it is paid once per session version (cached) and lets the graph keep user turns.
    return cached(
        session,
        "skeleton",
        lambda: list(
            Entry.objects.filter(session=session)
            .order_by("position")
            .values_list("entry_id", "parent_id", "type", "role")
        ),
    )


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
    params = "|".join(
        [cursor or "", root or "", ",".join(sorted(expanded)), selected or "", str(max_nodes)]
    )
    frozen = cached(
        session,
        "fold:" + params,
        lambda: _freeze(_build_folded_tree(session, cursor, root, expanded, selected, max_nodes)),
    )
    return _thaw(frozen)


def _build_folded_tree(
    session: Session,
    cursor: str | None,
    root: str | None,
    expanded: Sequence[str],
    selected: str | None,
    max_nodes: int,
) -> TreeModel:
    light = light_path(session, cursor)
    path_ids = [e.entry_id for e in light]
    labels = current_labels(session)
    flags = path_flags(session, cursor, light)
    nodes = [
        GraphNode(
            r[0], r[1], r[2], r[3] or None, labels.get(r[0]),
            flags=frozenset([flags[r[0]]]) if r[0] in flags else frozenset(),
        )
        for r in _skeleton(session)
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
    return TreeModel(graph, titles, path_ids, cursor, flags)


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


def path_flags(
    session: Session, cursor: str | None, light: Sequence[LightEntry] | None = None
) -> dict[str, str]:
    """Hidden/replaced marks of the cursor's route (cached per session version); ``light``:
    the route when the caller already has it."""
    return cached(
        session,
        f"pathflags:{cursor or ''}",
        lambda: hidden_targets(
            session, set(), light if light is not None else light_path(session, cursor)
        ),
    )


def chain_entries(
    session: Session, first_id: str, limit: int = 200, stop: str | None = None
) -> list[LightEntry]:
    """The entries of a folded chain, following single children from `first_id` (up to and
    including `stop`, when given)."""
    table = Entry._meta.db_table
    sql = f"""
        WITH RECURSIVE down(entry_id, parent_id, type, role, position, size, child_count,
                            target_id, id, n) AS (
            SELECT {_LIGHT_COLS}, 0 FROM {table} WHERE session_id = %s AND entry_id = %s
            UNION ALL
            SELECT e.entry_id, e.parent_id, e.type, e.role, e.position, e.size, e.child_count,
                   e.target_id, e.id, down.n + 1
            FROM {table} e JOIN down ON e.session_id = %s AND e.parent_id = down.entry_id
            WHERE down.child_count = 1 AND down.n < %s AND down.entry_id <> %s
        )
        SELECT {_LIGHT_COLS} FROM down ORDER BY n
    """
    with connection.cursor() as cur:
        cur.execute(
            sql,
            [
                session.pk,
                jsonfmt.visible(first_id),
                session.pk,
                limit - 1,
                jsonfmt.visible(stop or ""),
            ],
        )
        return [LightEntry(*r) for r in cur.fetchall()]


def path_before(session: Session, entry_id: str, stop: str, limit: int) -> list[LightEntry]:
    """Up to `limit` ancestors of `entry_id`, in root→entry order, going no higher than `stop`.

    One page of a long route read upwards: cost follows `limit`, not the route's length."""
    table = Entry._meta.db_table
    sql = f"""
        WITH RECURSIVE up(entry_id, parent_id, type, role, position, size, child_count,
                          target_id, id, n) AS (
            SELECT {_LIGHT_COLS}, 0 FROM {table} WHERE session_id = %s AND entry_id = %s
            UNION ALL
            SELECT e.entry_id, e.parent_id, e.type, e.role, e.position, e.size, e.child_count,
                   e.target_id, e.id, up.n + 1
            FROM {table} e JOIN up ON e.session_id = %s AND e.entry_id = up.parent_id
            WHERE up.n < %s AND (up.n = 0 OR up.entry_id <> %s) AND up.parent_id <> up.entry_id
        )
        SELECT {_LIGHT_COLS} FROM up WHERE n > 0 ORDER BY n DESC
    """
    with connection.cursor() as cur:
        cur.execute(
            sql, [session.pk, jsonfmt.visible(entry_id), session.pk, limit, jsonfmt.visible(stop)]
        )
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


# ---------------------------------------------------------------------------------------------
# Paths as the engine reads them


def path_pks(session: Session, entry_id: str | None) -> list[int]:
    """Primary keys root → ``entry_id`` (the route query, cycle-safe)."""
    return [e.pk for e in light_path(session, entry_id)]


def path_rows(session: Session, entry_id: str | None, *, light: bool = False) -> list[Entry]:
    """``Entry`` rows root → ``entry_id``; ``light`` skips the raw payload."""
    pks = path_pks(session, entry_id)
    if not pks:
        return []
    qs = Entry.objects.filter(pk__in=pks)
    if light:
        qs = qs.light()
    by_pk = {e.pk: e for e in qs}
    return [by_pk[pk] for pk in pks]


def path_to(session: Session, entry_id: str | None) -> list[dict]:
    """Parsed entries root → ``entry_id`` (the engine's ``get_branch`` of a stored session);
    ``[]`` for None or an unknown id."""
    return [row.data() for row in path_rows(session, entry_id)]


def children_of(session: Session, entry_id: str | None) -> list[Entry]:
    """Children in file order (the engine's ``get_children``); None → the roots."""
    if entry_id is None:
        return list(Entry.objects.roots(session).light())
    return list(Entry.objects.children_of(session, entry_id).light())


def get_entry(session: Session, entry_id: str) -> Entry | None:
    return Entry.objects.filter(session=session, entry_id=entry_id).first()


def header_line(session: Session) -> bytes:
    return session.header_raw.encode("utf-8", errors="surrogatepass") + b"\n"


def path_bytes(session: Session, entry_id: str | None, extra_ids: Iterable[str] = ()) -> bytes:
    """A session file holding the header, one path and a few more entries (e.g. the target
    of an edit), in file order: what a manager needs to append at ``entry_id`` without
    reading the whole session."""
    pks = set(path_pks(session, entry_id))
    extra = [e for e in extra_ids if isinstance(e, str)]
    if extra:
        pks.update(
            Entry.objects.filter(session=session, entry_id__in=extra).values_list("pk", flat=True)
        )
    parts = [header_line(session)]
    rows = Entry.objects.filter(pk__in=pks).order_by("position").values_list("raw", flat=True)
    for raw in rows:
        parts.append(raw.encode("utf-8", errors="surrogatepass") + b"\n")
    return b"".join(parts)


# ---------------------------------------------------------------------------------------------
# The session list


SORTS = {
    "activity": ("-last_activity", "Last activity"),
    "created": ("-header_timestamp", "Created"),
    "entries": ("-entry_count", "Entries"),
    "name": ("name", "Name"),
}


def annotate_sessions(qs: QuerySet[Session]) -> QuerySet[Session]:
    """Adds `first_message_raw` (first user message line) and `last_activity` (timestamp of
    the newest entry in file order)."""
    first = Entry.objects.filter(session=OuterRef("pk"), type="message", role="user").order_by(
        "position"
    )
    last = Entry.objects.filter(session=OuterRef("pk")).order_by("-position")
    return qs.annotate(
        first_message_raw=Subquery(first.values("raw")[:1]),
        last_activity=Subquery(last.values("timestamp")[:1]),
    )


def search_sessions(qs: QuerySet[Session], q: str, sort: str = "activity") -> QuerySet[Session]:
    """Filter by name, id, cwd or first user message; order by the chosen key."""
    qs = annotate_sessions(qs)
    if q:
        needle = jsonfmt.dumps(q)[1:-1]  # as the text is spelled inside the JSON line
        q = jsonfmt.visible(q)  # the columns' form (PostgreSQL refuses NUL in a pattern)
        qs = qs.filter(
            Q(name__icontains=q)
            | Q(session_id__icontains=q)
            | Q(cwd__icontains=q)
            | Q(first_message_raw__icontains=needle)
        )
    order = SORTS.get(sort, SORTS["activity"])[0]
    return qs.order_by(order, "-pk")


def first_message_text(session: Any, limit: int = 140) -> str:
    raw = getattr(session, "first_message_raw", None)
    if not raw:
        return ""
    try:
        data = jsonfmt.loads(raw)
    except ValueError:
        return ""
    text = " ".join(entry_text(data).split()) if isinstance(data, dict) else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def default_path_totals(session: Session) -> dict[str, Any]:
    """Provider-reported tokens and cost along the default leaf's path (cached per version)."""
    return cached(session, "pathtotals", lambda: _path_totals(session), timeout=24 * 3600)


def _path_totals(session: Session) -> dict[str, Any]:
    light = light_path(session, default_leaf_id(session))
    ids = [
        e.entry_id for e in light if e.type in ("message", "usage", "compaction", "branch_summary")
    ]
    tokens = 0.0
    cost = 0.0
    for k in range(0, len(ids), 500):
        data = load_entries(session, ids[k : k + 500])
        for d in data.values():
            tokens += total_tokens_of(d)
            cost += cost_of(d)
    return {"tokens": tokens, "cost": cost, "path_length": len(light)}


def projection_summary(
    session: Session, leaf_id: str | None, *, window: int, reserve: int
) -> dict[str, Any]:
    """The live meter's figures at ``leaf_id`` (computed once per session version for all
    viewers on every worker sharing the cache)."""
    from explorer.analysis.projection import context_figures

    def build() -> dict[str, Any]:
        figures = context_figures(path_to(session, leaf_id), window=window, reserve=reserve)
        figures["leaf_id"] = leaf_id
        return figures

    return cached(session, f"tip:{leaf_id or ''}:{window}:{reserve}", build)


def turn_running(session_pk: int, *, stale_after: float) -> bool:
    """A turn holds the session's lock and refreshed it within ``stale_after`` seconds."""
    from django.utils import timezone

    from explorer.models import TurnLock

    fresh = timezone.now() - timezone.timedelta(seconds=stale_after)
    return TurnLock.objects.filter(session_id=session_pk, updated__gte=fresh).exists()


# ---------------------------------------------------------------------------------------------
# Integrity


def integrity_sections(session: Session) -> list[dict[str, Any]]:
    """The engine's tree checks over the stored session (cached per session version).

    Only index columns are read for most entries; compactions and context edits, whose
    checks look inside them, are parsed."""
    from explorer.analysis.integrity import tree_sections

    def build() -> list[dict[str, Any]]:
        rows = list(
            Entry.objects.filter(session=session)
            .order_by("position")
            .values_list("entry_id", "parent_id", "type", "role", "line_no", "target_id")
        )
        full = load_entries(session, [r[0] for r in rows if r[2] in ("compaction", "context_edit")])
        entries: list[dict[str, Any]] = []
        for eid, parent, kind, role, _line, target in rows:
            item = full.get(eid)
            if item is None:
                item = {"type": kind, "id": eid, "parentId": parent}
                if kind == "message":
                    item["message"] = {"role": role}
                elif kind == "label":
                    item["targetId"] = target
            entries.append(item)
        return tree_sections(entries, [r[4] for r in rows])

    return cached(session, "integrity", build)


def unmatched_tool_results(session: Session) -> list[dict[str, Any]]:
    """Tool results without their call above them (reads every tool result; cached)."""
    from explorer.analysis import integrity

    def load_raws(ids: Iterable[str]) -> dict[str, str]:
        return dict(
            Entry.objects.filter(session=session, entry_id__in=list(ids)).values_list(
                "entry_id", "raw"
            )
        )

    def build() -> list[dict[str, Any]]:
        rows = list(
            Entry.objects.filter(session=session)
            .order_by("position")
            .values_list("entry_id", "parent_id", "role", "line_no")
        )
        return integrity.unmatched_tool_results(rows, load_raws)

    return cached(session, "integrity-tools", build)
