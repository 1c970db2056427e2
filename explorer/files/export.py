"""Files out: a stored session's bytes (byte-identical to what was imported plus what was
appended since, optionally with secrets masked), and the files derived from it (one branch,
a fork).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from explorer.models import Entry, ExtraLine, Session
from explorer.queries import path_pks
from explorer.secrets import redact_bytes
from explorer.session import jsonfmt

# ---------------------------------------------------------------------------------------------
# Export


def iter_export(session: Session) -> Iterator[bytes]:
    """The session's file, chunk by chunk (a 200 MB session is never joined in memory)."""
    extras = list(
        ExtraLine.objects.filter(session=session)
        .order_by("position")
        .values_list("position", "raw")
    )
    header = (session.header_position, session.header_raw.encode("utf-8", errors="surrogatepass"))
    pending = sorted([header, *((p, bytes(r)) for p, r in extras)])
    rows = (
        Entry.objects.filter(session=session)
        .order_by("position")
        .values_list("position", "raw", "raw_bytes")
        .iterator(chunk_size=500)
    )
    out: list[bytes] = []
    size = 0
    first = True

    def emit(line: bytes) -> None:
        nonlocal first, size
        if not first:
            out.append(b"\n")
        first = False
        out.append(line)
        size += len(line) + 1

    i = 0
    for position, raw, raw_bytes in rows:
        while i < len(pending) and pending[i][0] < position:
            emit(pending[i][1])
            i += 1
        emit(
            bytes(raw_bytes)
            if raw_bytes is not None
            else raw.encode("utf-8", errors="surrogatepass")
        )
        if size >= 1024 * 1024:
            yield b"".join(out)
            out = []
            size = 0
    while i < len(pending):
        emit(pending[i][1])
        i += 1
    if not session.missing_final_newline:
        out.append(b"\n")
    if out:
        yield b"".join(out)


def export_bytes(session: Session) -> bytes:
    return b"".join(iter_export(session))


def redact_chunks(chunks: Iterable[bytes], *, allow: Iterable[str], key: bytes) -> Iterator[bytes]:
    """A session file's chunks with every secret masked, line by line (the download for
    viewers and editors). Still a valid session: only masked lines change; ``allow`` holds
    the fingerprints left in clear (false positives)."""
    allowed = frozenset(allow)
    rest = b""
    for chunk in chunks:
        data = rest + chunk
        cut = data.rfind(b"\n") + 1
        if cut:
            yield redact_bytes(data[:cut], allow=allowed, key=key)
        rest = data[cut:]
    if rest:
        yield redact_bytes(rest, allow=allowed, key=key)


def export_filename(session: Session) -> str:
    from explorer.session.paths import file_timestamp

    stamp = file_timestamp(session.header_timestamp) if session.header_timestamp else "session"
    safe_id = "".join(c for c in session.session_id if c.isalnum() or c in "-_.")[:80]
    return f"{stamp}_{safe_id}.jsonl"


# ---------------------------------------------------------------------------------------------
# Derived sessions


def _source_label(session: Session) -> str:
    return session.source_path or f"db:{session.session_id}"


def _lines_bytes(entries: Iterable[Any]) -> bytes:
    return "".join(jsonfmt.dumps(e) + "\n" for e in entries).encode("utf-8", errors="surrogatepass")


def branch_bytes(session: Session, leaf_id: str, *, clock=None, rng=None) -> bytes:
    """A new session file holding only root → ``leaf_id``, built by the engine's
    ``create_branched_session`` (labels on the route re-created). Only the path and the
    session's label entries are read, which is all that operation looks at."""
    from explorer.session.errors import SessionError
    from explorer.session.manager import SessionManager

    pks = path_pks(session, leaf_id)
    if not pks:
        raise SessionError(f"Entry {leaf_id} not found")
    rows = (
        (
            Entry.objects.filter(session=session, pk__in=pks)
            | Entry.objects.filter(session=session, type="label")
        )
        .order_by("position")
        .values_list("raw", flat=True)
    )
    entries = [session.header(), *(jsonfmt.loads(raw) for raw in rows.iterator(chunk_size=500))]
    manager = SessionManager.in_memory(session.cwd or None, None, entries, clock=clock, rng=rng)
    manager.create_branched_session(leaf_id)
    header = dict(manager.get_header())
    with_parent: dict[str, Any] = {}
    for key, value in header.items():
        with_parent[key] = value
        if key == "cwd":
            with_parent["parentSession"] = _source_label(session)
    if "parentSession" not in with_parent:
        with_parent["parentSession"] = _source_label(session)
    return _lines_bytes([with_parent, *manager.get_entries()])


def fork_bytes(session: Session, *, cwd: str | None = None, clock=None, rng=None) -> bytes:
    """A new session file with every entry of this one (all branches) under a new header for
    ``cwd``: the ``fork_from`` semantics (entries re-serialized, no migration)."""
    from explorer.session import ids

    now = ids.now_ms() if clock is None else clock()
    header = {
        "type": "session",
        "version": 3,
        "id": ids.uuid7(now, rng),
        "timestamp": jsonfmt.iso_from_ms(now),
        "cwd": cwd if cwd is not None else session.cwd,
        "parentSession": _source_label(session),
    }
    no_id = dict(
        ExtraLine.objects.filter(session=session, kind="no_id").values_list("position", "raw")
    )
    chunks = [jsonfmt.dumps(header).encode() + b"\n"]
    rows = (
        Entry.objects.filter(session=session)
        .order_by("position")
        .values_list("position", "raw")
        .iterator(chunk_size=500)
    )
    pending = sorted(no_id.items())
    i = 0
    for position, raw in rows:
        while i < len(pending) and pending[i][0] < position:
            chunks.append(_lines_bytes([jsonfmt.loads(bytes(pending[i][1]))]))
            i += 1
        chunks.append(_lines_bytes([jsonfmt.loads(raw)]))
    for _pos, raw in pending[i:]:
        chunks.append(_lines_bytes([jsonfmt.loads(bytes(raw))]))
    return b"".join(chunks)
