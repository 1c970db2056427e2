"""Branched sessions and forks (SPEC section 7).

Both copy history into a *new* session and never touch the source's existing bytes.
`create_branched_session` keeps one route (root → leaf), drops label entries from it, re-chains
the parents past them and re-creates the labels at the end; `fork_from` copies every entry of
a file, all branches, under a new header for another working directory. Both re-serialize the
copied entries, as Pi does.
"""

from __future__ import annotations

import contextlib
import os
from typing import TYPE_CHECKING, Any

from . import jsonfmt
from .entries import is_conversation, label_entry, session_header
from .errors import SessionError
from .ids import Clock, RandomSource, generate_entry_id, now_ms, uuid7, validate_session_id
from .loading import parse_bytes
from .paths import expand_path, file_timestamp, get_default_session_dir, resolve_path

if TYPE_CHECKING:
    from .manager import SessionManager

__all__ = ["create_branched_session", "fork_from"]

_MISSING: Any = object()


def _js_strict_equal(a: Any, b: Any) -> bool:
    if a is _MISSING or b is _MISSING:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a is b
    return (
        type(a) is type(b)
        and a == b
        or (isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b)
    )


def create_branched_session(manager: SessionManager, leaf_id: Any) -> str | None:

    m = manager
    previous_file = m._session_file
    path = m.get_branch(leaf_id)
    if not path:
        raise SessionError(f"Entry {jsonfmt.js_string(leaf_id)} not found")

    kept: list[dict[str, Any]] = []
    replacement: dict[Any, Any] = {}
    pending: list[Any] = []
    parent: Any = None
    for entry in path:
        if entry.get("type") == "label":
            pending.append(entry.get("id"))
            continue
        for label_id in pending:
            with contextlib.suppress(TypeError):
                replacement[label_id] = entry.get("id")
        pending.clear()
        copy = {**entry, "parentId": parent}
        if entry.get("type") == "compaction":
            first_kept = entry.get("firstKeptEntryId", _MISSING)
            own = entry.get("id", _MISSING)
            if _js_strict_equal(first_kept, own):
                value = own
            else:
                try:
                    value = replacement.get(first_kept, first_kept)
                except TypeError:
                    value = first_kept
                if value is None and first_kept is not None:
                    value = first_kept
            if value is _MISSING:
                copy.pop("firstKeptEntryId", None)
            else:
                copy["firstKeptEntryId"] = value
        kept.append(copy)
        parent = entry.get("id")

    ms = m._clock()
    new_id = uuid7(ms, m._rng)
    timestamp = jsonfmt.iso_from_ms(ms)
    header = session_header(new_id, timestamp, m._cwd, previous_file if m._persist else None)

    kept_ids: set[Any] = set()
    for entry in kept:
        with contextlib.suppress(TypeError):
            kept_ids.add(entry.get("id"))
    labels: list[dict[str, Any]] = []
    label_parent = kept[-1].get("id") if kept and jsonfmt.truthy(kept[-1].get("id")) else None
    for target_id, text in list(m._labels.items()):
        if target_id not in kept_ids:
            continue
        new_label = label_entry(
            generate_entry_id(kept_ids, m._rng),
            label_parent,
            m._label_timestamps.get(target_id),
            target_id,
            text,
        )
        kept_ids.add(new_label["id"])
        labels.append(new_label)
        label_parent = new_label["id"]

    m._file_entries = [header, *kept, *labels]
    m._raw_lines = [None] * len(m._file_entries)
    m._raw_spans = None
    m._raw_path = None
    m._session_id = new_id
    m.loaded_file = None
    if m._persist:
        new_file = m._join_dir(f"{file_timestamp(timestamp)}_{new_id}.jsonl")
        m._session_file = new_file
        m._storage = m._storage_factory(new_file) if m._storage_factory else None
        m._build_index()
        if any(is_conversation(e) for e in m._file_entries):
            m._rewrite_file()
            m._flushed = True
        else:
            m._flushed = False
        return new_file
    m._build_index()
    return None


def fork_from(
    cls: type[SessionManager],
    source_path: str,
    target_cwd: str,
    session_dir: str | None = None,
    options: dict[str, Any] | None = None,
    *,
    clock: Clock | None = None,
    rng: RandomSource | None = None,
) -> SessionManager:
    resolved_source = resolve_path(source_path)
    resolved_cwd = resolve_path(target_cwd)
    entries: list[Any] = []
    if os.path.exists(resolved_source):
        with open(resolved_source, "rb") as fh:
            loaded = parse_bytes(fh.read())
        if loaded.valid and loaded.missing_final_newline:
            with open(resolved_source, "ab") as fh:
                fh.write(b"\n")
        entries = loaded.entries
    if not entries:
        raise SessionError(
            f"Cannot fork: source session file is empty or invalid: {resolved_source}"
        )
    if not any(type(e) is dict and e.get("type") == "session" for e in entries):
        raise SessionError(f"Cannot fork: source session has no header: {resolved_source}")
    directory = expand_path(session_dir) if session_dir else get_default_session_dir(resolved_cwd)
    os.makedirs(directory, exist_ok=True)
    options = options or {}
    if options.get("id") is not None:
        validate_session_id(options["id"])
    ms = (clock or now_ms)()
    new_id = options["id"] if options.get("id") is not None else uuid7(ms, rng)
    timestamp = jsonfmt.iso_from_ms(ms)
    new_file = os.path.normpath(
        os.path.join(directory, f"{file_timestamp(timestamp)}_{new_id}.jsonl")
    )
    header = session_header(new_id, timestamp, resolved_cwd, resolved_source)
    with open(new_file, "xb") as fh:
        fh.write((jsonfmt.dumps(header) + "\n").encode("utf-8"))
    body = "".join(
        jsonfmt.dumps(e) + "\n"
        for e in entries
        if not (type(e) is dict and e.get("type") == "session")
    )
    if body:
        with open(new_file, "ab") as fh:
            fh.write(body.encode("utf-8"))
    return cls(resolved_cwd, directory, new_file, True, clock=clock, rng=rng)
