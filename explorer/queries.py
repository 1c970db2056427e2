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
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from django.core.cache import cache
from django.db import connection, models
from django.db.models import (
    Case,
    Count,
    F,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Lower

from explorer import conf, shared_copies, stored_figures
from explorer.analysis.projection import AlignedRow, AlignedView
from explorer.analysis.timeline import (
    TimelineState,
    extend_timeline,
    now_point,
    peak_of,
    prime_timeline,
    sampled_points,
    settled,
    timeline_svg_data,
)
from explorer.models import (
    ArchivedBranch,
    Entry,
    EntryText,
    Leaf,
    SecretFinding,
    SecretReveal,
    Session,
)
from explorer.secrets import redact_entry, redact_for_search, redact_line
from explorer.session import jsonfmt
from explorer.session.describe import (
    COSTED_TYPES,
    cost_of,
    entry_role,
    entry_title,
    total_tokens_of,
)
from explorer.session.gcpause import gc_paused
from explorer.session.graph import (
    FoldedGraph,
    FoldedItem,
    GraphNode,
    NodeTable,
    TreeShape,
    fold_tree,
)
from explorer.session.packed import PackedTree
from explorer.titles import file_part, shown_text

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

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickled as its fields in order. A slotted dataclass's own state walks its field
        # list per object: 9 ms for the 2,000 rows of two routes' kept figures each write.
        return (
            LightEntry,
            (self.entry_id, self.parent_id, self.type, self.role, self.position, self.size,
             self.child_count, self.target_id, self.pk),
        )  # fmt: skip


_LIGHT_COLS = "entry_id, parent_id, type, role, position, size, child_count, target_id, id"


_PATH_COLS = "entry_id, parent_id, type, position, id"


def light_path(session: Session, entry_id: str | None) -> list[LightEntry]:
    """Root→entry index rows in one recursive query; stops on cycles and dangling parents.

    Only columns stored before the raw line are read: SQLite would otherwise step over each
    entry's payload (overflow pages) to reach the later columns, and a path can be thousands
    of entries long. Role, size and child count are left empty here.

    A route this process read recently is reused (:func:`_known_route`): an entry on it has
    its prefix as route, and a new leaf a few entries below it (the tip after an append, a
    sibling branch) costs a walk of those few entries instead of the whole route.
    """
    if not entry_id:
        return []
    routes = _session_routes(session)
    known = _known_route(session, routes, entry_id)
    if known is not None:
        return known
    out = _walk_up(session, entry_id, max(session.entry_count, 1) + 1)
    _remember_route(routes, out)
    return out


def _walk_up(session: Session, entry_id: str, limit: int) -> list[LightEntry]:
    """At most ``limit`` + 1 entries from ``entry_id`` up its parent links, root first
    (stopping at a repetition, as the route query does)."""
    table = Entry._meta.db_table
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


# Routes this process read, per session identity: key -> (stamp, routes), each route a
# (rows, id -> index) pair, newest last. Entries never change parent once stored, so a
# route stays right for as long as its session exists; the stamp in the shared cache ties
# the routes to it like the grown figures (a cleared cache forgets them too).
_ROUTES: OrderedDict[str, tuple[str, list]] = OrderedDict()
_ROUTES_LOCK = threading.Lock()
ROUTES_KEPT = 4  # routes kept per session
ROUTE_SESSIONS_KEPT = 4  # sessions whose routes are kept
ROUTE_WALK = 48  # entries walked up from a new leaf looking for a known route


def _identity_key(session: Session, kind: str) -> str:
    """A cache key for ``kind`` that names the session's identity (pk, id, creation time),
    never its length: what it keys is extended as the session grows, not rebuilt."""
    created = session.created.timestamp() if session.created else 0
    raw = f"{kind}|{session.pk}:{session.session_id}:{created}"
    return "explorer:" + hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def identity_key(session: Session, name: str) -> str:
    """A shared cache key for ``name`` that outlives appends (the session's identity, not
    its version): for what is kept by what it depends on rather than per session version,
    such as rendered rows kept under a digest of their input."""
    return _identity_key(session, f"kept|{name}")


def _stamped_list(
    store: OrderedDict[str, tuple[str, list]], lock: threading.Lock, key: str
) -> list:
    """The list this process keeps under ``key`` in ``store``, while the shared cache still
    holds the stamp it was made under; else a new empty one under the shared stamp (made
    now if the cache holds none).

    What a process keeps per session identity (routes read, timelines built) stays right as
    the session grows, but a cleared or replaced shared cache must make every worker forget
    it at once: the stamp in the shared cache is what they all check. At most
    :data:`ROUTE_SESSIONS_KEPT` sessions are kept, the least recently used dropped."""
    stamp = cache.get(key)
    with lock:
        mine = store.get(key)
        if mine is not None and stamp is not None and mine[0] == stamp:
            store.move_to_end(key)
            return mine[1]
        stamp = _shared_stamp(key)
        kept: list = []
        store[key] = (stamp, kept)
        while len(store) > ROUTE_SESSIONS_KEPT:
            store.popitem(last=False)
        return kept


def _session_routes(session: Session) -> list[tuple[list[LightEntry], dict[str, int]]]:
    return _stamped_list(_ROUTES, _ROUTES_LOCK, _identity_key(session, "routes"))


def _remember_route(routes: list, route: list[LightEntry]) -> None:
    """Keep ``route`` when it ends at a true root (no cycle cut it short): only then is
    each prefix of it the route of the prefix's last entry."""
    if not route:
        return
    ids = {e.entry_id: i for i, e in enumerate(route)}
    top = route[0]
    if top.parent_id and top.parent_id != top.entry_id and top.parent_id in ids:
        return  # the walk stopped at a cycle
    with _ROUTES_LOCK:
        routes[:] = [r for r in routes if r[0][-1].entry_id != route[-1].entry_id]
        routes.append((list(route), ids))  # a copy: the caller may change its own list
        del routes[:-ROUTES_KEPT]


def _known_route(session: Session, routes: list, entry_id: str) -> list[LightEntry] | None:
    """The route to ``entry_id`` from a kept one, or None: the entry on a kept route, or
    a few parent links above it joining one (the joined route is kept too)."""
    with _ROUTES_LOCK:
        kept = list(routes)
    for route, ids in reversed(kept):
        k = ids.get(entry_id)
        if k is not None:
            return route[: k + 1]
    if not kept:
        return None
    walked = _walk_up(session, entry_id, ROUTE_WALK)  # root first, at most ROUTE_WALK + 1
    for i in range(len(walked) - 1, -1, -1):
        for route, ids in reversed(kept):
            k = ids.get(walked[i].entry_id)
            if k is not None:
                joined = route[: k + 1] + walked[i + 1 :]
                _remember_route(routes, joined)
                return joined
    top = walked[0] if walked else None
    if top is not None and len(walked) <= ROUTE_WALK:
        # The walk reached the top before its limit: it is the whole route.
        _remember_route(routes, walked)
        return walked
    return None


# ---------------------------------------------------------------------------------------------
# The masking edge: every entry a page, partial, JSON response, live frame or search shows is
# parsed by `shown_entry` (or `shown_raw` for the raw line), which masks each secret except
# those marked false positive. The engine's own reads (`path_bytes`, storage) stay raw.


# What one read-only request asks of the database more than once (every cache key of the
# page needs the session's false positives and newest entry; the header, the panel and its
# builders each ask). ``read_memo`` opens a memo for the length of a GET; outside one (writes,
# commands, the live consumer) every call reads fresh.
_READ_MEMO: ContextVar[dict[Any, Any] | None] = ContextVar("explorer_read_memo", default=None)


@contextmanager
def read_memo() -> Iterator[None]:
    """Within this block each per-request read is asked of the database once."""
    token = _READ_MEMO.set({})
    try:
        yield
    finally:
        _READ_MEMO.reset(token)


def forget_reads() -> None:
    """Drop what the open memo holds: called by every write, so a read after it is fresh."""
    memo = _READ_MEMO.get()
    if memo is not None:
        memo.clear()


def _once(key: tuple[Any, ...], read: Callable[[], T]) -> T:
    memo = _READ_MEMO.get()
    if memo is None:
        return read()
    if key not in memo:
        memo[key] = read()
    return memo[key]


def allowed_fingerprints(session: Session | int) -> frozenset[str]:
    """Fingerprints shown in clear in this session: findings marked false positive. Read
    fresh (a status change does not change the session version, so it is not cached),
    once per read-only request."""
    pk = session if isinstance(session, int) else session.pk
    return _once(
        ("allowed", pk),
        lambda: frozenset(
            SecretFinding.objects.filter(
                session_id=pk, status=SecretFinding.FALSE_POSITIVE
            ).values_list("fingerprint", flat=True)
        ),
    )


def shown_entry(data: Any, allow: frozenset[str] = frozenset()) -> Any:
    """An entry as the pages may show it: every secret masked but those in ``allow``."""
    return redact_entry(data, allow=allow, key=conf.secrets_key())


def shown_raw(raw: str, allow: frozenset[str] = frozenset()) -> str:
    """The raw JSON line as the entry panel may show it (masked, else unchanged)."""
    line = raw.encode("utf-8", "surrogatepass")
    masked = redact_line(line, allow=allow, key=conf.secrets_key())
    return raw if masked is line else masked.decode("utf-8", "surrogatepass")


def shown_row(row: Entry, allow: frozenset[str] | None = None) -> dict:
    """``row.data()`` masked; ``allow`` defaults to the session's false positives (read only
    when the entry holds a secret, so a row without one costs no query)."""
    data = row.data()
    if allow is not None:
        return shown_entry(data, allow)
    masked = shown_entry(data)
    if masked is data:
        return data
    return shown_entry(data, allowed_fingerprints(row.session_id))


def load_entries(session: Session, ids: Iterable[str]) -> dict[str, dict]:
    """Parsed entries for the given ids (chunked IN queries), secrets masked."""
    wanted = list(dict.fromkeys(i for i in ids if i))
    out: dict[str, dict] = {}
    if not wanted:
        return out
    allow = allowed_fingerprints(session)
    holding = entries_with_secrets(session)
    for k in range(0, len(wanted), 500):
        chunk = wanted[k : k + 500]
        # No ORDER BY: the model's default ordering joins the session table and makes the
        # planner walk the session by position instead of looking the ids up.
        rows = Entry.objects.filter(session=session, entry_id__in=chunk).order_by()
        for eid, raw in rows.values_list("entry_id", "raw"):
            _parse_into(out, eid, raw, holding, allow)
    return out


def _parse_into(out: dict[str, dict], eid: str, raw: str, holding: Any, allow: Any) -> None:
    """One stored line parsed into ``out[eid]``, masked when it holds a secret (the one
    parse-and-mask step of :func:`load_entries` and :func:`full_path`)."""
    try:
        data = jsonfmt.loads(raw)
    except ValueError:
        return
    if isinstance(data, dict):
        out[eid] = data if eid not in holding else shown_entry(data, allow)


def _load_by_pk(session: Session, light: Sequence[LightEntry]) -> dict[str, dict]:
    """:func:`load_entries` for rows whose primary keys are known (a route's index rows).

    The rows are looked up by primary key alone, which SQLite answers from the table
    itself: a thousand entries of a long route in about a third of the time the
    (session, entry id) index takes, and adding the session to the WHERE clause makes the
    planner walk the whole session instead. The session and entry id of every row are
    checked here; an entry whose row does not match (or without a key) is read by id."""
    out: dict[str, dict] = {}
    if not light:
        return out
    allow = allowed_fingerprints(session)
    holding = entries_with_secrets(session)
    expected = {e.pk: e.entry_id for e in light if e.pk}
    pks = list(expected)
    table = Entry._meta.db_table
    found: set[str] = set()
    session_pk = session.pk  # a property: read once, not per row
    with connection.cursor() as cur:
        for k in range(0, len(pks), 500):
            chunk = pks[k : k + 500]
            marks = ",".join(["%s"] * len(chunk))
            cur.execute(
                f"SELECT id, session_id, entry_id, raw FROM {table} WHERE id IN ({marks})", chunk
            )
            for pk, session_id, eid, raw in cur.fetchall():
                if session_id == session_pk and expected.get(pk) == eid:
                    found.add(eid)
                    _parse_into(out, eid, raw, holding, allow)
    missing = [e.entry_id for e in light if e.entry_id not in found]
    if missing:
        out.update(load_entries(session, missing))
    return out


class _Everything:
    """Stands for "every entry may hold a secret" when the findings cannot be trusted."""

    def __contains__(self, item: object) -> bool:
        return True


def entries_with_secrets(session: Session) -> Any:
    """The ids of the entries the scanner found a secret in (a set), or a stand-in that
    holds every id when the session's findings predate the current rules.

    The findings are made by the same scanner the masking runs, over every entry at import
    and at each append, so an entry without a finding has nothing to mask: masking only the
    others keeps the read of a long route from scanning every string of it again. Until a
    rules change has been rescanned, every entry is masked, as before."""
    from explorer.secrets import RULES_VERSION

    if getattr(session, "secrets_rules", None) != RULES_VERSION:
        return _Everything()
    return cached(
        session,
        f"secret-entries:{RULES_VERSION}",
        lambda: frozenset(
            SecretFinding.objects.filter(session=session).values_list("entry_id", flat=True)
        ),
    )


def full_path(session: Session, light: Sequence[LightEntry]) -> list[dict]:
    """The parsed entries of ``light`` in its order (those that parse to an object)."""
    data = _load_by_pk(session, light)
    return [data[e.entry_id] for e in light if e.entry_id in data]


def context_path(session: Session, light: Sequence[LightEntry]) -> tuple[list[dict], int]:
    """The part of a path that can still reach the model, parsed; and its start on the path.

    Everything before the newest compaction's first kept entry is folded into that
    compaction: only settings entries there still matter (the newest of each kind is kept,
    since settings are restored over the whole path). Returns (entries, index of the first
    entry of the live range in `light`).
    """
    chosen, start = context_light(session, light)
    return full_path(session, chosen), start


def context_light(session: Session, light: Sequence[LightEntry]) -> tuple[list[LightEntry], int]:
    """:func:`context_path`'s entries before they are parsed, and its start: for a caller
    that parses them together with others (Compare: two routes and their live ranges)."""
    comp = next((i for i in range(len(light) - 1, -1, -1) if light[i].type == "compaction"), -1)
    if comp < 0:
        return list(light), 0
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
        # A column the covering skeleton index does not hold (``BY_PARENT_COLS``): else
        # SQLite, without table statistics, walks the whole session with that index to
        # find 16 ids (20 ms on 50,000 entries) instead of looking each one up.
        found = {
            eid
            for eid, *_ in Entry.objects.filter(
                session=session, entry_id__in=chunk, role="assistant"
            )
            .order_by()
            .values_list("entry_id", *BY_PARENT_COLS)
        }
        assistant_id = next((c for c in chunk if c in found), None)
        if assistant_id:
            break
    if assistant_id:
        settings_ids.append(assistant_id)
    elif model_change_i >= 0:
        settings_ids.append(head[model_change_i].entry_id)
    chosen = [e for e in light[:start] if e.entry_id in settings_ids] + list(light[start:])
    return chosen, start


def last_position(session: Session) -> int:
    """The file position of the session's newest entry (0 when it has none): where a live
    viewer resumes from, so nothing written after the page was drawn is missed."""
    return _tip(session)[0]


def default_leaf_id(session: Session) -> str | None:
    """The file's own leaf: its last entry in file order."""
    return _tip(session)[1]


def _tip(session: Session) -> tuple[int, str | None]:
    """(position, id) of the session's newest entry, once per read-only request."""

    def read() -> tuple[int, str | None]:
        row = (
            Entry.objects.filter(session=session)
            .order_by("-position")
            .values_list("position", "entry_id")
            .first()
        )
        return (row[0] or 0, row[1]) if row else (0, None)

    return _once(("tip", session.pk, session.entry_count), read)


def cursor_id(session: Session, user: Any) -> str | None:
    """The entry the user's navigation cursor is on, or the file's own leaf (its last entry)
    when the user has none yet or it points nowhere. The one read-only cursor lookup: the
    row itself is created by ``services.cursor_for`` on the first write. Read once per
    read-only request (the page, its frame and its panel each ask)."""
    if user is not None and getattr(user, "is_authenticated", False):
        own = _once(("cursor", session.pk, user.pk), lambda: _own_cursor(session, user))
        if own:
            return own
    return default_leaf_id(session)


def _own_cursor(session: Session, user: Any) -> str | None:
    leaf = Leaf.objects.filter(session=session, name=f"user:{user.pk}").first()
    if (
        leaf is not None
        and leaf.entry_id
        and Entry.objects.filter(session=session, entry_id=leaf.entry_id).exists()
    ):
        return leaf.entry_id
    return None


def entry_exists(session: Session, entry_id: str | None) -> bool:
    return bool(entry_id) and Entry.objects.filter(session=session, entry_id=entry_id).exists()


def content_key(session: Session) -> str:
    """Changes whenever an entry is added (sessions are append-only)."""
    last = _last_position(session)
    # The creation time tells apart a deleted and re-imported session that reuses a pk.
    created = session.created.timestamp() if session.created else 0
    raw = f"{session.pk}:{session.session_id}:{created}:{session.entry_count}:{last}"
    return f"{session.pk}-" + hashlib.sha256(raw.encode()).hexdigest()[:32]


def mask_key(session: Session) -> str:
    """Changes whenever what the masking edge shows in clear changes: a digest of the
    session's false-positive fingerprints. Part of every cache key, so a finding's status
    change (or a rescan) makes the session's cached builders stale like an append does."""
    return _digest(allowed_fingerprints(session)) + archive_stamp(session)


def archive_stamp(session: Session | int) -> str:
    """Changes whenever a branch of the session is archived or unarchived (site data, so
    the session version does not move): part of :func:`mask_key`, hence of every cache
    key, so every kept figure that hides archived branches is drawn again. Empty when
    nothing is archived, so the keys of such sessions are what they always were."""
    pk = session if isinstance(session, int) else session.pk
    rows = _once(
        ("archived", pk),
        lambda: list(ArchivedBranch.objects.filter(session_id=pk).values_list("pk", "entry_id")),
    )
    return ":" + _digest(f"{a}:{b}" for a, b in rows) if rows else ""


def _digest(allow: Iterable[str]) -> str:
    ordered = sorted(allow)
    return hashlib.sha256("\n".join(ordered).encode()).hexdigest()[:16] if ordered else "-"


def _mask_keys(sessions: Sequence[Session]) -> dict[int, str]:
    """:func:`mask_key` of many sessions in one query (a list page must not ask per row)."""
    found: dict[int, list[str]] = {}
    rows = SecretFinding.objects.filter(
        session_id__in=[s.pk for s in sessions], status=SecretFinding.FALSE_POSITIVE
    ).values_list("session_id", "fingerprint")
    for pk, fp in rows:
        found.setdefault(pk, []).append(fp)
    archived: dict[int, list[str]] = {}
    for pk, apk, eid in ArchivedBranch.objects.filter(
        session_id__in=[s.pk for s in sessions]
    ).values_list("session_id", "pk", "entry_id"):
        archived.setdefault(pk, []).append(f"{apk}:{eid}")
    return {
        s.pk: _digest(found.get(s.pk, ()))
        + (":" + _digest(archived[s.pk]) if s.pk in archived else "")
        for s in sessions
    }


def _cache_key(session: Session, name: str, mask: str | None = None) -> str:
    mask = mask_key(session) if mask is None else mask
    raw = f"{content_key(session)}|{mask}|{name}".encode("utf-8", "surrogatepass")
    return "explorer:" + hashlib.sha256(raw).hexdigest()


def cached(session: Session, name: str, builder: Callable[[], T], *, timeout: int = 0) -> T:
    """``builder()`` computed once per session version and shared through the cache.

    ``name`` says what is cached (and its parameters); the session's content key and its
    :func:`mask_key` are part of the cache key, so an append or a finding's status change
    makes every cached figure of that session stale at once and nothing needs invalidating.
    ``timeout`` 0 means :data:`TREE_CACHE_SECONDS`.
    """
    return _through_cache(_cache_key(session, name), builder, timeout)


def _through_cache(key: str, builder: Callable[[], T], timeout: int = 0) -> T:
    """``builder()`` kept under ``key``. A built string (a rendered fragment: it cannot
    change once handed out) is written by :mod:`explorer.shared_copies` after the answer,
    under the cache's current generation, so a clear meanwhile drops it; other values are
    written here, since a caller may still change what it was handed."""
    hit = kept_read(key)
    if hit is not None:
        return hit
    value = builder()
    if isinstance(value, str):
        keep_later(key, value, timeout)
    else:
        cache.set(key, value, timeout or TREE_CACHE_SECONDS)
    return value


# Names the cache's contents since it was last cleared: a copy queued before a clear must
# not be written after it (it could be of rows changed in place, as a migration does).
_GENERATION_KEY = "explorer:generation"


def _cache_generation() -> str:
    return _shared_stamp(_GENERATION_KEY)


def kept_read(key: str) -> Any:
    """What :func:`keep_later` kept under ``key`` (None when nothing is): the copy still
    queued in this process first, since it is newer than the shared one."""
    queued = shared_copies.waiting(key)
    return queued if queued is not None else cache.get(key)


def keep_later(key: str, value: Any, timeout: int = 0) -> None:
    """Keep ``value`` under ``key``, written after the answer (:mod:`explorer.shared_copies`)
    and dropped if the cache is cleared meanwhile: a store of rendered rows is a few hundred
    kilobytes, and writing it is no part of the page. ``value`` must not change after."""
    shared_copies.write_later(
        key,
        value,
        timeout or TREE_CACHE_SECONDS,
        stamp_key=_GENERATION_KEY,
        stamp=_cache_generation(),
    )


def current_labels(session: Session) -> dict[str, str]:
    """Target id → label text, the newest label entry per target winning (file order).

    Labels change only by appending, so the map is kept as the session grows
    (:func:`grown`): after an append only the new label entries are read. Callers get a
    copy they may change."""
    mask = mask_key(session)

    def extend(labels: dict[str, str], after: int, upto: int) -> dict[str, str]:
        return _read_labels(session, dict(labels), after, upto)

    kept = grown(
        session,
        f"labels|{mask}",
        lambda last: _read_labels(session, {}, -1, last),
        extend,
        stored=True,
    )
    return dict(kept)


def _read_labels(session: Session, labels: dict[str, str], after: int, upto: int) -> dict[str, str]:
    allow = allowed_fingerprints(session)
    for raw in (
        Entry.objects.filter(session=session, type="label", position__gt=after, position__lte=upto)
        .order_by("position")
        .values_list("raw", flat=True)
    ):
        try:
            d = shown_entry(jsonfmt.loads(raw), allow)
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


def _last_position(session: Session) -> int:
    """The session's newest file position, asked of the database once per session object
    and length: every cached read of a request needs it for its key, and a request holds
    one session object, so several builders must not each query it again. An append
    through the engine raises ``entry_count`` on the object, which makes the memo stale."""
    last = getattr(session, "last_position", None)  # annotated by the session list
    if last is not None:
        return last or 0
    memo = getattr(session, "_explorer_last", None)
    if memo is not None and memo[0] == session.entry_count:
        return memo[1]
    last = (
        Entry.objects.filter(session=session)
        .order_by("-position")
        .values_list("position", flat=True)
        .first()
    ) or 0
    session._explorer_last = (session.entry_count, last)
    return last


@dataclass
class _GrownCopy:
    """A grown figure as this process holds it (:func:`grown`)."""

    stamp: str  # the shared stamp it was made or adopted under
    upto: int  # the file position the value covers
    value: Any
    shared: int  # the position of the shared copy it last wrote or read
    stored: int  # the position of the stored copy as far as this process knows; -1: unknown


# The grown figures this process holds, by key. A figure of a 50,000-entry session is
# megabytes once pickled, and unpickling it, extending it and pickling it back cost more
# than the page that wanted it; the process keeps its copy and trusts it while the shared
# cache still names the same stamp (so a cleared or replaced shared copy is never outlived
# by a process's own).
_GROWN: OrderedDict[str, _GrownCopy] = OrderedDict()
_GROWN_LOCK = threading.RLock()
GROWN_KEPT = 32  # figures kept per process (eight or so per big session being read)
# The shared copy is written again once the process's copy is this far ahead of it, so a
# worker that starts later reads a bounded number of rows to catch up.
GROWN_LAG = 2000


def _grown_store(key: str, last: int, value: Any) -> str:
    """Share ``value`` under a new stamp. The stamp is set at once, so this process goes on
    trusting its own copy; the megabytes are written by :mod:`explorer.shared_copies` after
    the answer. A worker that reads the key in between finds the older copy (or none) and
    extends it (or builds its own): slower for it, never wrong, since a copy is right up to
    the position it names."""
    stamp = uuid.uuid4().hex
    cache.set(key + ":stamp", stamp, TREE_CACHE_SECONDS)
    shared_copies.write_later(
        key, (stamp, last, value), TREE_CACHE_SECONDS, stamp_key=key + ":stamp", stamp=stamp
    )
    return stamp


def _shared_stamp(key: str) -> str:
    """The shared stamp under ``key`` of what each process keeps alone, made by the first
    worker that needs one (``add`` keeps a racing worker's) and adopted by the others, so
    their copies do not disown each other, while a cleared cache still disowns them all."""
    stamp = cache.get(key)  # one read when there is one, as there nearly always is
    if stamp is None:
        cache.add(key, uuid.uuid4().hex, TREE_CACHE_SECONDS)
        stamp = cache.get(key)
    return stamp or ""


def grown(
    session: Session,
    name: str,
    build: Callable[[int], T],
    extend: Callable[[T, int, int], T],
    *,
    shared: bool = True,
    stored: bool = False,
    store_lag: int = 0,
) -> T:
    """A whole-session figure kept current by reading only what was appended since.

    Sessions only grow, so a value computed up to file position P stays right for the
    entries up to P; after an append, ``extend(value, P, last)`` folds in the entries with
    positions in (P, last] instead of ``build(last)`` reading every entry again. This is
    what keeps the first page after each write as cheap as a warm one on a 50,000-entry
    session. The cache key names the session's identity (pk, id, creation time), never its
    length, so every worker that shares the cache extends the same value. Each process
    extends its own copy (:data:`_GROWN`) and writes the shared one back only when built or
    :data:`GROWN_LAG` positions ahead of it: pickling a 50,000-row figure after every append
    would cost more than reading it again.

    ``shared=False`` is for figures a worker builds again for no more than unpickling them
    would cost (the skeleton, read from its covering index, and the graph nodes and the
    tree shape derived from it in memory): only their stamp is shared, never the megabytes
    a first request would otherwise pickle and compress into the cache.

    ``stored=True`` adds the tier under both (:mod:`explorer.stored_figures`): a worker
    that has neither copy loads the one stored with a big session (by its import, or by a
    reader whose copy got :data:`~explorer.stored_figures.STORE_LAG` positions ahead of
    it) and extends it, instead of building from every row. ``store_lag`` (positions)
    overrides that distance for a figure whose extension costs more per entry.
    """
    key = _identity_key(session, f"grown|{name}")
    last = _last_position(session)
    store = stored and stored_figures.wanted(session)
    if store:
        # The stored copy is what a worker without one reads: a shared copy besides it
        # would be pickled again after every GROWN_LAG positions for no reader.
        shared = False
    with _GROWN_LOCK:
        copy = _grown_copy(session, key, name, last, shared=shared, store=store)
        if copy.value is not None and copy.upto == last:
            pass
        elif copy.value is not None and copy.upto < last:
            copy.value = extend(copy.value, copy.upto, last)
            if shared and last - copy.shared >= GROWN_LAG:
                copy.stamp, copy.shared = _grown_store(key, last, copy.value), last
        else:
            copy.value = build(last)
            if shared:
                copy.stamp, copy.shared = _grown_store(key, last, copy.value), last
            else:
                copy.stamp, copy.shared = _shared_stamp(key + ":stamp"), last
        copy.upto = last
        lag = store_lag or stored_figures.STORE_LAG
        if store and last - copy.stored >= lag:
            if copy.stored < 0:  # built, or adopted from the shared cache: is a copy stored?
                copy.stored = stored_figures.position(session, name)
            if last - copy.stored >= lag and stored_figures.store(session, name, last, copy.value):
                copy.stored = last
        _GROWN[key] = copy
        _GROWN.move_to_end(key)
        while len(_GROWN) > GROWN_KEPT:
            _GROWN.popitem(last=False)
        return copy.value


def _grown_copy(
    session: Session, key: str, name: str, last: int, *, shared: bool, store: bool
) -> _GrownCopy:
    """The nearest copy of a grown figure, tier by tier: this process's (while the shared
    stamp still names it), the shared cache's, the stored one; else an empty copy (value
    None) for :func:`grown` to build. Called under :data:`_GROWN_LOCK`."""
    stamp = cache.get(key + ":stamp")
    mine = _GROWN.get(key)
    if mine is not None and stamp is not None and mine.stamp == stamp:
        return replace(mine)  # a new record: a racing reader of the old one sees it whole
    # A cleared cache disowns the process's copy, not what it knows of the stored one.
    saved = mine.stored if mine is not None else -1
    hit = cache.get(key) if shared else None
    if isinstance(hit, tuple) and len(hit) == 3:
        if stamp is None:  # the copy outlived its stamp (written after a clear)
            cache.add(key + ":stamp", hit[0], TREE_CACHE_SECONDS)
        return _GrownCopy(hit[0], hit[1], hit[2], hit[1], saved)
    found = stored_figures.load(session, name, last) if store else None
    if found is not None:  # adopted like a build (``shared`` is off here)
        upto, value = found
        return _GrownCopy(_shared_stamp(key + ":stamp"), upto, value, upto, upto)
    return _GrownCopy(stamp or "", -1, None, -1, saved)


def store_figures(session: Session) -> None:
    """Build and store the whole-session figures a cold reader of a big session needs
    (:mod:`explorer.stored_figures`), so the first request after an import loads them
    instead of building them from every row. Called by the import after its commit; a
    session under :data:`~explorer.stored_figures.STORE_FROM` entries is left alone."""
    if not stored_figures.wanted(session):
        return
    with stored_figures.patiently():
        _store_figures(session)


def _store_figures(session: Session) -> None:
    _tree_shape(session)  # the skeleton with it
    integrity_sections(session)
    unmatched_tool_results(session)
    entry_costs(session)
    _newest_leaves(session, LEAVES_KEPT)
    current_labels(session)
    # The Compactions tab opens on the default route's newest compaction, whose detail
    # depends only on what lies above it: stored now, it is ready for every later reader.
    opening = opening_compaction(session)
    if opening is not None:
        compaction_detail(session, *opening)
    # The Timeline tab opens on the default route too: its kept turns are stored, when
    # the route's window is small enough to hold parsed (see STORED_TIMELINE_CHARS).
    leaf = default_leaf_id(session)
    light = light_path(session, leaf)
    if _timeline_storable(session, light[timeline_window(len(light)) :]):
        _timeline_figures(session, leaf)
    # The Compare tab opens with the default leaf as A: its route's part of every pair,
    # when its live range is small enough to hold parsed in the import (the rest of what
    # it reads is read a part at a time).
    live = context_light(session, light)[0] if leaf else []
    if leaf and sum(_line_sizes(live).values()) <= STORED_ROUTE_LIVE_BYTES:
        route_figure_set(session, leaf)


def opening_compaction(session: Session) -> tuple[list[LightEntry], dict[str, Any]] | None:
    """The default route and its newest compaction (an item of :func:`route_compactions`),
    which the Compactions tab opens on; None when the route has none."""
    light = light_path(session, default_leaf_id(session))
    listed = route_compactions(session, light)
    return (light, listed[-1]) if listed else None


def _skeleton_rows(session: Session, after: int, upto: int) -> list[tuple]:
    """The rows are kept (:func:`_skeleton`): the collector is paused while 50,000 of them
    are made, or its passes over the growing heap cost as much as reading them."""
    with gc_paused():
        return list(
            Entry.objects.filter(session=session, position__gt=after, position__lte=upto)
            .order_by("position")
            .values_list("entry_id", "parent_id", "type", "role")
        )


def _skeleton(session: Session) -> list[tuple]:
    """(id, parent, type, role) of every entry in file order, for the graph.

    Read once per session and process from the covering index (migration 0013), and an
    append reads only the new rows (:func:`grown`). Each process keeps its own copy: on a
    50,000-entry session pickling the rows into the shared cache cost a first request
    twice what reading them from the index costs a second worker."""
    return grown(
        session,
        "skeleton",
        lambda last: _skeleton_rows(session, -1, last),
        lambda rows, after, last: rows + _skeleton_rows(session, after, last),
        shared=False,
        stored=True,
    )


def _graph_nodes(session: Session) -> NodeTable:
    """Entry id → its :class:`GraphNode` without label or marks (the last row of a repeated
    id winning, as in ``fold_tree``), made on demand from the skeleton rows
    (:class:`NodeTable`).

    A packed tree shape (:func:`_tree_shape`) holds the rows already, so the table reads
    them there; otherwise the table is kept and extended by the appended rows
    (:func:`grown`). An extension makes a new table: other requests of this process may be
    reading the kept one."""
    shape = _tree_shape(session)
    if isinstance(shape, PackedTree):
        return NodeTable(shape.rows)
    return grown(
        session,
        "graph-nodes",
        lambda last: NodeTable.of(_skeleton(session)),
        lambda nodes, after, last: nodes.extended(_skeleton_rows(session, after, last)),
        shared=False,
    )


# Appended entries a kept tree shape is extended by at most: each walks up to its root to
# count itself in every ancestor's size, so on a 5,000-deep route a few hundred of them
# (a stored shape that fell behind, a follower's batch) cost more than building the shape
# again, which is about one walk over every entry.
SHAPE_EXTEND_AT_MOST = 64


def _tree_shape(session: Session) -> TreeShape | PackedTree:
    """The session's tree shape, extended by the appended rows (:func:`grown`): packed
    (:class:`~explorer.session.packed.PackedTree`, which a cold worker loads from its stored
    copy in a few milliseconds) unless an id repeats, else a :class:`TreeShape`."""

    def build(last: int) -> TreeShape | PackedTree:
        rows = _skeleton(session)
        with gc_paused():
            return PackedTree.pack(rows) or TreeShape.build(rows)

    def extend(shape: TreeShape | PackedTree, after: int, last: int) -> TreeShape | PackedTree:
        rows = _skeleton_rows(session, after, last)
        if len(rows) > SHAPE_EXTEND_AT_MOST:
            return build(last)
        if isinstance(shape, PackedTree):
            return shape.extended(rows) or build(last)
        new = [(r[0], r[1]) for r in rows]
        # Extended on a copy: other requests of this process may be folding the kept one.
        # The children lists a new record joins are copied; the rest are shared unchanged.
        children = dict(shape.children)
        for _nid, p in new:
            if p in children:
                children[p] = list(children[p])
        copy = TreeShape(
            children, list(shape.roots), dict(shape.sizes), dict(shape.parent), set(shape.missing)
        )
        if copy.extend(new):
            return copy
        return build(last)

    return grown(
        session,
        "tree-shape",
        build,
        extend,
        shared=False,
        stored=True,
        store_lag=SHAPE_EXTEND_AT_MOST,  # further behind, a cold worker would build it again
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


# Items of the folded graph the Tree tab draws (graph and text tree). A small session
# folds to well under this; a big one is cut to about it, so the page weighs about the same
# whatever the session's size (the rest is one "subtree" or chain node away: expand, root=).
TREE_BUDGET = 80


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
    max_nodes: int = TREE_BUDGET,
    hide: frozenset[str] = frozenset(),
    archived: frozenset[str] = frozenset(),
) -> TreeModel:
    """The folded graph of the Tree tab at ``cursor``, cached per session version.

    ``max_nodes`` bounds the drawn items (the page's weight), not what can be reached:
    chains unfold (``expanded``) and closed subtrees open on their own (``root``).
    ``hide``: entries left out (archived branches, :mod:`explorer.archives`); ``archived``:
    first entries of archived branches drawn marked (when the reader shows them)."""
    params = "|".join(
        [cursor or "", root or "", ",".join(sorted(expanded)), selected or "", str(max_nodes),
         "hide" if hide else "", ",".join(sorted(archived))]
    )  # fmt: skip
    frozen = cached(
        session,
        "fold:" + params,
        lambda: _freeze(
            _build_folded_tree(session, cursor, root, expanded, selected, max_nodes, hide, archived)
        ),
    )
    return _thaw(frozen)


def keep_tree_figures(session: Session, cursor: str | None) -> None:
    """Load the figures a fold of the tree at ``cursor`` reads (the tree shape, the labels,
    the route) into this process, without folding: for a request answered from the stored
    drawing (``views.tree``), so that the first request after the next append extends
    them by its entry instead of loading each from the database, which made it cost twice
    the small session's. A few milliseconds; the stored drawing saved a hundred."""
    _tree_shape(session)
    current_labels(session)
    light_path(session, cursor)


def _build_folded_tree(
    session: Session,
    cursor: str | None,
    root: str | None,
    expanded: Sequence[str],
    selected: str | None,
    max_nodes: int,
    hide: frozenset[str] = frozenset(),
    archived: frozenset[str] = frozenset(),
) -> TreeModel:
    light = light_path(session, cursor)
    path_ids = [e.entry_id for e in light]
    labels = current_labels(session)
    flags = path_flags(session, cursor, light)

    def marks_of(eid: str) -> frozenset[str]:
        found = {flags[eid]} if eid in flags else set()
        return frozenset(found | {"archived"}) if eid in archived else frozenset(found)

    nodes: list[GraphNode] | NodeTable
    if root or hide:
        # Archived branches left out: the kept shape describes every entry, so these
        # (rarer) views fold the list of the rest instead.
        nodes = [
            GraphNode(r[0], r[1], r[2], r[3] or None, labels.get(r[0]), flags=marks_of(r[0]))
            for r in _skeleton(session)
            if r[0] not in hide
        ]
    else:
        # The kept nodes, with this request's labels and marks on the few entries that
        # have one: the same nodes the list above gives, without making 50,000 of them.
        table = _graph_nodes(session)
        marks: dict[str, GraphNode] = {}
        for eid in labels.keys() | flags.keys() | archived:
            if eid in table:
                marks[eid] = replace(table[eid], label=labels.get(eid), flags=marks_of(eid))
        nodes = table.marked(marks)
    graph = fold_tree(
        nodes,
        active_path=path_ids,
        cursor_id=cursor,
        root_id=root,
        expanded=expanded,
        pinned=([selected] if selected else []) + sorted(archived),
        max_nodes=max_nodes,
        shape=None if root or hide else _tree_shape(session),
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
    roots: list[Any] = []
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
            Entry.objects.filter(session=session, entry_id__in=extra)
            .order_by()
            .values_list("pk", flat=True)
        )
    parts = [header_line(session)]
    rows = Entry.objects.filter(pk__in=pks).order_by("position").values_list("raw", flat=True)
    for raw in rows:
        parts.append(raw.encode("utf-8", errors="surrogatepass") + b"\n")
    return b"".join(parts)


def entries_bytes(session: Session, entry_ids: Iterable[str]) -> bytes:
    """A session file holding the header and only these entries, in file order."""
    wanted = {e for e in entry_ids if isinstance(e, str)}
    parts = [header_line(session)]
    if wanted:
        # By the id index, sorted here: ordering by position in SQL makes SQLite walk the
        # session's position index to find a handful of ids.
        rows = sorted(
            Entry.objects.filter(session=session, entry_id__in=wanted)
            .order_by()
            .values_list("position", "raw")
        )
        parts.extend(raw.encode("utf-8", errors="surrogatepass") + b"\n" for _, raw in rows)
    return b"".join(parts)


# ---------------------------------------------------------------------------------------------
# The session list


SORTS = {
    "activity": ("-last_activity", "Last activity"),
    "created": ("-header_timestamp", "Created"),
    "entries": ("-entry_count", "Entries"),
    "name": ("name", "Name"),
}


def _first_user_raw(session_ref: Any) -> QuerySet[Entry]:
    """The raw line of a session's first user message (file order), at most one row."""
    first = Entry.objects.filter(session=session_ref, type="message", role="user")
    return first.order_by("position").values("raw")[:1]


def with_first_message(qs: QuerySet[Session]) -> QuerySet[Session]:
    """Adds `first_message_raw`, so listing many sessions' titles costs no query per row."""
    return qs.annotate(first_message_raw=Subquery(_first_user_raw(OuterRef("pk"))))


def annotate_sessions(qs: QuerySet[Session]) -> QuerySet[Session]:
    """Adds `first_message_raw` (first user message line), `last_activity` (timestamp of
    the newest entry in file order) and `last_position` (so the content key of every listed
    session needs no query of its own)."""
    last = Entry.objects.filter(session=OuterRef("pk")).order_by("-position")
    return with_first_message(qs).annotate(
        last_activity=Subquery(last.values("timestamp")[:1]),
        last_position=Subquery(last.values("position")[:1]),
    )


def search_sessions(qs: QuerySet[Session], q: str, sort: str = "activity") -> QuerySet[Session]:
    """Filter by name, id, cwd or first user message; order by the chosen key."""
    qs = annotate_sessions(qs)
    if q and redact_for_search(q) != q:
        # The query is itself a secret: matching it against stored text would tell which
        # session holds it (its directory too, which may hold a secret), so only the id is
        qs = qs.filter(session_id__icontains=q)
    elif q:
        needle = jsonfmt.dumps(q)[1:-1]  # as the text is spelled inside the JSON line
        q = jsonfmt.visible(q)  # the columns' form (PostgreSQL refuses NUL in a pattern)
        qs = qs.filter(
            Q(name__icontains=q)
            | Q(session_id__icontains=q)
            | Q(cwd__icontains=q)
            | Q(source_path__icontains=q)
            | Q(first_message_raw__icontains=needle)
        )
    if sort == "name":
        # Named sessions A→Z (case aside), then the unnamed ones, newest first: "" sorted
        # first put a wall of "Session 019b…" rows above every name.
        unnamed = Case(When(name="", then=Value(1)), default=Value(0))
        return qs.order_by(unnamed, Lower("name"), F("last_activity").desc(nulls_last=True), "-pk")
    order = SORTS.get(sort, SORTS["activity"])[0]
    return qs.order_by(order, "-pk")


def list_row_labels(session: Session) -> dict[str, str]:
    """What tells one listed session from another when names repeat or are missing: the
    file it came from, and the session it was forked or branched from (a fork keeps the
    original's name)."""
    # A path may hold a secret (a token in a directory or file name): shown masked, as the
    # header's cwd is.
    parent = shown_text(session.parent_session or "")
    source = shown_text(session.source_path or "")
    return {
        "file_name": file_part(source),
        "fork_of": file_part(parent[3:] if parent.startswith("db:") else parent),
        "fork_of_full": parent,
        "source_path": source,
    }


def default_path_totals(session: Session) -> dict[str, Any]:
    """Cumulative provider-reported usage (tokens and cost of every request) along the default
    leaf's path, cached per version. Not a context size: every request is counted."""
    return cached(session, "pathtotals", lambda: _path_totals(session), timeout=24 * 3600)


def list_path_totals(sessions: Iterable[Session]) -> dict[int, dict[str, Any]]:
    """``default_path_totals`` for every session of a list page at once (pk → totals).

    Read from the stored route figures in two queries for the page; a session without
    rows (none of the app's writers leaves one so) comes from the cache or its walk."""
    from explorer import route_store

    items = list(sessions)
    # The newest entries' stored route figures, two queries for the page (what
    # :func:`_path_totals` reads for one session); the rest, if any, as before.
    out: dict[int, dict[str, Any]] = {
        pk: {"tokens": f.tokens, "cost": f.cost, "path_length": f.depth + 1}
        for pk, f in route_store.figures_at_tips(items).items()
    }
    items = [s for s in items if s.pk not in out]
    if not items:
        return out
    masks = _mask_keys(items)
    keys = {s.pk: _cache_key(s, "pathtotals", masks[s.pk]) for s in items}
    hits = cache.get_many(list(keys.values()))
    for s in items:
        out[s.pk] = hits.get(keys[s.pk]) or default_path_totals(s)
    return out


def _path_totals(session: Session) -> dict[str, Any]:
    # The default leaf's stored route figures (``explorer.route_store``): one row, whatever
    # the route's length. Summed in route order like ``pisession stats``; the walk below is
    # for a session without rows (written by none of the app's writers).
    from explorer import route_store

    leaf = default_leaf_id(session)
    figures = route_store.figures_at(session, leaf)
    if figures is not None:
        return {"tokens": figures.tokens, "cost": figures.cost, "path_length": figures.depth + 1}
    light = light_path(session, leaf)
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
        # The projection page's path (the live range and the settings before it), masked
        # alike, so the two show the same figures; and only the entries that can still
        # reach the model are read, not the whole route.
        path, _start = context_path(session, light_path(session, leaf_id))
        figures = context_figures(path, window=window, reserve=reserve)
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
    checks look inside them, are parsed. The findings grow with the session (:func:`grown`,
    :class:`~explorer.analysis.integrity.TreeFindings`): after an append only the new rows
    are read and checked. The page reads their :class:`~explorer.analysis.integrity.
    TreeReport`, kept (and stored) beside them: an ordinary append extends the report
    against the few stored entries it names, so a cold reader does not load and unpack
    every stub of a big session's findings to check one entry."""
    from explorer.analysis.integrity import TreeFindings, TreeReport, sections_of

    def findings() -> TreeFindings:
        return grown(
            session,
            "integrity-findings",
            lambda last: TreeFindings.check(*_integrity_stubs(session, -1, last)),
            lambda found, after, upto: found.extended(*_integrity_stubs(session, after, upto)),
            stored=True,
        )

    def extend(report: TreeReport, after: int, upto: int) -> TreeReport:
        entries, numbers = _integrity_stubs(session, after, upto)
        light = report.extended(entries, numbers, lambda ids: _stored_stubs(session, ids, after))
        return light if light is not None else TreeReport.of(findings())

    def build() -> list[dict[str, Any]]:
        report = grown(
            session,
            "integrity-report",
            lambda last: TreeReport.of(findings()),
            extend,
            stored=True,
        )
        return sections_of(report.problems)

    return cached(session, "integrity", build)


_STUB_COLS = ("entry_id", "parent_id", "type", "role", "line_no", "target_id")


def _integrity_stubs(
    session: Session, after: int, upto: int
) -> tuple[list[dict[str, Any]], list[int]]:
    """The stubs the tree checks read of the entries at positions (after, upto], in file
    order, and their line numbers."""
    with gc_paused():
        rows = list(
            Entry.objects.filter(session=session, position__gt=after, position__lte=upto)
            .order_by("position")
            .values_list(*_STUB_COLS)
        )
        return _stubs_of(session, rows), [r[4] for r in rows]


def _stored_stubs(
    session: Session, ids: set[str], upto: int
) -> dict[str, tuple[int, dict[str, Any], int]]:
    """Id -> (position, stub, line) of the last entry at or before ``upto`` with each of
    ``ids`` that has one: the stored entries an append names, as the findings hold them
    (:class:`~explorer.analysis.integrity.StoredLookup`). A stub whose own id is not the
    one asked for (an id column written for an id that is not a string) is left out, as the
    findings' index would not find it."""
    out: dict[str, tuple[int, dict[str, Any], int]] = {}
    wanted = list(ids)
    for k in range(0, len(wanted), 500):
        # A column the covering skeleton index does not hold (``BY_PARENT_COLS``), no
        # ORDER BY and no position bound: else SQLite walks the whole session with that
        # index (10 ms on 50,000 entries) instead of looking the few ids up.
        found = Entry.objects.filter(session=session, entry_id__in=wanted[k : k + 500])
        cols = found.order_by().values_list(*_STUB_COLS, "position", *BY_PARENT_COLS)
        rows = sorted((r for r in cols if r[6] <= upto), key=lambda r: r[6])
        stubs = _stubs_of(session, [r[:6] for r in rows])
        for row, stub in zip(rows, stubs, strict=True):
            if stub.get("id") == row[0] and row[0] in ids:
                out[row[0]] = (row[6], stub, row[4])
    return out


def _stubs_of(session: Session, rows: list[tuple]) -> list[dict[str, Any]]:
    """The stubs of ``rows`` (:data:`_STUB_COLS`): compactions and context edits parsed
    whole, whose checks look inside them; messages of one role sharing one ``{"role": ...}``
    (the checks only read it), which halves what is made and what a shared copy pickles."""
    full = load_entries(session, [r[0] for r in rows if r[2] in ("compaction", "context_edit")])
    roles: dict[Any, dict[str, Any]] = {}
    entries: list[dict[str, Any]] = []
    add = entries.append
    for eid, parent, kind, role, _line, target in rows:
        item = full.get(eid) if full else None
        if item is not None:
            add(item)
        elif kind == "message":
            message = roles.get(role)
            if message is None:
                message = roles[role] = {"role": role}
            add({"type": kind, "id": eid, "parentId": parent, "message": message})
        elif kind == "label":
            add({"type": kind, "id": eid, "parentId": parent, "targetId": target})
        else:
            add({"type": kind, "id": eid, "parentId": parent})
    return entries


def unmatched_tool_results(session: Session) -> list[dict[str, Any]]:
    """Tool results without their call above them (:func:`~explorer.analysis.integrity.
    unmatched_tool_results`), kept as the session grows (:func:`grown`): a result's answer
    depends only on the entries above it, so after an append only the new results are
    checked. A first build reads the head of every tool result's line, not its content."""
    from django.db.models.functions import Substr

    from explorer.analysis import integrity

    def raws(ids: Iterable[str]) -> dict[str, str]:
        rows = Entry.objects.filter(session=session, entry_id__in=list(ids)).order_by()
        return dict(rows.values_list("entry_id", "raw"))

    def check(after: int, upto: int, room: int) -> list[dict[str, Any]]:
        if room <= 0:
            return []
        rows = (
            Entry.objects.filter(
                session=session, role="toolResult", position__gt=after, position__lte=upto
            )
            .order_by("position")
            .values_list("entry_id", "line_no", Substr("raw", 1, integrity.HEAD_CHARS))
        )
        results: list[tuple[str, int]] = []
        head: dict[str, str] = {}
        for eid, line, text in rows:  # the heads come with the rows: no lookup by id
            results.append((eid, line))
            head[eid] = text
        if not results:
            return []
        parent: dict[str, str | None] = {}
        role: dict[str, str] = {}
        for eid, par, _kind, rl in _skeleton(session):
            parent[eid] = par
            role[eid] = rl

        def heads(ids: Iterable[str]) -> dict[str, str]:
            return {i: head[i] for i in ids}

        return integrity.unmatched_tool_results(results, parent, role, heads, raws, room)

    return grown(
        session,
        "integrity-tools",
        lambda last: check(-1, last, integrity.LIMIT),
        lambda found, after, last: found + check(after, last, integrity.LIMIT - len(found)),
        stored=True,
    )


# ---------------------------------------------------------------------------------------------
# Raw versus projected


def leaf_choices(session: Session, limit: int = 200) -> list[dict[str, str]]:
    """The newest leaves and every labelled entry, as choices for a leaf picker.

    One list shared by every picker (raw vs projected, compare) so they offer the same
    routes in the same words; cached per session version (the titles read raw lines)."""
    return cached(session, f"leafchoices:{limit}", lambda: _leaf_choices(session, limit))


LEAVES_KEPT = 400  # newest leaves kept, so the ones later appends end leave enough to list


def _leaf_choices(session: Session, limit: int) -> list[dict[str, str]]:
    complete, leaves = _newest_leaves(session, limit)
    out = [{"id": eid, "title": f"{eid} · {role or kind} · {title}"} for eid, kind, role, title in leaves[:limit]]  # fmt: skip
    out += [
        {"id": t, "title": f"\u2691 {text} ({t})"} for t, text in current_labels(session).items()
    ]
    return out


def _newest_leaves(session: Session, limit: int) -> tuple[bool, list[tuple[str, str, str, str]]]:
    """(all leaves listed, [(id, type, role, title)] newest first), kept current by the
    appended rows (:func:`grown`): an append ends at most its parent's leafhood and adds its
    own, so the list is the kept one less the new rows' parents plus the new childless rows.
    Reading the leaves again would step over every raw line (the child count sits after it).
    """

    def titled(rows: Sequence[tuple[str, str, str]]) -> list[tuple[str, str, str, str]]:
        data = load_entries(session, [r[0] for r in rows])
        return [(r[0], r[1], r[2] or "", entry_title(data.get(r[0], {}), 50)) for r in rows]

    def build(last: int, n: int = 0) -> tuple[bool, list[tuple[str, str, str, str]]]:
        n = max(n, LEAVES_KEPT)
        rows = list(
            Entry.objects.filter(session=session, child_count=0, position__lte=last)
            .order_by("-position")
            .values_list("entry_id", "type", "role")[:n]
        )
        return len(rows) < n, titled(rows)

    def extend(value: tuple, after: int, last: int) -> tuple[bool, list]:
        complete, leaves = value
        new = list(
            Entry.objects.filter(session=session, position__gt=after, position__lte=last)
            .order_by("-position")
            .values_list("entry_id", "parent_id", "type", "role")
        )
        parents = {r[1] for r in new}
        kept = [leaf for leaf in leaves if leaf[0] not in parents]
        out = titled([(r[0], r[2], r[3]) for r in new if r[0] not in parents]) + kept
        if not complete and len(out) < max(limit, LEAVES_KEPT // 2):
            return build(last)  # too few of the kept ones left to be sure of the newest
        if len(out) > LEAVES_KEPT:
            return False, out[:LEAVES_KEPT]
        return complete, out

    complete, leaves = grown(session, f"leaves|{mask_key(session)}", build, extend, stored=True)
    if not complete and len(leaves) < limit:
        return build(_last_position(session), limit)  # more asked for than are kept
    return complete, leaves


def context_summary(
    session: Session, cursor: str | None, window: int, reserve: int
) -> dict[str, Any]:
    """Raw versus projected at ``cursor``: rows and every figure, cached per session version.

    The one builder behind the page, its htmx partial and its JSON, so they cannot disagree.
    Rows cover the live range (from the newest compaction's kept entries on); the history
    folded before it is only counted here and listed page by page on request. After an
    append at the tip, the new version's summary goes on from the alignment this process
    kept for the route before it (:class:`_KeptAlignment`), so its cost is the new entries'
    and not the live range's, and its figures are still the ones a fresh build gives.
    """
    return cached(
        session,
        f"ctx:{cursor or ''}:{window}:{reserve}",
        lambda: _context_summary(session, cursor, window, reserve),
    )


def _context_summary(
    session: Session, cursor: str | None, window: int, reserve: int
) -> dict[str, Any]:
    from explorer.analysis.projection import align_projection, summarize_view
    from explorer.session.tokens import CompactionSettings

    light = light_path(session, cursor)
    kept = _session_alignments(session)
    base = _kept_alignment(kept, light)
    if base is not None:  # the kept route plus the entries appended below it
        path, start = base.path + full_path(session, light[base.fed :]), base.start
    else:
        path, start = context_path(session, light)
    view = align_projection(
        path,
        context_window=window,
        settings=CompactionSettings(reserve_tokens=reserve),
        reuse=base.view if base is not None else None,
    )
    settings_only = len(path) - (len(light) - start)  # settings entries kept from the folded part
    shown = view.rows[settings_only:]
    summary = summarize_view(view, shown, (base.shown, base.rows) if base is not None else None)
    summary["folded_count"] = start
    summary["path_length"] = len(light)
    summary["leaf_id"] = cursor
    if light and len(path) <= ALIGNMENT_MAX_PATH:
        item = _KeptAlignment(
            len(light), light[-1].entry_id, start, path, view, shown, summary["rows"]
        )
        with _ALIGNMENTS_LOCK:
            if base is not None and base in kept:
                kept.remove(base)  # the route it was made for is this one's prefix
            kept.append(item)
            del kept[:-ALIGNMENTS_KEPT]
    return summary


ALIGNMENTS_KEPT = 4  # routes whose alignment a process keeps per session
# A live range longer than this is not kept: its parsed entries (a session never compacted)
# could hold hundreds of megabytes per route, and its page is rebuilt per version as before.
ALIGNMENT_MAX_PATH = 6000


@dataclass(frozen=True, eq=False)
class _KeptAlignment:
    """A Raw vs projected alignment this process made, for the next version's request.

    After an append at the tip, the route is this one plus the new entries: its live range
    is ``path`` plus them (no compaction among them, so the fold has not moved), and the
    engine-side alignment keeps ``view``'s rows when the new entries cannot change them
    (``align_projection``'s ``reuse``). Only the new entries are then read, parsed, aligned
    and estimated: one entry, where the benchmark's 50,000-entry session has five hundred in
    its live range. Never changed once made: requests of other threads may be reading it.
    """

    fed: int  # entries of the route it was made for
    last_id: str  # the route's last entry, which determines the route
    start: int  # the live range's first index on the route (``context_path``)
    path: list[dict]  # ``context_path``'s entries, the objects ``view`` was aligned on
    view: AlignedView
    shown: list[AlignedRow]  # the rows the summary lists
    rows: list[dict[str, Any]]  # their dicts in the summary


_ALIGNMENTS: OrderedDict[str, tuple[str, list]] = OrderedDict()
_ALIGNMENTS_LOCK = threading.Lock()


def _session_alignments(session: Session) -> list[_KeptAlignment]:
    # Tied to a stamp in the shared cache like the routes: a cleared cache forgets them too;
    # the mask is in the key, since the kept entries are masked (a status change is new text).
    key = _identity_key(session, f"alignment|{mask_key(session)}")
    return _stamped_list(_ALIGNMENTS, _ALIGNMENTS_LOCK, key)


def _kept_alignment(
    kept: list[_KeptAlignment], light: Sequence[LightEntry]
) -> _KeptAlignment | None:
    """The kept alignment of the longest prefix of the route ``light`` that no compaction
    follows on it, or None. A route is determined by its last entry, so a kept route whose
    last entry sits at the same index here is this route's prefix."""
    with _ALIGNMENTS_LOCK:
        candidates = list(kept)
    best: _KeptAlignment | None = None
    for item in candidates:
        if not 0 < item.fed <= len(light) or light[item.fed - 1].entry_id != item.last_id:
            continue
        if best is None or item.fed > best.fed:
            best = item
    if best is None or any(e.type == "compaction" for e in light[best.fed :]):
        return None
    return best


# ---------------------------------------------------------------------------------------------
# Costs


def entry_costs(session: Session) -> dict[str, float]:
    """Entry id → provider-reported cost, for every entry that has one.

    The one source of per-entry cost for the whole-session figures (abandoned and wasted
    cost). The cost is stored with each entry when it is written (``files.entry_fields``
    decides which entries have one) and read from the covering index, so no line is parsed
    here; an append reads only the new rows (:func:`grown`)."""

    def read(after: int, upto: int) -> dict[str, float]:
        return dict(
            Entry.objects.filter(session=session, position__gt=after, position__lte=upto)
            .exclude(cost=0)
            .order_by("position")
            .values_list("entry_id", "cost")
        )

    return grown(
        session,
        "costs",
        lambda last: read(-1, last),
        lambda costs, after, last: {**costs, **read(after, last)},
        stored=True,
    )


def abandoned_cost(
    session: Session, cursor: str | None, route: Sequence[str] | None = None
) -> float:
    """Cost of every entry on no route to ``cursor``: all abandoned branches together.
    ``route``: the cursor's route (root first), when the caller has it already."""
    from explorer.analysis.compare import off_route_cost

    costs = entry_costs(session)
    if route is None:
        route = [e.entry_id for e in light_path(session, cursor)]
    return off_route_cost(costs, route, costs)


# ---------------------------------------------------------------------------------------------
# Compactions on a route

REPLACED_SHOWN = 150  # the newest replaced entries listed and checked against the summary
COMPACTIONS_LOOKBACK = 8  # kept lists looked for, newest compaction first, before a fresh build


def _upto_key(session: Session, mask: str, kind: str, entry_id: str) -> str:
    # What a compaction's list item and detail say depends only on the route up to it,
    # which is its own ancestors: keyed by the compaction alone, it survives appends.
    return _identity_key(session, f"{kind}|{mask}|{entry_id}")


# The kept lists' cache name; a new name whenever what an item holds changes meaning, so no
# worker reads a list kept under the old meaning (the counts of replaced entries, once).
_COMPACTIONS_UPTO = "compactions-upto-2"
# 3: "tokens after" is the engine's estimate; 4: the compaction's figures, not the entries.
_COMPACTION_DETAIL = "compaction-detail-5"  # 5: the previous summary beside it
_BRANCH_SUMMARY_DETAIL = "branch-summary-detail-1"


def route_compactions(session: Session, light: Sequence[LightEntry]) -> list[dict[str, Any]]:
    """Every compaction on the route ``light``, oldest first, as the Compactions tab lists it.

    The list up to a compaction is kept (shared cache, per session identity) under that
    compaction's id; the list of a route is the one kept for its newest compaction, plus
    any compaction after the newest kept one. An append that adds no compaction costs a
    scan of the route's types and one cache read, whatever the number of compactions.
    """
    from explorer.analysis.compactions import (
        extend_compaction_ranges,
        kept_count,
        replaced_indices,
    )

    types = [e.type for e in light]
    comps = [i for i, t in enumerate(types) if t == "compaction"]
    if not comps:
        return []
    mask = mask_key(session)
    items: list[dict[str, Any]] = []
    start, done = 0, 0
    for j in range(len(comps) - 1, max(-1, len(comps) - 1 - COMPACTIONS_LOOKBACK), -1):
        hit = cache.get(_upto_key(session, mask, _COMPACTIONS_UPTO, light[comps[j]].entry_id))
        if hit is not None:
            items, start = list(hit[0]), hit[1]
            done = j + 1
            break
    new = comps[done:]
    if not new:
        return items
    data = load_entries(session, [light[i].entry_id for i in new])
    index = {e.entry_id: i for i, e in enumerate(light)}
    fks = [(ci, data.get(light[ci].entry_id, {}).get("firstKeptEntryId")) for ci in new]
    ranges, start = extend_compaction_ranges(fks, index, start)
    for ci, begin, fk in ranges:
        comp = data.get(light[ci].entry_id, {})
        items.append(
            {
                "id": light[ci].entry_id,
                "index": ci,
                "start": begin,
                "first_kept_index": fk,
                "replaced_count": len(replaced_indices(types, (ci, begin, fk))),
                "kept_count": kept_count((ci, begin, fk)),
                "tokens_before": comp.get("tokensBefore"),
                "first_kept": comp.get("firstKeptEntryId"),
                "off_path": fk is None and comp.get("firstKeptEntryId") != light[ci].entry_id,
                "timestamp": comp.get("timestamp", ""),
            }
        )
    cache.set(
        _upto_key(session, mask, _COMPACTIONS_UPTO, items[-1]["id"]),
        (items, start),
        TREE_CACHE_SECONDS,
    )
    return items


def compaction_detail(
    session: Session, light: Sequence[LightEntry], item: dict[str, Any]
) -> dict[str, Any]:
    """One compaction (an item of :func:`route_compactions` on ``light``) beside what it
    replaced and kept, with the survival check: kept per compaction like the list, since
    none of it changes when the route grows below the compaction."""
    return kept_below(
        session, _COMPACTION_DETAIL, item["id"], lambda: _compaction_detail(session, light, item)
    )


def kept_by(session: Session, name: str, shown: Any, builder: Callable[[], T]) -> T:
    """``builder()`` kept under a digest of ``shown`` (everything it depends on besides
    the session's identity, as a value whose ``repr`` names it) rather than per session
    version: for what an append rarely changes, such as the list of every label, so the
    first page after an append does not render it again."""
    digest = hashlib.sha256(repr(shown).encode("utf-8", "surrogatepass")).hexdigest()
    return _through_cache(_identity_key(session, f"kept-by|{name}|{digest}"), builder)


def kept_below(session: Session, name: str, entry_id: str, builder: Callable[[], T]) -> T:
    """``builder()`` kept per entry rather than per session version, for what depends only
    on ``entry_id``'s own ancestors (a compaction's detail, its rendering): the route up to
    an entry never changes in an append-only tree, so an append leaves it right. ``name``
    must hold everything else it depends on; the masking is part of the key.

    For a big session the value is also stored with it (:mod:`explorer.stored_figures`):
    what the first reader built (a compaction's detail, a compared pair of routes) then
    outlives restarts and cleared caches, since it can never change."""
    key = _upto_key(session, mask_key(session), name, entry_id)
    if not stored_figures.wanted(session):
        return _through_cache(key, builder)

    def stored() -> T:
        label = stored_figures.BELOW + key.rsplit(":", 1)[-1]  # no "|": its own kind
        found = stored_figures.load(session, label, 0)
        if found is not None:
            return found[1]
        value = builder()
        stored_figures.store(session, label, 0, value)
        return value

    return _through_cache(key, stored)


def _compaction_detail(
    session: Session, light: Sequence[LightEntry], item: dict[str, Any]
) -> dict[str, Any]:
    from explorer.analysis.compactions import compaction_info, survival_for

    ci, start, fk = item["index"], item["start"], item["first_kept_index"]
    end = fk if fk is not None else ci
    lo = max(start, end - REPLACED_SHOWN)
    ids = [e.entry_id for e in light[lo : ci + 1]]
    data = load_entries(session, ids)
    sub = [data[i] for i in ids if i in data]
    info = compaction_info(sub, ci - lo, 0, (fk - lo) if fk is not None else None)
    summary = info.entry.get("summary")
    return {
        # The figures the tab shows, not the whole CompactionInfo: its replaced and kept
        # entries are whole lines (300 KB for 150 of them), and this dict is pickled into
        # the cache and the stored figures by the first reader of every compaction.
        "figures": {
            "id": info.entry.get("id"),
            "first_kept": info.entry.get("firstKeptEntryId"),
            "summary": summary if isinstance(summary, str) else None,
            "tokens_before": info.tokens_before,
            "tokens_after": info.tokens_after,
            "read_files": info.read_files,
            "modified_files": info.modified_files,
            "off_path": info.off_path,
        },
        "replaced": [
            {
                "id": e.get("id"),
                "type": e.get("type"),
                "title": entry_title(e, 140),
                "role": (e.get("message") or {}).get("role")
                if isinstance(e.get("message"), dict)
                else "",
            }
            for e in info.replaced
        ],
        "kept": [
            {"id": e.get("id"), "type": e.get("type"), "title": entry_title(e, 140)}
            for e in info.kept
        ],
        "hidden_before": item["replaced_count"] - len(info.replaced),
        "report": survival_for(info),
        "previous": _previous_summary(
            session, light, ci, summary if isinstance(summary, str) else ""
        ),
    }


def _previous_summary(
    session: Session, light: Sequence[LightEntry], ci: int, summary: str
) -> dict[str, Any] | None:
    """The compaction before the one at ``ci`` on the route, its summary beside this one's:
    a word diff and the references of the earlier summary that this one dropped. It lies
    above the compaction, so it belongs in the detail kept below it."""
    from explorer.analysis.summary_diff import dropped_references, word_diff

    prev = next((j for j in range(ci - 1, -1, -1) if light[j].type == "compaction"), None)
    if prev is None:
        return None
    entry = load_entries(session, [light[prev].entry_id]).get(light[prev].entry_id, {})
    before = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
    report = dropped_references(before, summary, (e.entry_id for e in light[: ci + 1]))
    return {
        "id": light[prev].entry_id,
        "diff": word_diff(before, summary),
        "dropped": report,
        "lost": [i for i in report.items if not i.survived],
    }


def route_branch_summaries(light: Sequence[LightEntry]) -> list[str]:
    """Ids of the branch summaries on the route ``light``, oldest first."""
    return [e.entry_id for e in light if e.type == "branch_summary"]


def branch_summary_detail(
    session: Session, light: Sequence[LightEntry], summary_id: str
) -> dict[str, Any] | None:
    """A branch summary on ``light`` beside the route it summarised (from its ``fromId`` up
    to the common ancestor with the route it was left on), with the survival check
    compactions have. The summarised route was written before the summary and never
    changes, so the detail is kept below the summary like a compaction's. None: not a
    branch summary on this route."""
    index = next((i for i, e in enumerate(light) if e.entry_id == summary_id), None)
    if index is None or light[index].type != "branch_summary":
        return None
    return kept_below(
        session,
        _BRANCH_SUMMARY_DETAIL,
        summary_id,
        lambda: _branch_summary_detail(session, light[: index + 1]),
    )


def _branch_summary_detail(session: Session, route: Sequence[LightEntry]) -> dict[str, Any]:
    from explorer.analysis.compactions import survival_of

    summary_id = route[-1].entry_id
    entry = load_entries(session, [summary_id]).get(summary_id, {})
    summary = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
    from_id = entry.get("fromId") if isinstance(entry.get("fromId"), str) else ""
    left = light_path(session, from_id) if from_id and entry_exists(session, from_id) else []
    on_route = {e.entry_id for e in route}
    common = max((k for k, e in enumerate(left) if e.entry_id in on_route), default=-1)
    summarised = left[common + 1 :]
    shown = summarised[-REPLACED_SHOWN:]
    data = load_entries(session, [e.entry_id for e in shown])
    entries = [data[e.entry_id] for e in shown if e.entry_id in data]
    return {
        "id": summary_id,
        "from_id": from_id or None,
        "common_ancestor": left[common].entry_id if common >= 0 else None,
        "summary": summary,
        "summarised": [
            {
                "id": e.get("id"),
                "type": e.get("type"),
                "title": entry_title(e, 140),
                "role": (e.get("message") or {}).get("role")
                if isinstance(e.get("message"), dict)
                else "",
            }
            for e in entries
        ],
        "summarised_count": len(summarised),
        "hidden_before": len(summarised) - len(shown),
        "report": survival_of(entries, summary, (e.entry_id for e in left)),
    }


# ---------------------------------------------------------------------------------------------
# Comparing two routes

ROUTE_SHOWN = 150  # entries of each route listed (the newest); figures cover them all
# Lines of the projection difference listed (the newest of each side, in turn:
# ``analysis.compare.listed_lines``); the counts cover every line. Unbounded, the list grew
# with the live ranges (630 lines on the benchmark's big session), and the page weighed and
# cost three times a small session's.
DIFF_SHOWN = 150


def compare_routes(session: Session, a: str, b: str, cursor: str | None) -> dict[str, Any]:
    """Two routes from their common ancestor with every figure the Compare page shows.

    The page, its partial and its JSON all read this. What depends only on one entry's
    route (its figures, the messages its context holds, its newest entries) is kept per
    entry (:func:`route_figure_set`: a route never changes), so a pair is worked out from
    two kept routes; the pair itself is kept across appends too. What depends on the
    reader's cursor or on the whole session (the costs off the cursor's route) is worked
    out per session version."""
    return cached(
        session,
        f"compare-2:{a}:{b}:{cursor or ''}",
        lambda: _compare_routes(session, a, b, cursor),
    )


def _compare_routes(session: Session, a: str, b: str, cursor: str | None) -> dict[str, Any]:
    fa, fb = route_figure_set(session, a), route_figure_set(session, b)
    pair = _through_cache(
        _upto_key(session, mask_key(session), f"{_COMPARED_PAIR}|{b}", a),
        lambda: _compare_pair(session, a, b, fa, fb),
    )
    return {**pair, **_compare_costs(session, a, b, cursor, fa, fb)}


def _route_rows(route: Sequence[LightEntry], data: dict[str, dict]) -> list[dict[str, str]]:
    return [
        {
            "id": e.entry_id,
            "role": entry_role(data.get(e.entry_id, {})) or e.type,
            "title": entry_title(data.get(e.entry_id, {}), 110),
        }
        for e in route[-ROUTE_SHOWN:]
    ]


# The kept pair's cache name; a new name whenever what it holds changes meaning.
_COMPARED_PAIR = "compared-pair-4"
# The kept route figures' name; likewise.
_ROUTE_FIGURES = "route-figures-1"


@dataclass
class RouteFigureSet:
    """What a comparison needs of one entry's route, kept per entry (:func:`kept_below`).

    Comparing two leaves used to parse both routes after their common ancestor and both
    live ranges: on a big session 1,400 lines and 600 projected messages for a first pair,
    which grew with the routes. Everything a pair shows is a tail of a route or a route's
    context, so each route's part is worked out once, whatever it is compared with, and
    the import stores the default leaf's (the route the Compare tab opens on)."""

    route: list[LightEntry]  # root → entry
    figures: Any  # analysis.compare.RouteFigures
    projected: list[Any]  # analysis.compare.ProjectedRow of each message of its context
    estimate: int  # the engine's estimate of that context
    newest: list[dict[str, str]]  # :func:`_route_rows` of the route's last ROUTE_SHOWN


# The route figure sets this process holds, by their kept key, with the cache generation
# they were read under. A set of a big session's route is about 200 KB pickled, and a
# Compare after every append (its figures are per session version) read both again from
# the shared cache: two unpickles, a fifth of the request. A copy is trusted while the
# shared cache has not been cleared since (one small read), as the grown figures are.
_ROUTE_SETS: OrderedDict[str, tuple[str, RouteFigureSet]] = OrderedDict()
_ROUTE_SETS_LOCK = threading.Lock()
ROUTE_SETS_KEPT = 16  # a few pairs of a few sessions


def route_figure_set(session: Session, entry_id: str) -> RouteFigureSet:
    """The :class:`RouteFigureSet` of the route to ``entry_id``: kept per entry (and stored
    with a big session) when the entry is stored, else worked out (an id no entry has: an
    empty route). A kept route joins this process's known routes, so the walks that follow
    (the cursor's route) start from it. Callers only read the set: it is shared."""
    if not entry_exists(session, entry_id):
        return _route_figure_set(session, light_path(session, entry_id))
    key = _upto_key(session, mask_key(session), _ROUTE_FIGURES, entry_id)
    generation = _cache_generation()
    with _ROUTE_SETS_LOCK:
        held = _ROUTE_SETS.get(key)
        found = held[1] if held is not None and held[0] == generation else None
        if found is not None:
            _ROUTE_SETS.move_to_end(key)
    if found is None:
        found = kept_below(
            session,
            _ROUTE_FIGURES,
            entry_id,
            lambda: _route_figure_set(session, light_path(session, entry_id)),
        )
        with _ROUTE_SETS_LOCK:
            _ROUTE_SETS[key] = (generation, found)
            _ROUTE_SETS.move_to_end(key)
            while len(_ROUTE_SETS) > ROUTE_SETS_KEPT:
                _ROUTE_SETS.popitem(last=False)
    if found.route and found.route[-1].entry_id == entry_id:
        _remember_route(_session_routes(session), found.route)
    return found


# The largest live range (bytes of its lines) whose route figures the import stores: they
# are worked out from the range parsed whole, about ten times its lines in memory, like the
# timeline's window (STORED_TIMELINE_CHARS).
STORED_ROUTE_LIVE_BYTES = 4_000_000
# Bytes of lines a route's figures read at a time beyond its live range (whose projection
# needs it whole): a long route of a big session holds thousands of assistant messages, and
# its newest rows can be multi-MB tool results.
PARSE_PART_BYTES = 4_000_000


def _route_figure_set(session: Session, light: Sequence[LightEntry]) -> RouteFigureSet:
    from explorer.analysis.compare import RouteFigures, Spend, projected_rows, spend_of
    from explorer.analysis.projection import projected_estimate
    from explorer.session.context import projection_from_path

    light = list(light)
    live, _ = context_light(session, light)
    newest = light[-ROUTE_SHOWN:]
    # Only assistant messages and the costed types spend or call tools: the route's other
    # lines (tool results, user messages: most of its bytes) are read only when its
    # context or its newest rows hold them. Roles come from the covering skeleton index.
    spenders = _assistant_positions(session, [e.position for e in light if e.type == "message"])
    spending = [e for e in light if e.type in COSTED_TYPES or e.position in spenders]
    wanted = {e.pk: e for e in (*live, *newest, *spending)}
    # By primary key unless an id is on two rows (or a row has no key): then by id, as the
    # rest of the page reads them.
    by_pk = bool(wanted) and 0 not in wanted
    by_pk = by_pk and len({e.entry_id for e in wanted.values()}) == len(wanted)

    def read(rows: Sequence[LightEntry]) -> dict[str, dict]:
        if not rows:
            return {}
        if by_pk:
            return _load_by_pk(session, rows)
        return load_entries(session, [e.entry_id for e in rows])

    # The live range is read whole (its projection needs every message of it); the rest a
    # part at a time, keeping only what the figures need of each line.
    data = read(list({e.pk: e for e in live}.values()))
    path = [data[e.entry_id] for e in live if e.entry_id in data]
    projection = projection_from_path(path)
    at: dict[str, list[int]] = {e.entry_id: [] for e in spending}  # id → its route indexes
    for i, e in enumerate(light):
        if e.entry_id in at:
            at[e.entry_id].append(i)
    found: dict[int, Spend] = {}

    def count(eid: str, entry: dict) -> None:
        for i in at.get(eid, ()):
            if (spend := spend_of(i, entry)) is not None:
                found[i] = spend

    for eid in at.keys() & data.keys():
        count(eid, data[eid])
    outside = [e for e in spending if e.entry_id not in data]
    sizes = _line_sizes([*outside, *newest])
    for part in _parts_by_size(outside, sizes):
        for eid, entry in read(part).items():
            count(eid, entry)
    rows: list[dict[str, str]] = []
    for part in _parts_by_size(newest, sizes):
        known = {e.entry_id: data[e.entry_id] for e in part if e.entry_id in data}
        rows += _route_rows(part, {**known, **read([e for e in part if e.entry_id not in known])})
    return RouteFigureSet(
        route=light,
        figures=RouteFigures(
            length=len(light),
            message_at=[i for i, e in enumerate(light) if e.type == "message"],
            spends=[found[i] for i in sorted(found)],
        ),
        projected=projected_rows(path, projection),
        estimate=projected_estimate(path, projection),
        newest=rows,
    )


def _parts_by_size(
    rows: Sequence[LightEntry], sizes: dict[int, int], budget: int | None = None
) -> Iterator[list[LightEntry]]:
    """``rows`` in order, cut into runs of at most ``budget`` (:data:`PARSE_PART_BYTES`)
    bytes of lines by ``sizes`` (primary key → bytes; a longer line is a run of its own)."""
    budget = PARSE_PART_BYTES if budget is None else budget
    part: list[LightEntry] = []
    size = 0
    for e in rows:
        n = sizes.get(e.pk, 0)
        if part and size + n > budget:
            yield part
            part, size = [], 0
        part.append(e)
        size += n
    if part:
        yield part


def _line_sizes(rows: Sequence[LightEntry]) -> dict[int, int]:
    """Bytes of each row's line, by primary key (a route's walk leaves sizes empty). The
    size is stored after the line, so SQLite steps over a long line's pages to reach it,
    but no line is read into Python."""
    pks = [e.pk for e in rows if e.pk]
    out: dict[int, int] = {}
    for k in range(0, len(pks), 500):
        out.update(Entry.objects.filter(pk__in=pks[k : k + 500]).values_list("pk", "size"))
    return out


def _assistant_positions(session: Session, positions: Sequence[int]) -> set[int]:
    """Which of ``positions`` hold assistant messages, from the covering skeleton index
    (the role lies after the raw line in the table: reading it there reads every line)."""
    found: set[int] = set()
    for k in range(0, len(positions), 500):
        found.update(
            Entry.objects.filter(
                session=session, position__in=positions[k : k + 500], role="assistant"
            )
            .order_by()
            .values_list("position", flat=True)
        )
    return found


def _compare_pair(
    session: Session, a: str, b: str, fa: RouteFigureSet, fb: RouteFigureSet
) -> dict[str, Any]:
    from dataclasses import asdict

    from explorer.analysis.compare import (
        collapse_shared,
        common_ancestor_index,
        diff_rows,
        listed_lines,
        stats_after,
    )

    k = common_ancestor_index([e.entry_id for e in fa.route], [e.entry_id for e in fb.route])
    len_a, len_b = len(fa.route) - k - 1, len(fb.route) - k - 1
    diff = diff_rows(fa.projected, fb.projected)
    ancestor = fa.route[k].entry_id if k >= 0 else None
    lines = collapse_shared(diff)
    return {
        "a": a,
        "b": b,
        "same": a == b,
        "ancestor": ancestor,
        "ancestor_title": entry_title(load_entries(session, [ancestor]).get(ancestor, {}), 100)
        if ancestor
        else "",
        # The newest ROUTE_SHOWN of each tail: the newest of the route, as far as the tail.
        "route_a": fa.newest[max(0, len(fa.newest) - len_a) :] if len_a else [],
        "route_b": fb.newest[max(0, len(fb.newest) - len_b) :] if len_b else [],
        "len_a": len_a,
        "len_b": len_b,
        "stats_a": asdict(stats_after(fa.figures, k)),
        "stats_b": asdict(stats_after(fb.figures, k)),
        # Raw vs projected's figure (the same live ranges, the same engine estimate),
        # without its rows: building both routes' summaries was half a cold Compare.
        "projected_a": fa.estimate,
        "projected_b": fb.estimate,
        "diff": listed_lines(lines, DIFF_SHOWN),
        "diff_hidden": max(0, len(lines) - DIFF_SHOWN),  # lines not listed
        "diff_counts": {
            **{s: sum(1 for d in diff if d.side == s) for s in ("both", "a", "b")},
            # of the shared ones, those equal in content from different entries
            "content": sum(1 for d in diff if d.source_b),
        },
    }


def _compare_costs(
    session: Session,
    a: str,
    b: str,
    cursor: str | None,
    fa: RouteFigureSet,
    fb: RouteFigureSet,
) -> dict[str, Any]:
    from explorer.analysis.compare import off_route_cost

    # The cursor's route: one of the two compared (the Compare tab opens with the cursor
    # as A), else walked from theirs (both joined the known routes).
    known = next((f.route for f in (fa, fb) if cursor and f.route and f.route[-1].entry_id == cursor), None)  # fmt: skip
    on_cursor = [e.entry_id for e in (known if known is not None else light_path(session, cursor))]
    costs = entry_costs(session)
    return {
        "cursor": cursor,
        "a_abandoned": a not in on_cursor,
        "b_abandoned": b not in on_cursor,
        "wasted": off_route_cost(
            [e.entry_id for e in fa.route] + [e.entry_id for e in fb.route], on_cursor, costs
        ),
        "abandoned_total": abandoned_cost(session, cursor, on_cursor),
    }


# ---------------------------------------------------------------------------------------------
# Search: the visible-text index filled at import and on every append


SEARCH_PAGE = 50
_HIT_FIELDS = ("session_id", "entry_id", "type", "role", "text")


# A session-scoped search on SQLite scans the session's own text rows when it has at most
# this many entries, instead of asking the trigram index: the index answers for the whole
# corpus before the session filter applies, so a 500-entry session beside a 50,000-entry one
# paid the big one's match (bench_pages: 1.2 s against 40 ms alone). Above it the index wins
# for rare words (a scan reads every character of the session's text).
SEARCH_SCAN_ENTRIES = 5000


def _text_matches(
    query: str, session: Session | None = None, *, scan: bool = False
) -> QuerySet[EntryText]:
    """Every indexed entry (of ``session``, if given) whose visible text contains ``query``
    (case-insensitive).

    SQLite answers from the trigram FTS5 index (``LIKE`` on it uses the index for three
    characters or more); PostgreSQL from the ``pg_trgm`` GIN index of migration 0011, which
    serves ``ILIKE`` (``icontains`` compiles to ``UPPER(text) LIKE UPPER(…)``, which no index
    serves). On SQLite a query of fewer than three characters or with LIKE's own wildcards,
    and a small session's own rows (:data:`SEARCH_SCAN_ENTRIES`), are scanned with
    ``icontains``, as other databases are. On
    SQLite both ways end in the built-in ``LIKE`` (the index only narrows the rows it checks),
    so they find the same hits: ASCII letters fold, other letters match as written; a test
    compares them. Either way the match is on the text a reader sees, never on JSON keys or
    ids. ``scan``: the caller narrows the rows to a few itself (the entries of an append)."""
    from django.db.models.expressions import RawSQL

    query = jsonfmt.visible(query)  # the index holds the visible form of the text
    qs = EntryText.objects.all()
    if session is not None:
        qs = qs.filter(session=session)
    small = scan or (session is not None and session.entry_count <= SEARCH_SCAN_ENTRIES)
    # The trigram index serves only three characters or more; a shorter query of multi-byte
    # characters ("日本", an emoji) it answers with nothing at all rather than a scan.
    if connection.vendor == "sqlite" and _index_serves(query) and not small:
        sql = "SELECT rowid FROM explorer_entrytext_fts WHERE text LIKE %s"
        params: list[Any] = [f"%{query}%"]
        span = _text_id_span(session) if session is not None else None
        if span is not None and span[1] - span[0] < _text_id_span(None)[1] // 2:
            # The index answers for the whole corpus, and checks each candidate's text; its
            # rows are the text rows' ids, so the session's id span keeps every other
            # session's hits out (a common word's 20,000 hits in one big session cost a
            # search of another session 60 ms before its own rows were looked at). Only
            # when the span leaves most of the corpus out: over most of it, the bound made
            # the index's own walk a third slower (90 against 70 ms for 20,000 hits).
            sql += " AND rowid BETWEEN %s AND %s"
            params += list(span)
        return qs.filter(id__in=RawSQL(sql, params))
    if connection.vendor == "postgresql":
        escaped = query.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        quote = connection.ops.quote_name
        column = f"{quote(EntryText._meta.db_table)}.{quote('text')}"
        ilike = RawSQL(f"{column} ILIKE %s", [f"%{escaped}%"], output_field=models.BooleanField())
        return qs.filter(ilike)
    return qs.filter(text__icontains=query)


def _index_serves(visible: str) -> bool:
    """Whether SQLite's trigram index answers ``LIKE`` for this (visible) query: three
    characters or more, without LIKE's own wildcards."""
    return len(visible) >= 3 and not any(c in visible for c in "%_\\")


def _text_id_span(session: Session | None) -> tuple[int, int]:
    """The lowest and highest search-text row id of ``session`` (of every session when
    None; (0, -1) when there are none): lookups on the session's index, which SQLite keeps
    in row id order, or on the table's own key."""
    table = EntryText._meta.db_table
    with connection.cursor() as cur:
        if session is None:
            cur.execute(f"SELECT (SELECT min(id) FROM {table}), (SELECT max(id) FROM {table})")
        else:
            cur.execute(
                f"SELECT (SELECT min(id) FROM {table} WHERE session_id = %s),"
                f" (SELECT max(id) FROM {table} WHERE session_id = %s)",
                [session.pk, session.pk],
            )
        lo, hi = cur.fetchone()
    return (0, -1) if lo is None else (lo, hi)


def search_entries(
    query: str,
    *,
    session: Session | None = None,
    entry_type: str = "",
    offset: int = 0,
    limit: int = SEARCH_PAGE,
    exact: bool = True,
    hide: dict[int, frozenset[str]] | None = None,
) -> dict[str, Any]:
    """Every hit counted, grouped by session, one page of them listed (page, partial, JSON).

    ``hide``: session pk → entry ids whose hits are left out (archived branches); the
    answer's ``left_out`` says how many hits that was.

    Returns ``total`` (every hit), ``sessions`` (each with its hit count, most hits first),
    ``hits`` (this page, in session then file order, with the text to make snippets from)
    and ``next_offset`` (None on the last page).

    ``exact=False`` (the session page): when counting would mean matching every hit of a
    big session afresh, only this page's hits are found and ``total`` is None when there
    are more; the page asks the count view for it afterwards (``exact=True``)."""
    hide = {pk: ids for pk, ids in (hide or {}).items() if ids}
    if session is not None:
        return _session_search(
            query, session, entry_type, offset, limit, exact, hide.get(session.pk, frozenset())
        )
    qs = _text_matches(query, session)
    if entry_type:
        qs = qs.filter(type=entry_type)
    if importing := importing_pks():  # their batches are indexed, not yet shown
        qs = qs.exclude(session_id__in=importing)
    left_out = 0
    if hide:
        archived = Q()
        for pk, ids in hide.items():
            archived |= Q(session_id=pk, entry_id__in=sorted(ids))
        left_out = qs.filter(archived).count()
        qs = qs.exclude(archived)
    per_session = list(
        qs.values("session_id").annotate(n=models.Count("id")).order_by("-n", "session_id")
    )
    total = sum(r["n"] for r in per_session)
    sessions = with_first_message(Session.objects.all()).in_bulk(
        [r["session_id"] for r in per_session]
    )
    page = list(qs.order_by("session_id", "position").values(*_HIT_FIELDS)[offset : offset + limit])
    for hit in page:
        hit["session"] = sessions.get(hit["session_id"])
    return {
        "total": total,
        "sessions": [
            {"session": sessions[r["session_id"]], "hits": r["n"]}
            for r in per_session
            if r["session_id"] in sessions
        ],
        "hits": page,
        "offset": offset,
        "next_offset": offset + limit if offset + limit < total else None,
        "left_out": left_out,
    }


def _session_search(
    query: str,
    session: Session,
    entry_type: str,
    offset: int,
    limit: int,
    exact: bool,
    hide: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """:func:`search_entries` within one session: the ids of every hit, in file order, are
    kept (so the next page of the same search, or the same search again, reads 50 rows by id
    instead of matching and counting every hit again: a word in 20,000 entries of a big
    session cost about 0.4 s each time), and after an append only the new entries' text is
    matched (:func:`session_hit_ids`).

    Not ``exact``, a big session whose hits nobody has listed yet has only this page's hits
    found (:func:`_first_hit_ids`): the first page of a common word's 20,000 hits in 0.4
    ms instead of 150; ``total`` is then exact only when the page reached the last hit."""
    ids = session_hit_ids(
        query,
        session,
        entry_type,
        compute=exact or bool(hide) or not _counting_is_costly(query, session),
    )
    left_out = 0
    if hide and ids is not None:
        # Archived entries' hits left out: their text rows, by id (the kept list is of ids).
        dropped = set(
            EntryText.objects.filter(session=session, entry_id__in=sorted(hide)).values_list(
                "id", flat=True
            )
        )
        kept = [i for i in ids if i not in dropped]
        left_out, ids = len(ids) - len(kept), kept
    total: int | None
    if ids is None:
        ids = _first_hit_ids(query, session, entry_type, offset + limit + 1)
        total = len(ids) if len(ids) <= offset + limit else None
    else:
        total = len(ids)
    wanted = ids[offset : offset + limit]
    page = list(EntryText.objects.filter(id__in=wanted).order_by("position").values(*_HIT_FIELDS))
    for hit in page:
        hit["session"] = session
    more = len(ids) > offset + limit
    return {
        "total": total,
        "sessions": [{"session": session, "hits": total}] if total or total is None else [],
        "hits": page,
        "offset": offset,
        "next_offset": offset + limit if more else None,
        "left_out": left_out,
    }


def search_is_counted(query: str, session: Session, entry_type: str = "") -> bool:
    """Whether a session's page of ``query`` hits comes with its exact count: always for a
    small session, for a big one once its hit list is kept (the page's fragment is drawn
    once per version and per this answer, so the count, once asked for, is shown)."""
    if not _counting_is_costly(query, session):
        return True
    return session_hit_ids(query, session, entry_type, compute=False) is not None


def _counting_is_costly(query: str, session: Session) -> bool:
    """Whether counting means matching the index over a big session (a small session's own
    rows are scanned in a few milliseconds, and so counted at once)."""
    return session.entry_count > SEARCH_SCAN_ENTRIES and len(jsonfmt.visible(query)) >= 3


def _first_hit_ids(query: str, session: Session, entry_type: str, n: int) -> list[int]:
    """The search-text row ids of the first ``n`` hits of ``query`` in ``session``, in file
    order, matching only as far as the ``n``-th hit.

    On SQLite the trigram index is walked in row id order and stops at the ``n``-th row of
    the session: a session's text rows are stored in file order (the one writer,
    ``files.store_search_rows``, is given them by position and refuses them otherwise), so
    row id order is file order. ``CROSS JOIN`` keeps SQLite from driving the join from the
    session's rows, which asks the index once per row (seconds). Elsewhere the database
    walks the session's rows by position and stops at the ``n``-th match."""
    visible = jsonfmt.visible(query)
    if connection.vendor == "sqlite" and _index_serves(visible):
        lo, hi = _text_id_span(session)
        table = EntryText._meta.db_table
        sql = (
            f"SELECT t.id FROM explorer_entrytext_fts f CROSS JOIN {table} t ON t.id = f.rowid"
            " WHERE f.text LIKE %s AND f.rowid BETWEEN %s AND %s AND t.session_id = %s"
        )
        params: list[Any] = [f"%{visible}%", lo, hi, session.pk]
        if entry_type:
            sql += " AND t.type = %s"
            params.append(entry_type)
        sql += " ORDER BY f.rowid LIMIT %s"
        params.append(n)
        with connection.cursor() as cur:
            cur.execute(sql, params)
            return [row[0] for row in cur.fetchall()]
    qs = _text_matches(query, session, scan=True)
    if entry_type:
        qs = qs.filter(type=entry_type)
    return list(qs.order_by("position").values_list("id", flat=True)[:n])


def session_hit_ids(
    query: str, session: Session, entry_type: str = "", *, compute: bool = True
) -> list[int] | None:
    """The search-text row ids of every hit of ``query`` in ``session``, in file order.

    Search text is stored once per entry when the entry arrives (in the transaction that
    stores it) and never changes, so the hits up to file position P stay the hits up to P:
    the list is kept under the session's identity with the position it reached, and after
    an append only the rows past it are matched, by a scan of those few rows (the trigram
    index would answer for the whole corpus first). A hit list is read up to the position
    read first, so a write landing in between is matched next time, never twice.
    ``compute=False``: None when no list is kept to answer from or extend."""
    key = _identity_key(session, f"search-hits|{mask_key(session)}|{entry_type}|{query}")
    last = _last_position(session)
    kept = cache.get(key)
    if isinstance(kept, tuple) and len(kept) == 2 and kept[0] == last:
        return kept[1]
    if isinstance(kept, tuple) and len(kept) == 2 and kept[0] < last:
        upto, ids = kept
        ids = ids + _hit_ids(query, session, entry_type, upto, last, scan=True)
    elif not compute:
        return None
    else:
        ids = _hit_ids(query, session, entry_type, -1, last, scan=False)
    cache.set(key, (last, ids), TREE_CACHE_SECONDS)
    return ids


def _hit_ids(
    query: str, session: Session, entry_type: str, after: int, upto: int, *, scan: bool
) -> list[int]:
    qs = _text_matches(query, session, scan=scan).filter(position__gt=after, position__lte=upto)
    if entry_type:
        qs = qs.filter(type=entry_type)
    # Read straight from the cursor: a common word has tens of thousands of hits, and the
    # ORM's row iteration cost a quarter of a cold search of 20,000 (about 25 ms).
    sql, params = qs.order_by("position").values_list("id", flat=True).query.sql_with_params()
    with connection.cursor() as cur:
        cur.execute(sql, params)
        return [row[0] for row in cur.fetchall()]


# ---------------------------------------------------------------------------------------------
# The tree as data (the JSON API)


def tree_nodes(session: Session, cursor: str | None) -> dict[str, Any]:
    """Every entry as a node (id, parent, type, role, label, on the cursor's route), in file
    order: the Tree tab's data for tools; one cached whole-session read."""
    labels = current_labels(session)
    on_route = {e.entry_id for e in light_path(session, cursor)}
    return {
        "cursor": cursor,
        "default_leaf": default_leaf_id(session),
        "entry_count": session.entry_count,
        "nodes": [
            {
                "id": eid,
                "parent_id": parent,
                "type": kind,
                "role": role or None,
                "label": labels.get(eid),
                "on_route": eid in on_route,
            }
            for eid, parent, kind, role in _skeleton(session)
        ],
    }


# ---------------------------------------------------------------------------------------------
# Secret findings (where secrets are; never the secrets)

FINDINGS_SHOWN = 500


def session_findings(session: Session, status: str = "") -> list[SecretFinding]:
    """One session's findings in file order (at most ``FINDINGS_SHOWN``)."""
    qs = SecretFinding.objects.filter(session=session)
    if status:
        qs = qs.filter(status=status)
    qs = qs.prefetch_related(Prefetch("reveals", SecretReveal.objects.select_related("user")))
    return list(qs.order_by("line_no", "path", "start")[:FINDINGS_SHOWN])


def importing_pks() -> list[int]:
    """Sessions whose first import is still committing batches: hidden from every page
    (``models.ReadyManager``), so cross-session reads of their rows leave them out too."""
    return list(Session.every.filter(state=Session.IMPORTING).values_list("pk", flat=True))


def findings_overview(status: str = "") -> list[SecretFinding]:
    """Findings across every session, newest first, with their session (one query)."""
    qs = SecretFinding.objects.select_related("session").filter(session__state=Session.READY)
    if status:
        qs = qs.filter(status=status)
    findings = list(qs.order_by("-created", "session_id", "line_no", "pk")[:FINDINGS_SHOWN])
    # Each row names its session by its title: one query for all their first messages.
    titled = with_first_message(Session.objects.all()).in_bulk({f.session_id for f in findings})
    for f in findings:
        f.session = titled.get(f.session_id, f.session)
    return findings


def finding_counts(session: Session | None = None) -> dict[str, int]:
    """How many findings have each status (all sessions when ``session`` is None)."""
    qs = (
        SecretFinding.objects.filter(session__state=Session.READY)
        if session is None
        else SecretFinding.objects.filter(session=session)
    )
    counts = {key: 0 for key, _ in SecretFinding.STATUSES}
    for status, n in qs.values_list("status").annotate(n=Count("pk")).values_list("status", "n"):
        counts[status] = n
    return counts


def get_finding(session: Session, finding_pk: int) -> SecretFinding | None:
    return SecretFinding.objects.filter(session=session, pk=finding_pk).first()


# ---------------------------------------------------------------------------------------------
# The transcript: a route read as a conversation, one window at a time


@dataclass(frozen=True, slots=True)
class RouteMap:
    """What a transcript needs to know about a whole route without loading its entries:
    the ids in order, their types, the compaction ranges and the context edits' marks.

    Cached per session version and leaf, so scrolling a 50,000-entry route reads only the
    window's raw lines; every page of the route slices the same map.
    """

    leaf: str | None
    ids: tuple[str, ...]
    types: tuple[str, ...]
    # (compaction index, replaced start, first kept index or None), as the Compactions tab.
    compactions: tuple[tuple[int, int, int | None], ...]
    # target id → ("hidden" | "replaced", id of the newest edit on the route naming it)
    edits: dict[str, tuple[str, str]]

    def index(self, entry_id: str | None) -> int | None:
        """The position of ``entry_id`` on the route, or None when it is not on it."""
        if not entry_id:
            return None
        try:
            return self.ids.index(entry_id)
        except ValueError:
            return None


def route_map(session: Session, leaf: str | None) -> RouteMap:
    """The route root → ``leaf`` as a :class:`RouteMap` (cached per session version)."""
    # "routemap-2": a restoring edit (an undo) is no longer an edit mark.
    return cached(session, f"routemap-2:{leaf or ''}", lambda: _build_route_map(session, leaf))


def extend_route_map(rmap: RouteMap, entry_id: str, entry_type: str) -> RouteMap | None:
    """The route of a new entry whose parent is ``rmap``'s leaf, without walking it again.

    A live broadcast meets every appended entry; rebuilding the map of a 50,000-entry route
    for each costs a recursive walk. A plain entry only lengthens the route (it cannot be a
    compaction's first kept entry, which lies before the compaction); a compaction or a
    context edit changes the ranges or marks, so None tells the caller to build the map.
    """
    if entry_type in ("compaction", "context_edit") or entry_id in rmap.ids:
        return None
    return RouteMap(
        entry_id, rmap.ids + (entry_id,), rmap.types + (entry_type,), rmap.compactions, rmap.edits
    )


def _build_route_map(session: Session, leaf: str | None) -> RouteMap:
    from explorer.analysis.compactions import compaction_ranges
    from explorer.analysis.projection import entry_edit_effect

    light = light_path(session, leaf)
    special = load_entries(
        session, [e.entry_id for e in light if e.type in ("compaction", "context_edit")]
    )
    skeleton = [special.get(e.entry_id) or {"id": e.entry_id, "type": e.type} for e in light]
    edits: dict[str, tuple[str, str]] = {}
    for e in light:
        if e.type == "context_edit":
            d = special.get(e.entry_id, {})
            target = d.get("targetId")
            if isinstance(target, str):
                state = "hidden" if d.get("replacement") is None else "replaced"
                edits[target] = (state, e.entry_id)
    # A replacement the model does not see as one (an undo's original content, an edit of a
    # role it does not apply to) is no edit mark: Raw vs projected calls the row "same".
    replaced = [t for t, (state, _by) in edits.items() if state == "replaced"]
    targets = load_entries(session, replaced) if replaced else {}
    for target in replaced:
        entry = targets.get(target)
        if entry is None or entry.get("type") == "compaction":
            continue
        if entry_edit_effect(entry, special.get(edits[target][1], {})) in ("restored", "inert"):
            del edits[target]
    return RouteMap(
        leaf,
        tuple(e.entry_id for e in light),
        tuple(e.type for e in light),
        tuple(compaction_ranges(skeleton)),
        edits,
    )


# A read of children by parent must look each parent up in the ``entry_children`` index.
# Without table statistics SQLite prefers the covering ``entry_skeleton`` index whenever it
# holds every column asked for, and walks the whole session with it: 6 to 13 ms a query
# instead of 0.1 ms on 50,000 entries, and a minute for a recursive walk down a subtree.
# So the ORM reads also ask for a column that index does not hold (``BY_PARENT_COLS``,
# ignored), and the raw recursive walk names the index on SQLite.
BY_PARENT_COLS = ("child_count",)


def _children_index() -> str:
    return "INDEXED BY entry_children" if connection.vendor == "sqlite" else ""


def siblings_of(session: Session, parents: Iterable[str | None]) -> dict[str | None, list[str]]:
    """Children in file order of each of ``parents`` that has more than one (None: the
    roots): the branch points a window of a route passes."""
    wanted = [p for p in dict.fromkeys(parents) if p]
    out: dict[str | None, list[str]] = {}
    for k in range(0, len(wanted), 500):
        # Sorted here, not by the database: an ORDER BY position makes SQLite walk the whole
        # session by position instead of looking up each parent's children.
        rows = sorted(
            Entry.objects.filter(session=session, parent_id__in=wanted[k : k + 500])
            .order_by()
            .values_list("position", "parent_id", "entry_id", *BY_PARENT_COLS)
        )
        for _position, parent, child, *_ in rows:
            out.setdefault(parent, []).append(child)
    if None in parents:
        roots = list(Entry.objects.roots(session).values_list("entry_id", flat=True)[:1000])
        out[None] = roots
    return {p: kids for p, kids in out.items() if len(kids) > 1}


def children_roles(session: Session, parents: Sequence[str]) -> list[tuple[str, str]]:
    """(id, role) of every child of ``parents``, in file order (sorted here: see
    :func:`siblings_of`)."""
    rows = sorted(
        Entry.objects.filter(session=session, parent_id__in=list(parents))
        .order_by()
        .values_list("position", "entry_id", "role", *BY_PARENT_COLS)
    )
    return [(eid, role) for _position, eid, role, *_ in rows]


def newest_leaf_under(session: Session, entry_id: str) -> str | None:
    """The newest entry (in file order) of the subtree at ``entry_id``: the route a branch
    switcher opens, as the newest work under that branch is what a reader looks for."""
    table = Entry._meta.db_table
    limit = max(session.entry_count, 1) + 1
    sql = f"""
        WITH RECURSIVE sub(entry_id, position, n) AS (
            SELECT entry_id, position, 0 FROM {table} WHERE session_id = %s AND entry_id = %s
            UNION
            SELECT e.entry_id, e.position, sub.n + 1
            FROM {table} e {_children_index()} JOIN sub
                ON e.session_id = %s AND e.parent_id = sub.entry_id
            WHERE sub.n < %s AND e.entry_id <> sub.entry_id
        )
        SELECT entry_id FROM sub ORDER BY position DESC LIMIT 1
    """
    with connection.cursor() as cur:
        cur.execute(sql, [session.pk, entry_id, session.pk, limit])
        row = cur.fetchone()
    return row[0] if row else None


def route_find(session: Session, leaf: str | None, needle: str, limit: int = 200) -> list[str]:
    """Ids on the route root → ``leaf`` whose visible text contains ``needle``, in route
    order: find-in-route through the search index (the text a reader sees, secrets masked,
    never JSON keys) and the one route query."""
    if not leaf or not needle:
        return []
    order = {e.entry_id: i for i, e in enumerate(light_path(session, leaf))}
    hits = _text_matches(needle, session).values_list("entry_id", flat=True)
    return sorted({h for h in hits if h in order}, key=order.__getitem__)[:limit]


def newer_than(session: Session, entry_id: str | None) -> tuple[int, str | None]:
    """How many entries were written after ``entry_id`` (file order), and the tip (the
    file's leaf): what "N newer entries — go to the tip" says."""
    tip = default_leaf_id(session)
    if not entry_id or entry_id == tip:
        return 0, tip
    pos = (
        Entry.objects.filter(session=session, entry_id=entry_id)
        .values_list("position", flat=True)
        .first()
    )
    if pos is None:
        return 0, tip
    return Entry.objects.filter(session=session, position__gt=pos).count(), tip


def import_progress_key(user, token: str) -> str:
    """The cache key of one upload's progress (written by ``services``, read here): per
    user, so a token names nothing of others."""
    return f"import-progress:{getattr(user, 'pk', 0)}:{token}"


def import_progress(user, token: str) -> dict | None:
    """How far the upload ``token`` of ``user`` got (written by the importer as it streams,
    ``services.import_progress_tracker``), or None before it starts."""
    return cache.get(import_progress_key(user, token))


# ---------------------------------------------------------------------------------------------
# Review comments (site data about entries): shown masked and as sanitised markdown


def _comment_row(c: Any, allow: frozenset[str]) -> dict[str, Any]:
    from explorer.rendering import render_markdown

    body = shown_text(c.body, allow)
    return {
        "pk": c.pk,
        "entry_id": c.entry_id,
        "author": c.author.get_username() if c.author else "(deleted user)",
        "author_id": c.author_id,
        "created": c.created,
        "edited": c.edited,
        "text": body,
        "html": render_markdown(body),
    }


def review_threads(
    session: Session, *, entry_id: str | None = None, state: str = ""
) -> list[dict[str, Any]]:
    """Threads of a session (or of one entry), oldest first, each with its replies.
    ``state`` "open" or "resolved" filters; comments are masked and rendered."""
    from explorer.models import ReviewComment

    roots = ReviewComment.objects.filter(session=session, parent=None).select_related(
        "author", "resolved_by"
    )
    if entry_id is not None:
        roots = roots.filter(entry_id=entry_id)
    if state == "open":
        roots = roots.filter(resolved_at__isnull=True)
    elif state == "resolved":
        roots = roots.filter(resolved_at__isnull=False)
    roots = list(roots[:500])
    replies: dict[int, list[Any]] = {}
    for r in ReviewComment.objects.filter(parent__in=roots).select_related("author"):
        replies.setdefault(r.parent_id, []).append(r)
    allow = allowed_fingerprints(session)
    return [
        {
            **_comment_row(root, allow),
            "resolved": root.resolved_at is not None,
            "resolved_by": root.resolved_by.get_username() if root.resolved_by else "",
            "resolved_at": root.resolved_at,
            "replies": [_comment_row(r, allow) for r in replies.get(root.pk, [])],
        }
        for root in roots
    ]


def review_counts(session: Session) -> dict[str, Any]:
    """Open and resolved threads, and comments per entry (the transcript's badges)."""
    from explorer.models import ReviewComment

    rows = ReviewComment.objects.filter(session=session)
    per_entry = dict(rows.values("entry_id").annotate(n=Count("id")).values_list("entry_id", "n"))
    open_n = open_thread_count(session)
    resolved = rows.filter(parent=None).count() - open_n
    return {"open": open_n, "resolved": resolved, "by_entry": per_entry}


def entry_reviews(session: Session, ids: Iterable[str] | None = None) -> dict[str, dict]:
    """Entry id → {status, by, at} for the entries that have a review status."""
    from explorer.models import EntryReview

    rows = EntryReview.objects.filter(session=session).select_related("by")
    if ids is not None:
        rows = rows.filter(entry_id__in=list(ids))
    return {
        r.entry_id: {"status": r.status, "by": r.by.get_username() if r.by else "", "at": r.at}
        for r in rows
    }


def get_comment(session: Session, comment_pk: int) -> Any:
    from explorer.models import ReviewComment

    return ReviewComment.objects.filter(session=session, pk=comment_pk).first()


def comment_counts(session: Session, ids: Iterable[str]) -> dict[str, int]:
    """Entry id → comments on it, for the given entries (a transcript window's badges)."""
    from explorer.models import ReviewComment

    wanted = list(dict.fromkeys(ids))
    out: dict[str, int] = {}
    for k in range(0, len(wanted), 500):
        rows = (
            ReviewComment.objects.filter(session=session, entry_id__in=wanted[k : k + 500])
            .values("entry_id")
            .annotate(n=Count("id"))
            .values_list("entry_id", "n")
        )
        out.update(rows)
    return out


def open_thread_count(session: Session) -> int:
    """Open review threads of a session (the Review tab's title): one count query."""
    from explorer.models import ReviewComment

    return ReviewComment.objects.filter(
        session=session, parent=None, resolved_at__isnull=True
    ).count()


# ---------------------------------------------------------------------------------------------
# The context-size timeline

TIMELINE_MAX_PATH = 6000  # newest entries of a route the timeline shows turns of
# The window's start moves in steps this long, so an append at the tip extends the kept
# figures instead of shifting every prefix by one entry.
TIMELINE_STEP = 1000
TIMELINES_KEPT = 4  # routes whose timeline a process keeps per session


@dataclass
class _KeptTimeline:
    start: int  # the window's first index on the route
    fed: int  # light entries of the window read so far
    last_id: str  # the last of them
    state: TimelineState
    stored: int = -1  # the position of the stored copy as far as this process knows
    lock: threading.Lock = field(default_factory=threading.Lock)


_TIMELINES: OrderedDict[str, tuple[str, list]] = OrderedDict()
_TIMELINES_LOCK = threading.Lock()


def timeline_window(route_length: int) -> int:
    """How many of a route's oldest entries the timeline leaves out: none up to
    :data:`TIMELINE_MAX_PATH`, then a multiple of :data:`TIMELINE_STEP`, so the start stays
    put while the route grows by up to a step."""
    over = route_length - TIMELINE_MAX_PATH
    return 0 if over <= 0 else (over // TIMELINE_STEP + 1) * TIMELINE_STEP


def timeline_figures(session: Session, cursor: str | None) -> dict[str, Any]:
    """The Timeline tab's figures (its page, htmx partial and JSON all use this).

    Cached per session version; after an append at the tip, the per-process copy of the
    route's turns (:func:`_timeline_state`) is extended by the appended entries only."""
    # "timeline-3": each turn has its estimate too, and a "now" point may end the chart
    return cached(session, f"timeline-3:{cursor or ''}", lambda: _timeline_figures(session, cursor))


# The stored tier of a big session's timeline (:mod:`explorer.stored_figures`): the kept
# turns of the default route with the route itself, written by the import and again by a
# reader of the tip once it is STORE_LAG positions ahead. A worker without a copy of its own
# adopts them and extends them by what was appended since, instead of building them.
_TIMELINE_STATE = "timeline-state"


def _timeline_figures(session: Session, cursor: str | None) -> dict[str, Any]:
    """The figures of the route to ``cursor``, from the turns kept in this process, or
    stored with a big session, or built.

    A cold reader of a 50,000-entry session's tip used to walk the whole route up, parse
    every entry of it and run the estimate along it: three costs proportional to the
    route, which made its first request twice a small session's. The stored turns are one
    row, loaded in about the time of one of those three; after an append they are extended
    in this process like its own, so the first request after it stays cheap too."""
    store = bool(cursor) and stored_figures.wanted(session)
    # The stored turns hold masked entries: named by what the masking showed in clear and
    # by the secret rules the findings were made with (a copy outlives a rescan).
    variant = f"{mask_key(session)}:{getattr(session, 'secrets_rules', '')}"
    if store:
        _adopt_stored_timeline(session, variant)
    light = light_path(session, cursor)
    kept = _timeline_state(session, light)
    if store and cursor == default_leaf_id(session):
        _store_timeline(session, light, kept, variant)
    with kept.lock:
        every = kept.state.points
        points = settled(kept.state, sampled_points(every))
        peak, turns = peak_of(every, points), len(every)
        now = now_point(kept.state, light[-1].entry_id) if light else None
        now_info = None
        if now is not None:  # a compaction or edit after the last reply: the context now
            kind = next(m.kind for m in reversed(kept.state.marks) if m.kind != "branch_summary")
            now_info = {
                "entry_id": now.entry_id, "projected": now.projected, "estimate": now.estimate,
                "kind": "compaction" if kind == "compaction" else "context edit",
            }  # fmt: skip
        marks = list(kept.state.marks)
        length = len(kept.state.run) - kept.state.base
    return {
        # The chart ends at the context now; ``points`` stay the turns (``now_point`` apart).
        "chart": timeline_svg_data([*points, now] if now else points, marks, length),
        "points": points,
        "marks": marks,
        "clipped": kept.start,
        "now_point": now_info,
        # Every turn of the route, not only the drawn ones (at most about 240).
        "peak": peak,
        "turns": turns,
        "path_length": len(light),
    }


# The most characters of JSON a route's window may hold for its kept turns to be stored.
# The turns hold every entry of the window parsed (the running estimate needs them to go
# on), about twelve times the lines' size in memory, and their stored row is the pickle of
# that: a 50,000-entry session's 984-entry route is 2 M characters; a big file's route of
# multi-MB tool results would make the import hold, and write, hundreds of MB (the import
# must stay within a quarter of the file's size). Above it, a reader builds the turns.
STORED_TIMELINE_CHARS = 4_000_000


def _timeline_storable(session: Session, window: Sequence[LightEntry]) -> bool:
    """Whether the kept turns of ``window`` are small enough to store (one sum over the
    window's rows; no line is read into Python)."""
    from django.db.models import Sum
    from django.db.models.functions import Length

    pks = [e.pk for e in window]
    if not pks or 0 in pks:
        return False
    chars = 0
    for k in range(0, len(pks), 900):
        part = Entry.objects.filter(session=session, pk__in=pks[k : k + 900])
        chars += part.aggregate(n=Sum(Length("raw")))["n"] or 0
        if chars > STORED_TIMELINE_CHARS:
            return False
    return True


def _adopt_stored_timeline(session: Session, variant: str) -> None:
    """Take the stored kept turns (and their route) into this process when it keeps none
    for the session: :func:`_timeline_state` then extends them like its own, and the
    route is reused by :func:`light_path` (a tip a few entries below it walks those few).
    What does not fit (a branch elsewhere, a window that moved) is built as before."""
    kept = _session_timelines(session)
    with _TIMELINES_LOCK:
        if kept:
            return
    found = stored_figures.load(session, f"{_TIMELINE_STATE}|{variant}", _last_position(session))
    if found is None:
        return
    upto, (rows, start, fed, last_id, state) = found
    route = [LightEntry(*r) for r in rows]
    if not fed or start + fed != len(route) or route[-1].entry_id != last_id:
        return
    _remember_route(_session_routes(session), route)
    with _TIMELINES_LOCK:
        if not kept:
            kept.append(_KeptTimeline(start, fed, last_id, state, stored=upto))


def _store_timeline(
    session: Session,
    light: Sequence[LightEntry],
    kept: _KeptTimeline,
    variant: str,
) -> None:
    """Store the tip's kept turns and route when the stored copy is
    :data:`~explorer.stored_figures.STORE_LAG` positions behind (or missing), so a cold
    reader loads them instead of building them from the route (a reader of another
    branch builds its own: the stored copy is the tip's)."""
    last = _last_position(session)
    state_name = f"{_TIMELINE_STATE}|{variant}"
    with kept.lock:  # the state must not be extended while it is pickled
        if kept.start + kept.fed != len(light) or not light or light[-1].entry_id != kept.last_id:
            return  # extended meanwhile by a longer route: that reader stores it
        if kept.stored < 0:
            kept.stored = stored_figures.position(session, state_name)
        if last - kept.stored < stored_figures.STORE_LAG:
            return
        if not _timeline_storable(session, light[kept.start :]):
            kept.stored = last  # asked again after the next STORE_LAG positions
            return
        rows = [
            (e.entry_id, e.parent_id, e.type, e.role, e.position, e.size, e.child_count)
            + (e.target_id, e.pk)
            for e in light
        ]
        value = (rows, kept.start, kept.fed, kept.last_id, kept.state)
        if stored_figures.store(session, state_name, last, value):
            kept.stored = last


def _session_timelines(session: Session) -> list[_KeptTimeline]:
    # Tied to a stamp in the shared cache like the routes: a cleared cache forgets them too.
    key = _identity_key(session, f"timeline|{mask_key(session)}")
    return _stamped_list(_TIMELINES, _TIMELINES_LOCK, key)


def _timeline_state(session: Session, light: Sequence[LightEntry]) -> _KeptTimeline:
    """Every turn of the route's window, extended from a kept shorter route when this one
    continues it (same window start, the kept last entry at the same place), else built.

    A route is determined by its last entry, so a kept route whose last entry sits at the
    same index here is this route's prefix, and its figures stay right."""
    start = timeline_window(len(light))
    kept = _session_timelines(session)
    with _TIMELINES_LOCK:
        candidates = list(kept)
    for item in reversed(candidates):
        with item.lock:  # checked under the lock: another request may be extending it
            end = item.start + item.fed
            if not (item.start == start and item.fed and end <= len(light)):
                continue
            if light[end - 1].entry_id != item.last_id:
                continue
            new = light[end:]
            if new:
                with gc_paused():
                    extend_timeline(item.state, full_path(session, new))
                item.fed += len(new)
                item.last_id = new[-1].entry_id
        return item
    window = light[start:]
    # What is parsed and estimated here is kept (the state holds the route's entries and
    # their messages): the collector's passes over it as it grows are paused.
    with gc_paused():
        state = TimelineState()
        if start:  # the window's turns go on from the context the route before it leaves
            prime_timeline(state, context_path(session, light[:start])[0])
        state = extend_timeline(state, full_path(session, window))
    item = _KeptTimeline(start, len(window), window[-1].entry_id if window else "", state)
    with _TIMELINES_LOCK:
        kept.append(item)
        del kept[:-TIMELINES_KEPT]
    return item
