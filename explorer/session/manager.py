"""`SessionManager`: one session tree, its leaf, and its persistence (SPEC section 3).

The manager keeps the file entries in file order (the source of truth), an id index, the label
maps and the leaf. Every append goes through one path (`_append_entry`): push, index, advance
the leaf, persist. Persistence follows Pi exactly: nothing is written until the session holds
a user or assistant message, the first write is an exclusive create of everything in memory,
and every later append writes exactly one new line; existing bytes are never touched except by
the three whole-file rewrites the spec allows (migration, empty-file initialisation, branched
session).

What was read is never re-serialized: a loaded entry's original line is kept (as text, or as
its byte span in the file, which the single writer never rewrites), so writing a version-3
session back (`to_bytes`) reproduces its bytes.
"""

from __future__ import annotations

import builtins
import hashlib
import os
import posixpath
import re
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from . import context as _context
from . import jsonfmt
from .entries import (
    branch_summary_entry,
    compaction_entry,
    context_edit_entry,
    custom_entry,
    custom_message_entry,
    is_conversation,
    label_entry,
    message_entry,
    migrate_session_entries,
    model_change_entry,
    session_header,
    session_info_entry,
    thinking_level_change_entry,
    usage_entry,
)
from .errors import SessionError
from .gcpause import gc_paused
from .ids import (
    Clock,
    RandomSource,
    deterministic_rng,
    generate_entry_id,
    now_ms,
    uuid7,
    validate_session_id,
)
from .loading import LoadedFile, load_line, parse_bytes, parse_file
from .paths import (
    default_session_dir_path,
    expand_path,
    file_timestamp,
    get_default_session_dir,
    resolve_path,
)
from .storage import FileStorage, SessionStorage

__all__ = ["DEFAULT_DEFER_BYTES", "SessionManager", "TreeNode"]

DEFAULT_DEFER_BYTES = 64 * 1024
"""A sensible `defer_bodies_over`: lines above 64 KiB are rare (about 1% of real lines) but
hold most of the bytes of a multi-GB session."""
_FULL_CACHE_BYTES = 8 * 1024 * 1024  # of line bytes; parsed, up to 4x that (UCS-4 text)
_UPGRADE_RUN_BYTES = 8 * 1024 * 1024  # one read while adopting lazy entries...
_UPGRADE_GAP = 256 * 1024  # ...unless the next wanted line is further away than this

StorageFactory = Callable[[str], SessionStorage]

_MISSING: Any = object()
_NEWLINE_RUN = re.compile(r"[\r\n]+")


def _lookup(index: dict[Any, Any], key: Any) -> Any:
    try:
        return index.get(key)
    except TypeError:
        return None


def _sanitize_name(name: Any) -> str:
    return jsonfmt.js_trim(_NEWLINE_RUN.sub(" ", jsonfmt.js_string(name)))


def _ms_value(ms: float) -> int | float:
    return int(ms) if ms == ms and float(ms).is_integer() else ms


@dataclass(eq=False, repr=False)
class TreeNode:
    """One entry in `get_tree()`; `label`/`label_timestamp` are None when unlabelled."""

    entry: dict[str, Any]
    children: builtins.list[TreeNode] = field(default_factory=list)
    label: Any = None
    label_timestamp: Any = None

    def __repr__(self) -> str:  # shallow: trees can be thousands of levels deep
        return f"TreeNode(id={self.entry.get('id')!r}, children={len(self.children)})"

    def to_json(self) -> dict[str, Any]:
        """Pi's node shape `{entry, children, label?, labelTimestamp?}` (iterative)."""
        root: dict[str, Any] = {}
        stack: builtins.list[tuple[TreeNode, dict[str, Any]]] = [(self, root)]
        while stack:
            node, out = stack.pop()
            out["entry"] = node.entry
            kids: builtins.list[dict[str, Any]] = []
            out["children"] = kids
            if node.label is not None:
                out["label"] = node.label
            if node.label_timestamp is not None:
                out["labelTimestamp"] = node.label_timestamp
            for child in node.children:
                child_out: dict[str, Any] = {}
                kids.append(child_out)
                stack.append((child, child_out))
        return root


class SessionManager:
    """Handle for one session (a file, a custom storage, or memory only). Single writer."""

    # ------------------------------------------------------------------------------------------
    # Construction

    def __init__(
        self,
        cwd: str,
        session_dir: str,
        session_file: str | None = None,
        persist: bool = True,
        new_session_options: dict[str, Any] | None = None,
        preloaded_entries: builtins.list[Any] | None = None,
        *,
        preloaded_file: LoadedFile | None = None,
        clock: Clock | None = None,
        rng: RandomSource | None = None,
        migration_rng: RandomSource | None = None,
        storage: SessionStorage | None = None,
        storage_factory: StorageFactory | None = FileStorage,
    ) -> None:
        """The private constructor of SPEC section 3.3; prefer the class methods."""
        self._clock: Clock = clock or now_ms
        self._rng = rng
        self._migration_rng = migration_rng
        self._storage_factory = storage_factory
        self._storage: SessionStorage | None = storage
        self._session_id: Any = ""
        self._session_file: str | None = None
        self._cwd = resolve_path(cwd)
        self._session_dir = expand_path(session_dir) if session_dir else ""
        self._persist = persist
        self._flushed = False
        self._file_entries: builtins.list[Any] = []
        self._raw_lines: builtins.list[str | None] = []
        self._raw_spans: Any = None  # array of line offsets when the text stays in the file
        self._raw_path: str | None = None
        # Deferred bodies: id(skeleton) -> its position in `_file_entries` (see `full_entry`).
        self._deferred: dict[int, int] = {}
        self._full_cache: OrderedDict[int, tuple[dict[str, Any], int]] = OrderedDict()
        self._full_cache_bytes = 0
        # Lazy skeletons (default `open`): id(skeleton) -> its position; see `_upgrade`.
        self._lazy: dict[int, int] = {}
        self._by_id: dict[Any, dict[str, Any]] = {}
        self._labels: dict[Any, Any] = {}
        self._label_timestamps: dict[Any, Any] = {}
        self._leaf_id: Any = None
        self.loaded_file: LoadedFile | None = None
        """The tolerant-read report of the last file loaded (line numbers, skipped lines)."""
        if (
            persist
            and self._session_dir
            and storage is None
            and not os.path.exists(self._session_dir)
        ):
            os.makedirs(self._session_dir, exist_ok=True)
        if session_file:
            self._set_session_file(session_file, preloaded_file)
        elif storage is not None:
            self._attach_storage(storage, preloaded_file)
        elif preloaded_entries:
            self._load_entries(preloaded_entries, None, new_session_options)
        else:
            self.new_session(new_session_options)

    # -- static constructors -----------------------------------------------------------------

    @classmethod
    def create(
        cls,
        cwd: str,
        session_dir: str | None = None,
        options: dict[str, Any] | None = None,
        *,
        clock: Clock | None = None,
        rng: RandomSource | None = None,
    ) -> SessionManager:
        """A new persistent session; nothing is written until the first conversation."""
        directory = expand_path(session_dir) if session_dir else get_default_session_dir(cwd)
        return cls(cwd, directory, None, True, options, clock=clock, rng=rng)

    @classmethod
    def open(
        cls,
        path: str,
        session_dir: str | None = None,
        cwd_override: str | None = None,
        *,
        clock: Clock | None = None,
        rng: RandomSource | None = None,
        defer_bodies_over: int | None = None,
    ) -> SessionManager:
        """Open a session file (created lazily when it does not exist).

        `cwd` = `cwd_override` ?? the header's string `cwd` ?? the process directory. The file
        is read once: its first kept entry is the header that discovery would find.
        `defer_bodies_over` (bytes, e.g. `DEFAULT_DEFER_BYTES`) keeps longer lines of a
        version-3 file as skeletons until needed; see `full_entry`.

        Without it, a version-3 file is read lazily: each entry starts as a skeleton and
        becomes its full entry, once and for good, when anything hands it out (see
        `_upgrade`), so every query answers as if the file had been read in full while
        opening and building the context parse only the bodies the context shows.
        """
        resolved = resolve_path(path)
        preloaded: LoadedFile | None = None
        header: Any = None
        if os.path.exists(resolved):
            preloaded = parse_file(
                resolved,
                keep_raw=False,
                defer_over=defer_bodies_over,
                lazy=defer_bodies_over is None,
            )
            if preloaded.valid:
                header = preloaded.entries[0]
        cwd = cwd_override
        if cwd is None and isinstance(header, dict) and isinstance(header.get("cwd"), str):
            cwd = header["cwd"]
        if cwd is None:
            cwd = os.getcwd()
        directory = expand_path(session_dir) if session_dir else posixpath.dirname(resolved)
        return cls(cwd, directory, resolved, True, preloaded_file=preloaded, clock=clock, rng=rng)

    @classmethod
    def continue_recent(
        cls,
        cwd: str,
        session_dir: str | None = None,
        *,
        clock: Clock | None = None,
        rng: RandomSource | None = None,
    ) -> SessionManager:
        """Open the most recent session of the directory, or start a new one there."""
        from .listing import find_most_recent_session, paths_equal

        directory = expand_path(session_dir) if session_dir else get_default_session_dir(cwd)
        filter_cwd = session_dir is not None and not paths_equal(
            directory, default_session_dir_path(cwd)
        )
        recent = find_most_recent_session(directory, cwd if filter_cwd else None)
        if recent:
            return cls(cwd, directory, recent, True, clock=clock, rng=rng)
        return cls(cwd, directory, None, True, clock=clock, rng=rng)

    @classmethod
    def in_memory(
        cls,
        cwd: str | None = None,
        options: dict[str, Any] | None = None,
        entries: builtins.list[Any] | None = None,
        *,
        clock: Clock | None = None,
        rng: RandomSource | None = None,
    ) -> SessionManager:
        """A manager that never touches the filesystem; `entries` (with a header) are adopted
        and migrated in memory."""
        return cls(
            cwd if cwd is not None else os.getcwd(),
            "",
            None,
            False,
            options,
            entries,
            clock=clock,
            rng=rng,
        )

    @classmethod
    def from_storage(
        cls,
        storage: SessionStorage,
        *,
        cwd: str | None = None,
        session_dir: str = "",
        clock: Clock | None = None,
        rng: RandomSource | None = None,
        storage_factory: StorageFactory | None = None,
    ) -> SessionManager:
        """Like `open`, but reading and persisting through `storage` (e.g. the database).

        `cwd` defaults to the stored header's `cwd`. `new_session()` and
        `create_branched_session()` move a manager to a new session; they persist only when a
        `storage_factory` (path → storage) and a `session_dir` are given.
        """
        preloaded: LoadedFile | None = None
        if storage.exists():
            preloaded = _read_storage(storage)
        if cwd is None:
            header = preloaded.entries[0] if preloaded is not None and preloaded.valid else None
            if isinstance(header, dict) and isinstance(header.get("cwd"), str):
                cwd = header["cwd"]
            else:
                cwd = os.getcwd()
        return cls(
            cwd,
            session_dir,
            None,
            True,
            preloaded_file=preloaded,
            clock=clock,
            rng=rng,
            storage=storage,
            storage_factory=storage_factory,
        )

    @classmethod
    def load_readonly(
        cls,
        source: str | bytes,
        *,
        cwd: str | None = None,
        path: str | None = None,
        defer_bodies_over: int | None = None,
    ) -> SessionManager:
        """Inspect a session without any of Pi's write side effects.

        `source` is a file path or the file's bytes. The result is an in-memory manager:
        no newline repair, no migration rewrite, no empty-file initialisation. Ids assigned
        while migrating a version-1 file are derived from the file's content, so the same
        bytes give the same ids on every run. Raises `SessionError` for a non-empty file that
        is not a session; an empty or missing source gives a fresh empty session.
        `defer_bodies_over` applies to a path source as in `open` (the file must then stay
        unchanged while the manager is used).
        """
        raw_path: str | None = None
        rng: RandomSource
        migration_rng: RandomSource
        if isinstance(source, (bytes, bytearray, memoryview)):
            data = bytes(source)
            shown = path or "<bytes>"
            seed = hashlib.sha256(data).digest()
            loaded = parse_bytes(data)
            rng = deterministic_rng(seed + b"/append")
            migration_rng = deterministic_rng(seed)
        else:
            shown = resolve_path(source)
            if os.path.exists(shown):
                loaded = parse_file(shown, keep_raw=False, defer_over=defer_bodies_over)
                raw_path = shown
            else:
                loaded = parse_bytes(b"")
            # Hashing a multi-GB file costs seconds; most inspections never draw an id.
            rng = _FileSeededRng(shown, loaded.size, b"/append")
            migration_rng = _FileSeededRng(shown, loaded.size, b"")
            if loaded.valid:
                # The constructor's placeholder session (replaced by the file's) draws its
                # id; count those bytes instead of hashing for them.
                rng.counting = True
        if not loaded.valid and loaded.size > 0:
            raise SessionError(f"Session file is not a valid pi session: {shown}")
        header = loaded.entries[0] if loaded.valid else None
        if cwd is None:
            cwd = (
                header["cwd"]
                if isinstance(header, dict) and isinstance(header.get("cwd"), str)
                else os.getcwd()
            )
        manager = cls(
            cwd,
            "",
            None,
            False,
            None,
            None,
            rng=rng,
            migration_rng=migration_rng,
            clock=None,
        )
        if isinstance(rng, _FileSeededRng):
            rng.counting = False
        if loaded.valid:
            if loaded.spans is not None and raw_path is not None:
                manager._load_entries(
                    loaded.entries, None, None, loaded.spans, raw_path, loaded.deferred
                )
            else:
                manager._load_entries(loaded.entries, loaded.raw_lines, None)  # type: ignore[arg-type]
            manager.loaded_file = loaded
        return manager

    @classmethod
    def fork_from(
        cls,
        source_path: str,
        target_cwd: str,
        session_dir: str | None = None,
        options: dict[str, Any] | None = None,
        *,
        clock: Clock | None = None,
        rng: RandomSource | None = None,
    ) -> SessionManager:
        """Copy every entry of a session file into a new session for `target_cwd` (SPEC 7.1.2)."""
        from .branching import fork_from

        return fork_from(cls, source_path, target_cwd, session_dir, options, clock=clock, rng=rng)

    @staticmethod
    def find_by_id(cwd: str, session_id: str, session_dir: str | None = None) -> str | None:
        from .listing import find_by_id

        return find_by_id(cwd, session_id, session_dir)

    @staticmethod
    def list(cwd: str, session_dir: str | None = None) -> builtins.list[Any]:
        from .listing import list_sessions

        return list_sessions(cwd, session_dir)

    @staticmethod
    def list_all(session_dir: str | None = None) -> builtins.list[Any]:
        from .listing import list_all

        return list_all(session_dir)

    # -- loading -------------------------------------------------------------------------------

    def set_session_file(self, path: str) -> None:
        """Switch to `path` (SPEC section 3.3): load it, initialise it if empty, or start a
        new session that will be created there."""
        self._set_session_file(path, None)

    def _set_session_file(self, path: str, preloaded: LoadedFile | None) -> None:
        explicit = resolve_path(path)
        self._session_file = explicit
        storage = (
            self._storage_factory(explicit) if self._storage_factory else FileStorage(explicit)
        )
        self._storage = storage
        if storage.exists():
            loaded = preloaded if preloaded is not None else _read_storage(storage)
            self._adopt_loaded(loaded, explicit)
        else:
            self.new_session()
            self._session_file = explicit
            self._storage = storage

    def _attach_storage(self, storage: SessionStorage, preloaded: LoadedFile | None) -> None:
        self._session_file = storage.path
        self._storage = storage
        if storage.exists():
            loaded = preloaded if preloaded is not None else _read_storage(storage)
            self._adopt_loaded(loaded, storage.path or "")
        else:
            self.new_session()
            self._session_file = storage.path
            self._storage = storage

    def _adopt_loaded(self, loaded: LoadedFile, shown_path: str) -> None:
        storage = self._storage
        if not loaded.entries:
            if loaded.size > 0:
                raise SessionError(f"Session file is not a valid pi session: {shown_path}")
            explicit = self._session_file
            self.new_session()
            self._session_file = explicit
            self._storage = storage
            self._rewrite_file()
            self._flushed = True
            return
        if loaded.missing_final_newline and self._persist and storage is not None:
            # The next appended record must start on a fresh line.
            storage.append(b"\n")
        self.loaded_file = loaded
        if loaded.spans is not None:
            self._load_entries(
                loaded.entries,
                None,
                None,
                loaded.spans,
                self._session_file,
                loaded.deferred,
                loaded.lazy,
            )
        else:
            self._load_entries(loaded.entries, loaded.raw_lines, None)  # type: ignore[arg-type]
        self._flushed = True

    def _load_entries(
        self,
        entries: builtins.list[Any],
        raw_lines: builtins.list[str | None] | None,
        options: dict[str, Any] | None,
        spans: Any = None,
        raw_path: str | None = None,
        deferred: Any = None,
        lazy: Any = None,
    ) -> None:
        header = next((e for e in entries if type(e) is dict and e.get("type") == "session"), None)
        self._raw_spans = None
        self._raw_path = None
        self._forget_deferred()
        if header is not None:
            self._file_entries = entries
            self._raw_lines = list(raw_lines) if raw_lines is not None else [None] * len(entries)
            if spans is not None and raw_path:
                # The original text stays in the file; keep only where each line is.
                self._raw_spans = spans
                self._raw_path = raw_path
                if deferred:
                    self._deferred = {id(entries[i]): i for i in deferred}
                if lazy:
                    self._lazy = lazy
            self._session_id = header.get("id")
            if migrate_session_entries(entries, self._migration_rng or self._rng):
                # Only version-3 files defer bodies, and those never migrate.
                self._materialize_all()
                self._raw_lines = [None] * len(entries)
                self._raw_spans = None
                self._raw_path = None
                self._rewrite_file()
        else:
            self.new_session(options)
            self._file_entries = self._file_entries + [e for e in entries if type(e) is dict]
            self._raw_lines = [None] * len(self._file_entries)
        self._build_index()

    def new_session(self, options: dict[str, Any] | None = None) -> str | None:
        """Start a new empty session (nothing written); returns the new file path."""
        options = options or {}
        ms = self._clock()
        if options.get("id") is not None:
            self._session_id = validate_session_id(options["id"])
        else:
            self._session_id = uuid7(ms, self._rng)
        timestamp = jsonfmt.iso_from_ms(ms)
        header = session_header(
            self._session_id, timestamp, self._cwd, options.get("parentSession")
        )
        self._file_entries = [header]
        self._raw_lines = [None]
        self._raw_spans = None
        self._raw_path = None
        self._forget_deferred()
        self._by_id = {}
        self._labels = {}
        self._label_timestamps = {}
        self._leaf_id = None
        self._flushed = False
        self.loaded_file = None
        if self._persist:
            self._session_file = self._join_dir(
                f"{file_timestamp(timestamp)}_{self._session_id}.jsonl"
            )
            self._storage = (
                self._storage_factory(self._session_file) if self._storage_factory else None
            )
        return self._session_file

    def _join_dir(self, name: str) -> str:
        if not self._session_dir:
            return name
        return posixpath.normpath(posixpath.join(self._session_dir, name))

    def _build_index(self) -> None:
        by_id: dict[Any, dict[str, Any]] = {}
        labels: dict[Any, Any] = {}
        label_ts: dict[Any, Any] = {}
        leaf: Any = None
        for entry in self._file_entries:
            if type(entry) is not dict:
                continue
            kind = entry.get("type")
            if kind == "session":
                continue
            key = entry.get("id")
            if type(key) is not str and not jsonfmt.hashable(key):
                continue
            by_id[key] = entry
            leaf = key
            if kind == "label":
                target = entry.get("targetId")
                if not jsonfmt.hashable(target):
                    continue
                if jsonfmt.truthy(entry.get("label")):
                    labels[target] = entry["label"]
                    label_ts[target] = entry.get("timestamp")
                else:
                    labels.pop(target, None)
                    label_ts.pop(target, None)
        self._by_id = by_id
        self._labels = labels
        self._label_timestamps = label_ts
        self._leaf_id = leaf

    # ------------------------------------------------------------------------------------------
    # Persistence

    def _iter_line_bytes(self) -> Iterator[tuple[dict[str, Any], bytes]]:
        """(file entry, its line as bytes without the newline): the original bytes for loaded
        entries (kept as text, or read back from the file), `JSON.stringify` for the rest."""
        spans = self._raw_spans
        covered = len(spans) // 2 if spans is not None else 0
        raws = self._raw_lines
        fh = None
        try:
            for index, entry in enumerate(self._file_entries):
                raw = raws[index] if index < len(raws) else None
                if raw is not None:
                    yield entry, raw.encode("utf-8", "surrogatepass")
                elif index < covered and self._raw_path is not None:
                    if fh is None:
                        fh = builtins.open(self._raw_path, "rb")  # noqa: SIM115
                    start = spans[2 * index]
                    fh.seek(start)
                    yield entry, fh.read(spans[2 * index + 1] - start)
                else:
                    yield entry, jsonfmt.dumps(entry).encode("utf-8")
        finally:
            if fh is not None:
                fh.close()

    def _serialize_all(self) -> bytes:
        """Every file entry, one line each, serialized now (what Pi writes on flush/rewrite).

        The lines are not kept: serialization is deterministic, so `to_bytes` can redo it."""
        self._materialize_all()  # a rewrite must never write a skeleton
        self._raw_lines = [None] * len(self._file_entries)
        self._raw_spans = None
        self._raw_path = None
        lines = [jsonfmt.dumps(e) for e in self._file_entries]
        return ("\n".join(lines) + "\n").encode("utf-8") if lines else b""

    def _rewrite_file(self) -> None:
        if not self._persist or self._storage is None:
            return
        self._storage.rewrite(self._serialize_all())

    def _has_conversation(self) -> bool:
        return any(is_conversation(e) for e in self._file_entries)

    def _persist_entry(self, entry: dict[str, Any]) -> None:
        if not self._persist or self._storage is None:
            return
        if not self._flushed:
            if not self._has_conversation():
                return
            self._storage.create_exclusive(self._serialize_all())
            self._flushed = True
        else:
            line = jsonfmt.dumps(entry)
            if self._file_entries and self._file_entries[-1] is entry:
                self._raw_lines[-1] = line
            self._storage.append((line + "\n").encode("utf-8"))

    def _append_entry(self, entry: dict[str, Any]) -> None:
        """Push, index, advance the leaf, persist - and undo all three if the write fails.

        An entry that is not in the file must not become the parent of later entries (the file
        would then point at a missing parent), so a failed write leaves memory as it was and
        the error propagates (Pi 1.6.0).
        """
        previous_leaf = self._leaf_id
        self._file_entries.append(entry)
        self._raw_lines.append(None)
        self._by_id[entry["id"]] = entry
        self._leaf_id = entry["id"]
        try:
            self._persist_entry(entry)
        except BaseException:
            self._file_entries.pop()
            self._raw_lines.pop()
            self._by_id.pop(entry["id"], None)
            self._leaf_id = previous_leaf
            raise

    def _new_id(self) -> str:
        return generate_entry_id(self._by_id, self._rng)

    def _now(self) -> str:
        return jsonfmt.iso_from_ms(self._clock())

    def to_bytes(self) -> bytes:
        """The session as file content: original lines for loaded entries, `JSON.stringify`
        form for the rest. A version-3 file that was loaded without skipped lines comes back
        byte for byte."""
        return b"".join(line + b"\n" for _, line in self._iter_line_bytes())

    def iter_lines(self) -> Iterator[tuple[dict[str, Any], str]]:
        """(file entry, line text without newline) for every file entry, header first.

        A deferred entry comes as its full value, parsed from the line just read and not
        kept: an import streams a multi-GB session with one body in memory at a time. A
        lazy entry (default `open`) is adopted from the same line, so the file is read once."""
        deferred = self._deferred
        lazy = self._lazy
        for entry, raw in self._iter_line_bytes():
            position = lazy.get(id(entry)) if lazy else None
            if position is not None:
                entry = self._adopt_full(position, entry, _load_or_none(raw))
            elif deferred and id(entry) in deferred:
                entry = load_line(raw)
            yield entry, raw.decode("utf-8", "replace")

    # ------------------------------------------------------------------------------------------
    # Deferred bodies (read paths of a manager opened with `defer_bodies_over`)

    def is_deferred(self, entry: Any) -> bool:
        """True when `entry` is a skeleton whose full value is still in the file."""
        return bool(self._deferred) and id(entry) in self._deferred

    def deferred_count(self) -> int:
        """How many entries are held as skeletons."""
        return len(self._deferred)

    def full_entry(self, entry: dict[str, Any]) -> dict[str, Any]:
        """The full value of an entry from this manager: `entry` itself unless it is a
        skeleton, else the entry parsed again from its line in the file.

        `by_id`, `file_entries`, `get_entries` and `get_branch_skeleton` hand out skeletons for
        deferred entries (identity, tree and settings fields; no bodies): callers that read
        bodies pass entries through here. Recently loaded bodies are cached (8 MiB of line
        bytes, and always the latest), so repeated reads of the same entries return the
        same objects without a second parse.
        """
        if self._lazy:
            entry = self._upgrade(entry)
        if not self._deferred:
            return entry
        position = self._deferred.get(id(entry))
        if position is None:
            return entry
        cache = self._full_cache
        hit = cache.get(position)
        if hit is not None:
            cache.move_to_end(position)
            return hit[0]
        full, size = self._read_deferred(position)
        cache[position] = (full, size)
        self._full_cache_bytes += size
        # Over budget, older entries go; the newest stays even alone over it, so a caller
        # reading one big entry's fields one after another parses it once.
        while self._full_cache_bytes > _FULL_CACHE_BYTES and len(cache) > 1:
            _, (_, dropped) = cache.popitem(last=False)
            self._full_cache_bytes -= dropped
        return full

    def _read_deferred(self, position: int) -> tuple[dict[str, Any], int]:
        spans = self._raw_spans
        assert spans is not None and self._raw_path is not None
        start, end = spans[2 * position], spans[2 * position + 1]
        with builtins.open(self._raw_path, "rb") as fh:
            fh.seek(start)
            raw = fh.read(end - start)
        return load_line(raw), end - start

    def _materialize_path(
        self, path: builtins.list[dict[str, Any]]
    ) -> builtins.list[dict[str, Any]]:
        """`path` with full values from its latest compaction's first kept entry (or the
        compaction itself) to the leaf: the entries whose bodies the context, the projection
        and a compaction preparation read. Older entries count only through the fields a
        skeleton keeps (type, ids, settings)."""
        if not self._deferred and not self._lazy:
            return path
        start = 0
        for i in range(len(path) - 1, -1, -1):
            entry = path[i]
            if entry.get("type") == "compaction":
                start = i
                first_kept = entry.get("firstKeptEntryId", _MISSING)
                for j in range(i):
                    if path[j].get("id", _MISSING) == first_kept:
                        start = j
                        break
                break
        tail = path[start:]
        if self._lazy:
            tail = self._upgrade_many(tail)
        if self._deferred:
            full = self.full_entry
            tail = [full(e) for e in tail]
        return path[:start] + tail

    def _materialize_all(self) -> None:
        """Replace every skeleton with its full entry (before anything copies or rewrites
        entries wholesale); the manager is then an ordinary eager one."""
        self._upgrade_all()
        if not self._deferred:
            return
        entries = self._file_entries
        for position in sorted(self._deferred.values()):
            skeleton = entries[position]
            full, _ = self._read_deferred(position)
            entries[position] = full
            key = skeleton.get("id")
            if jsonfmt.hashable(key) and self._by_id.get(key) is skeleton:
                self._by_id[key] = full
        self._forget_deferred()

    def _forget_deferred(self) -> None:
        self._lazy = {}
        self._deferred = {}
        self._full_cache = OrderedDict()
        self._full_cache_bytes = 0

    # -- lazy skeletons (default `open` of a version-3 file) ----------------------------------

    def _upgrade(self, entry: dict[str, Any]) -> dict[str, Any]:
        """The full entry for `entry`, replacing its lazy skeleton everywhere it is held."""
        position = self._lazy.get(id(entry))
        if position is None:
            return entry
        self._upgrade_positions([position])
        return self._file_entries[position]

    def _upgrade_many(
        self, entries: builtins.list[dict[str, Any]]
    ) -> builtins.list[dict[str, Any]]:
        """`entries` with every lazy skeleton replaced by its full entry (one file read)."""
        lazy = self._lazy
        positions = [lazy.get(id(e)) for e in entries]
        wanted = [p for p in positions if p is not None]
        if not wanted:
            return entries
        self._upgrade_positions(sorted(wanted))
        file_entries = self._file_entries
        return [
            e if p is None else file_entries[p] for e, p in zip(entries, positions, strict=True)
        ]

    def _upgrade_all(self) -> None:
        """Every lazy skeleton replaced by its full entry: the cost of a full read, paid only
        by callers that take the entries wholesale (`file_entries`, `by_id`, the tree...)."""
        if self._lazy:
            self._upgrade_positions(sorted(self._lazy.values()))

    def _upgrade_positions(self, positions: builtins.list[int]) -> None:
        """Parse the lines at `positions` (ascending, all lazy) and adopt them, reading the
        file in a few sequential runs rather than once per line."""
        spans = self._raw_spans
        assert spans is not None and self._raw_path is not None
        entries = self._file_entries
        count = len(positions)
        with builtins.open(self._raw_path, "rb") as fh, gc_paused():
            i = 0
            while i < count:
                start = spans[2 * positions[i]]
                j = i
                while (
                    j + 1 < count
                    and spans[2 * positions[j + 1] + 1] - start <= _UPGRADE_RUN_BYTES
                    and spans[2 * positions[j + 1]] - spans[2 * positions[j] + 1] <= _UPGRADE_GAP
                ):
                    j += 1
                fh.seek(start)
                run = memoryview(fh.read(spans[2 * positions[j] + 1] - start))
                for k in range(i, j + 1):
                    position = positions[k]
                    line = run[spans[2 * position] - start : spans[2 * position + 1] - start]
                    self._adopt_full(position, entries[position], _load_or_none(line))
                i = j + 1

    def _adopt_full(self, position: int, skeleton: dict[str, Any], full: Any) -> dict[str, Any]:
        """Put `full` where the lazy `skeleton` at `position` was (entry list, id index).

        The line must still be the one that was read: the single writer only appends, so a
        different entry there means the file was rewritten by someone else. A skeleton that
        another reader adopted meanwhile keeps that reader's entry."""
        if self._lazy.pop(id(skeleton), None) is None:
            return self._file_entries[position]
        if type(full) is not dict or full.get("id", _MISSING) != skeleton.get("id", _MISSING):
            self._lazy[id(skeleton)] = position
            raise SessionError(f"Session file changed while open: {self._raw_path}")
        self._file_entries[position] = full
        key = skeleton.get("id")
        if self._by_id.get(key) is skeleton:
            self._by_id[key] = full
        return full

    # ------------------------------------------------------------------------------------------
    # Append methods (SPEC section 3.6)

    def append_message(self, message: Any) -> str:
        entry = message_entry(self._new_id(), self._leaf_id, self._now(), message)
        self._append_entry(entry)
        return entry["id"]

    def append_thinking_level_change(self, thinking_level: Any) -> str:
        entry = thinking_level_change_entry(
            self._new_id(), self._leaf_id, self._now(), thinking_level
        )
        self._append_entry(entry)
        return entry["id"]

    def append_model_change(self, provider: Any, model_id: Any) -> str:
        entry = model_change_entry(self._new_id(), self._leaf_id, self._now(), provider, model_id)
        self._append_entry(entry)
        return entry["id"]

    def append_usage(
        self, kind: Any, provider: Any, model: Any, usage: Any, note: Any = None
    ) -> dict[str, Any]:
        """Returns the entry itself (not its id), as Pi does."""
        entry = usage_entry(
            self._new_id(), self._leaf_id, self._now(), kind, provider, model, usage, note
        )
        self._append_entry(entry)
        return entry

    def append_compaction(
        self,
        summary: Any,
        first_kept_entry_id: Any,
        tokens_before: Any,
        details: Any = None,
        from_hook: Any = None,
        usage: Any = None,
    ) -> str:
        """Append a compaction with the system checkpoint of the current projection (6.12)."""
        from .messages import get_current_system_message

        timestamp = self._now()
        system = get_current_system_message(self.build_session_projection().messages)
        checkpoint = None
        if system is not None:
            checkpoint = dict(system)
            checkpoint["timestamp"] = _ms_value(jsonfmt.date_parse(timestamp))
        entry_id = self._new_id()
        entry = compaction_entry(
            entry_id,
            self._leaf_id,
            timestamp,
            summary,
            first_kept_entry_id if first_kept_entry_id is not None else entry_id,
            tokens_before,
            details,
            usage,
            from_hook,
            checkpoint,
        )
        self._append_entry(entry)
        return entry_id

    def append_custom_entry(self, custom_type: Any, data: Any = None) -> str:
        entry = custom_entry(custom_type, data, self._new_id(), self._leaf_id, self._now())
        self._append_entry(entry)
        return entry["id"]

    def append_session_info(self, name: Any) -> str:
        entry = session_info_entry(self._new_id(), self._leaf_id, self._now(), _sanitize_name(name))
        self._append_entry(entry)
        return entry["id"]

    def append_custom_message_entry(
        self, custom_type: Any, content: Any, display: Any, details: Any = None
    ) -> str:
        entry = custom_message_entry(
            custom_type, content, display, details, self._new_id(), self._leaf_id, self._now()
        )
        self._append_entry(entry)
        return entry["id"]

    def append_label_change(self, target_id: Any, label: Any = None) -> str:
        if not jsonfmt.hashable(target_id) or target_id not in self._by_id:
            raise SessionError(f"Entry {jsonfmt.js_string(target_id)} not found")
        entry = label_entry(self._new_id(), self._leaf_id, self._now(), target_id, label)
        self._append_entry(entry)
        if jsonfmt.truthy(label):
            self._labels[target_id] = label
            self._label_timestamps[target_id] = entry["timestamp"]
        else:
            self._labels.pop(target_id, None)
            self._label_timestamps.pop(target_id, None)
        return entry["id"]

    def append_context_edit(self, target_id: Any, replacement: Any) -> str:
        if replacement is not None and (
            type(replacement) is not dict
            or "content" not in replacement
            or not isinstance(replacement["content"], (str, list))
        ):
            raise SessionError(
                "Context edit replacement must be null or contain string/array content"
            )
        target = _lookup(self._by_id, target_id)
        if target is None:
            raise SessionError(f"Entry {jsonfmt.js_string(target_id)} not found")
        if not self._on_branch(target_id):
            raise SessionError(f"Entry {jsonfmt.js_string(target_id)} is not on the active branch")
        kind = target.get("type")
        message = target.get("message")
        role = message.get("role") if type(message) is dict else None
        editable = kind == "custom_message" or (
            kind == "message" and role in ("user", "assistant", "toolResult")
        )
        if not editable:
            raise SessionError(
                f"Entry {jsonfmt.js_string(target_id)} does not contribute editable model content"
            )
        target_role = role if kind == "message" else "custom"
        stored = replacement
        if (
            replacement is not None
            and target_role in ("assistant", "toolResult")
            and isinstance(replacement["content"], str)
        ):
            stored = {"content": [{"type": "text", "text": replacement["content"]}]}
        entry = context_edit_entry(self._new_id(), self._leaf_id, self._now(), target_id, stored)
        self._append_entry(entry)
        return entry["id"]

    def _on_branch(self, target_id: Any) -> bool:
        """Whether `target_id` is on the route root → leaf. A storage that loaded less than
        the route (the database's lean reads: the leaf and the targets only) answers when
        the loaded route stops short of a root; a file is always read whole."""
        branch = self.get_branch_skeleton()
        if any(e.get("id") == target_id for e in branch):
            return True
        ask = getattr(self._storage, "on_branch", None)
        if ask is None or not branch or branch[0].get("parentId") is None:
            return False
        return bool(ask(target_id, self._leaf_id))

    # ------------------------------------------------------------------------------------------
    # Queries (SPEC section 3.7)

    def get_leaf_id(self) -> Any:
        return self._leaf_id

    def get_leaf_entry(self) -> dict[str, Any] | None:
        if not jsonfmt.truthy(self._leaf_id):
            return None
        return self.get_entry(self._leaf_id)

    def get_entry(self, entry_id: Any) -> dict[str, Any] | None:
        entry = _lookup(self._by_id, entry_id)
        if entry is None:
            return None
        if self._lazy:
            entry = self._upgrade(entry)
        return entry if not self._deferred else self.full_entry(entry)

    def get_children(self, parent_id: Any) -> builtins.list[dict[str, Any]]:
        children = [e for e in self._by_id.values() if e.get("parentId", _MISSING) == parent_id]
        if self._lazy:
            children = self._upgrade_many(children)
        return [self.full_entry(e) for e in children] if self._deferred else children

    def get_label(self, entry_id: Any) -> Any:
        return _lookup(self._labels, entry_id)

    def get_branch(self, from_id: Any = None) -> builtins.list[dict[str, Any]]:
        """Root → `from_id` (default: the leaf). Stops at a missing parent or a repeated id.

        With deferred bodies, the entries from the latest compaction's kept range on are
        full and older ones may be skeletons (`get_branch_skeleton` gives all skeletons)."""
        path = self.get_branch_skeleton(from_id)
        if self._lazy:
            path = self._upgrade_many(path)
        return self._materialize_path(path) if self._deferred else path

    def get_branch_skeleton(self, from_id: Any = None) -> builtins.list[dict[str, Any]]:
        """`get_branch` without loading any deferred body (ids, types, tree fields)."""
        start = from_id if from_id is not None else self._leaf_id
        if not jsonfmt.truthy(start):
            return []
        path: builtins.list[dict[str, Any]] = []
        seen: set[Any] = set()
        by_id = self._by_id
        current = _lookup(by_id, start)
        while current is not None:
            key = current.get("id")
            if jsonfmt.hashable(key):
                if key in seen:
                    break  # a parentId cycle: Pi would loop forever
                seen.add(key)
            path.append(current)
            parent = current.get("parentId")
            if not jsonfmt.truthy(parent):
                break
            current = _lookup(by_id, parent)
        path.reverse()
        return path

    def get_header(self) -> dict[str, Any] | None:
        for entry in self._file_entries:
            if type(entry) is dict and entry.get("type") == "session":
                return entry
        return None

    def get_entries(self) -> builtins.list[dict[str, Any]]:
        self._upgrade_all()
        return [e for e in self._file_entries if type(e) is dict and e.get("type") != "session"]

    def get_entry_count(self) -> int:
        return len(self._by_id)

    def get_tree(self) -> builtins.list[TreeNode]:
        """Root nodes with children sorted by timestamp (SPEC section 3.9); no recursion.

        With deferred bodies, a deferred entry's node loads its full entry when `entry` is
        read (see `full_entry`), so renderers see exactly what an eager manager gives."""
        entries = self.get_entries()
        labels = self._labels
        label_ts = self._label_timestamps
        nodes: dict[Any, TreeNode] = {}
        unhashable: dict[int, TreeNode] = {}
        deferred = self._deferred
        for entry in entries:
            key = entry.get("id")
            if deferred and id(entry) in deferred:
                node: TreeNode = _DeferredTreeNode(
                    entry, [], _lookup(labels, key), _lookup(label_ts, key)
                )
                node.loader = self.full_entry  # type: ignore[attr-defined]
            else:
                node = TreeNode(entry, [], _lookup(labels, key), _lookup(label_ts, key))
            if jsonfmt.hashable(key):
                nodes[key] = node
            else:
                unhashable[id(entry)] = node
        roots: builtins.list[TreeNode] = []
        for entry in entries:
            key = entry.get("id")
            node = nodes[key] if jsonfmt.hashable(key) else unhashable[id(entry)]
            parent_id = entry.get("parentId")
            if parent_id is None or (parent_id == key and type(parent_id) is type(key)):
                roots.append(node)
                continue
            parent = _lookup(nodes, parent_id)
            if parent is None:
                roots.append(node)  # orphan
            else:
                parent.children.append(node)
        for node in [*nodes.values(), *unhashable.values()]:
            if len(node.children) > 1:
                node.children.sort(key=_child_sort_key)  # timestamps: skeletons keep them
        return roots

    def get_session_name(self) -> str | None:
        for entry in reversed(self._file_entries):
            if type(entry) is dict and entry.get("type") == "session_info":
                name = entry.get("name")
                if isinstance(name, str):
                    return jsonfmt.js_trim(name) or None
                return None
        return None

    def get_cwd(self) -> str:
        return self._cwd

    def get_session_dir(self) -> str:
        return self._session_dir

    def get_session_id(self) -> Any:
        return self._session_id

    def get_session_file(self) -> str | None:
        return self._session_file

    def get_storage(self) -> SessionStorage | None:
        return self._storage

    def is_persisted(self) -> bool:
        return self._persist

    def is_flushed(self) -> bool:
        return self._flushed

    def uses_default_session_dir(self) -> bool:
        from .listing import paths_equal

        return paths_equal(self._session_dir, default_session_dir_path(self._cwd))

    @property
    def by_id(self) -> dict[Any, dict[str, Any]]:
        """The id index (read-only by convention)."""
        self._upgrade_all()
        return self._by_id

    @property
    def file_entries(self) -> builtins.list[Any]:
        """Header and entries in file order (read-only by convention)."""
        self._upgrade_all()
        return self._file_entries

    def get_labels(self) -> dict[Any, Any]:
        """Current labels, target id → text, in label-map order."""
        return dict(self._labels)

    # -- context (SPEC section 4, delegated) -----------------------------------------------------

    def _context_entries(self) -> builtins.list[dict[str, Any]]:
        # The entry list only serves the fallback for a leaf missing from the index; skipping
        # it keeps a leaf switch proportional to the path, not to the file.
        leaf = self._leaf_id
        if leaf is None or (jsonfmt.truthy(leaf) and _lookup(self._by_id, leaf) is not None):
            return []
        return self.get_entries()

    def _context_path(self) -> builtins.list[dict[str, Any]]:
        path = _context.build_session_path(self._context_entries(), self._leaf_id, self._by_id)
        return self._materialize_path(path)

    def build_context_entries(self) -> builtins.list[dict[str, Any]]:
        if self._deferred or self._lazy:
            return _context.context_entries_from_path(self._context_path())
        return _context.build_context_entries(self._context_entries(), self._leaf_id, self._by_id)

    def build_session_projection(self) -> _context.SessionProjection:
        if self._deferred or self._lazy:
            return _context.projection_from_path(self._context_path())
        return _context.build_session_projection(
            self._context_entries(), self._leaf_id, self._by_id
        )

    def build_session_context(self) -> _context.SessionContext:
        if self._deferred or self._lazy:
            return _context.context_from_path(self._context_path())
        return _context.build_session_context(self._context_entries(), self._leaf_id, self._by_id)

    # ------------------------------------------------------------------------------------------
    # Navigation (SPEC section 3.8)

    def branch(self, entry_id: Any) -> None:
        if not jsonfmt.hashable(entry_id) or entry_id not in self._by_id:
            raise SessionError(f"Entry {jsonfmt.js_string(entry_id)} not found")
        self._leaf_id = entry_id

    def reset_leaf(self) -> None:
        self._leaf_id = None

    def branch_with_summary(
        self,
        branch_from_id: Any,
        summary: Any,
        details: Any = None,
        from_hook: Any = None,
        usage: Any = None,
    ) -> str:
        if branch_from_id is not None and (
            not jsonfmt.hashable(branch_from_id) or branch_from_id not in self._by_id
        ):
            raise SessionError(f"Entry {jsonfmt.js_string(branch_from_id)} not found")
        from_id = self._leaf_id if self._leaf_id is not None else "root"
        self._leaf_id = branch_from_id
        entry = branch_summary_entry(
            self._new_id(), branch_from_id, self._now(), from_id, summary, details, usage, from_hook
        )
        self._append_entry(entry)
        return entry["id"]

    def create_branched_session(self, leaf_id: Any) -> str | None:
        """Switch this manager to a new session holding only root → `leaf_id` (SPEC 7.1.1)."""
        from .branching import create_branched_session

        self._materialize_all()  # the new session copies whole entries
        return create_branched_session(self, leaf_id)


class _DeferredTreeNode(TreeNode):
    """A tree node of a deferred entry: `entry` loads the full entry on each read (cached
    by the manager), while the tree itself was built from the skeleton."""

    loader: Callable[[dict[str, Any]], dict[str, Any]]
    _skeleton: dict[str, Any]

    @property  # type: ignore[override]
    def entry(self) -> dict[str, Any]:
        return self.loader(self._skeleton)

    @entry.setter
    def entry(self, value: dict[str, Any]) -> None:
        self._skeleton = value


class _FileSeededRng:
    """`deterministic_rng(sha256(first `size` bytes of the file) + suffix)`, hashed on the
    first real draw: the same stream as hashing at load time as long as those bytes are
    unchanged (the single writer only appends). While `counting`, draws return zeros and
    only advance the position, for values that are thrown away."""

    def __init__(self, path: str, size: int, suffix: bytes) -> None:
        self.path = path
        self.size = size
        self.suffix = suffix
        self.counting = False
        self._skip = 0
        self._source: RandomSource | None = None

    def __call__(self, n: int) -> bytes:
        if self.counting:
            self._skip += n
            return bytes(n)
        if self._source is None:
            digest = hashlib.sha256()
            if self.size:
                with builtins.open(self.path, "rb") as fh:
                    left = self.size
                    while left > 0:
                        chunk = fh.read(min(left, 1 << 22))
                        if not chunk:
                            break
                        digest.update(chunk)
                        left -= len(chunk)
            self._source = deterministic_rng(digest.digest() + self.suffix)
            if self._skip:
                self._source(self._skip)
        return self._source(n)


def _load_or_none(raw: bytes | memoryview) -> Any:
    """`load_line`, or None for a line that no longer parses (the file was rewritten)."""
    try:
        return load_line(raw)
    except (ValueError, RecursionError):
        return None


def _read_storage(storage: SessionStorage) -> LoadedFile:
    if type(storage) is FileStorage and storage.path:
        return parse_file(storage.path, keep_raw=False)
    return parse_bytes(storage.read_bytes())


def _child_sort_key(node: TreeNode) -> tuple[int, float]:
    entry = node._skeleton if type(node) is _DeferredTreeNode else node.entry
    t = jsonfmt.date_parse(entry.get("timestamp"))
    if t != t:  # NaN: after every parseable timestamp, in file order
        return (1, 0.0)
    return (0, t)
