"""The cache plumbing of the reads, in one place: identity and mask keys, :func:`cached`,
the kept copies written after the answer (:func:`keep_later`, :func:`kept_read`), the cache
generation, the per-request read memo and the grown copies (:func:`grown`).

Every other mechanism that keeps a figure goes through these functions, so retiring a cache
is a change here and at its callers, not a hunt through every tab's module.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from django.core.cache import cache

from explorer import shared_copies, stored_figures
from explorer.models import ArchivedBranch, Entry, SecretFinding, Session

T = TypeVar("T")


TREE_CACHE_SECONDS = 3600
ROUTE_SESSIONS_KEPT = 4  # sessions whose routes are kept


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

    What a process keeps per session identity (routes read, alignments built) stays right as
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


# ---------------------------------------------------------------------------------------------
# The per-request read memo and the keys every cached read is stored under


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
    would cost (the skeleton, read from its covering index): only their stamp is shared,
    never the megabytes a first request would otherwise pickle and compress into the cache.

    ``stored=True`` adds the tier under both (:mod:`explorer.stored_figures`): a worker
    that has neither copy loads the one stored with a big session and extends it in its
    own memory, instead of building from every row. Only a write path stores it (inside
    ``stored_figures.writing()``: the import and the appends, through
    :func:`explorer.queries.figures.refresh`), once its copy is
    :data:`~explorer.stored_figures.STORE_LAG` positions (``store_lag`` when given) ahead
    of the stored one; a reader never writes.
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
        if store and stored_figures.writes() and last - copy.stored >= lag:
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


def extended(
    session: Session,
    name: str,
    extend: Callable[[int, int], list[T]],
    *,
    compute: bool = True,
) -> list[T] | None:
    """A list of what the entries up to the session's newest file position yield, kept in
    the shared cache under the session's identity with the position it reached.

    For a list whose items only ever follow the entries that make them (a search's hits
    in file order): what the entries up to P yield stays what they yield, so after an
    append ``extend(P, last)`` adds the items of the positions (P, last] to the kept list;
    ``extend(-1, last)`` makes the first one. ``compute=False``: None when no list is kept
    to answer from or extend. The position is read before the rows, so a write landing in
    between is added next time, never twice."""
    key = _identity_key(session, f"extended|{name}")
    last = _last_position(session)
    kept = cache.get(key)
    if isinstance(kept, tuple) and len(kept) == 2 and kept[0] == last:
        return kept[1]
    if isinstance(kept, tuple) and len(kept) == 2 and kept[0] < last:
        items = kept[1] + extend(kept[0], last)
    elif not compute:
        return None
    else:
        items = extend(-1, last)
    cache.set(key, (last, items), TREE_CACHE_SECONDS)
    return items


def by_content(kind: str, content: str, builder: Callable[[], T]) -> T:
    """``builder()`` kept under a digest of ``content`` alone, whichever session or version
    asks: for work whose answer is a function of one input text (a graph's layout by
    ``dot``, a second or more of a big graph's), so a new session version whose drawn graph
    is unchanged lays nothing out. Lone surrogates and NUL digest as the U+FFFD they are
    drawn as."""
    from explorer.session.jsonfmt import visible

    digest = hashlib.sha256(visible(content).encode("utf-8")).hexdigest()
    return _through_cache(f"explorer:{kind}:{digest}", builder)


def _upto_key(session: Session, mask: str, kind: str, entry_id: str) -> str:
    # What a compaction's list item and detail say depends only on the route up to it,
    # which is its own ancestors: keyed by the compaction alone, it survives appends.
    return _identity_key(session, f"{kind}|{mask}|{entry_id}")


def kept_by(session: Session, name: str, shown: Any, builder: Callable[[], T]) -> T:
    """``builder()`` kept under a digest of ``shown`` (everything it depends on besides
    the session's identity, as a value whose ``repr`` names it) rather than per session
    version: for what an append rarely changes, such as the list of every label, so the
    first page after an append does not render it again."""
    digest = hashlib.sha256(repr(shown).encode("utf-8", "surrogatepass")).hexdigest()
    return _through_cache(_identity_key(session, f"kept-by|{name}|{digest}"), builder)


def kept_below(session: Session, name: str, entry_id: str, builder: Callable[[], T]) -> T:
    """``builder()`` kept per entry rather than per session version, for what depends only
    on ``entry_id``'s own ancestors (a branch summary's detail, a fragment of it): the
    route up to an entry never changes in an append-only tree, so an append leaves it
    right. ``name`` must hold everything else it depends on; the masking is part of the
    key. Kept in the shared cache only: a reader never stores (a cleared cache builds it
    again, from the few rows it reads)."""
    return _through_cache(_upto_key(session, mask_key(session), name, entry_id), builder)


@contextmanager
def one_step_at_a_time() -> Iterator[None]:
    """Forget the grown figures this process starts keeping inside the block (their
    stored copies stay: a later reader loads and extends them)."""
    with _GROWN_LOCK:
        before = set(_GROWN)
    try:
        yield
    finally:
        with _GROWN_LOCK:
            for key in [k for k in _GROWN if k not in before]:
                del _GROWN[key]
