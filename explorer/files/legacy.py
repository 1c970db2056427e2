"""Legacy imports: a session stored before the importer kept each line's original text,
grown by the lines a file adds to it.
"""

from __future__ import annotations

import hashlib

from explorer.files.findings import header_findings
from explorer.files.scan import (
    Problem,
    _full_report,
    _header_fields,
    _Scan,
    _scan_lines,
    _version_of,
)
from explorer.files.store import (
    _existing_scan,
    _finish_session,
    _resolve_pending,
    _save_problems,
    _store_lines,
    _store_scanned,
    _update_warning_count,
    _Writer,
)
from explorer.models import Entry, Session
from explorer.session import jsonfmt


def _import_legacy(data, header, existing, result, user, source_path, rng):
    """Version 1/2 files are stored in their migrated version-3 form, as Pi rewrites them
    on open; the original bytes are kept on the session."""
    from explorer.session import entries as entry_mod
    from explorer.session import loading

    if existing is not None:
        original = bytes(existing.source_original or b"")
        if data == original:
            result.session = existing
            result.unchanged = True
            return
        if data.startswith(original) and original.endswith(b"\n"):
            _legacy_more(data, original, existing, result, rng)
            return
        result.session = existing
        result.problems.append(
            Problem(
                0,
                "error",
                "legacy-changed",
                "This legacy-version session was imported before and the file has changed "
                "other than by growing; it cannot be merged.",
            )
        )
        return
    loaded = loading.parse_bytes(data)
    scan_problems = _full_report(data, len(data), [])
    if not any(p.code == "legacy-version" for p in scan_problems):
        scan_problems.append(
            Problem(
                0,
                "warning",
                "legacy-version",
                f"Legacy version {_version_of(header)} file; stored migrated to version 3 "
                "(original bytes kept).",
            )
        )
    result.problems.extend(scan_problems)
    if not result.ok:
        return
    entries = loaded.entries
    if rng is None:
        # The ids `pisession` derives when it migrates the same bytes in memory (seeded by
        # their hash): an id copied from a page works on the CLI with the original file.
        from explorer.session.ids import deterministic_rng

        rng = deterministic_rng(hashlib.sha256(data).digest())
    entry_mod.migrate_session_entries(entries, rng)
    lines = [jsonfmt.dumps(e) for e in entries]
    migrated = ("\n".join(lines) + "\n").encode("utf-8", errors="surrogatepass")
    session = Session.objects.create(
        session_id=header["id"],
        version=3,
        source_version=_version_of(header),
        header_raw=lines[0],
        header_position=0,
        source_path=source_path,
        imported_by=user,
        source_original=data,
        **_header_fields(entries[0]),
    )
    scan = _Scan()
    writer = _Writer(session, None)
    writer.findings.extend(header_findings(session, writer.secrets_key))
    items = _scan_lines(migrated, 0, len(migrated), 0, 0, scan)
    stats = _store_lines(items, session, scan, writer, position_of=lambda index: index)
    writer.flush()
    _resolve_pending(session, scan)
    result.problems.extend(p for p in scan.problems if p.severity == "error")
    if not result.ok:
        return
    _finish_session(session, scan, writer)
    session.name = stats["name"] or ""
    session.source_size = len(data)
    session.source_sha256 = hashlib.sha256(data).hexdigest()
    session.save()
    _save_problems(session, result.problems)
    _update_warning_count(session)
    result.session = session
    result.created = True
    result.added = stats["entries"]
    result.new_entries = writer.created(result.added)


def _legacy_more(data, original, session: Session, result, rng):
    """A legacy file that grew: migrate only the new lines, continuing the parent chain."""
    from explorer.session import entries as entry_mod
    from explorer.session import loading

    result.session = session
    tail = data[len(original) :]
    loaded = loading.parse_bytes(b'{"type":"session","id":"continuation"}\n' + tail)
    new = loaded.entries[1:]
    if not new:
        session.source_original = data
        session.source_size = len(data)
        session.save(update_fields=["source_original", "source_size"])
        result.unchanged = True
        return
    fake = [{"type": "session", "version": 1, "id": session.session_id}, *new]
    entry_mod.migrate_session_entries(fake, rng)
    previous = (
        Entry.objects.filter(session=session, author__isnull=True)
        .order_by("-position")
        .values_list("entry_id", flat=True)
        .first()
    )
    if new and previous is not None:
        new[0]["parentId"] = previous
    text = "\n".join(jsonfmt.dumps(e) for e in new) + "\n"
    scan = _existing_scan(session)
    base = session.next_position
    encoded = text.encode("utf-8", errors="surrogatepass")
    items = _scan_lines(encoded, 0, len(encoded), 0, None, scan)
    stored = _store_scanned(session, scan, items, base, result)
    if stored is None:
        return
    stats, writer = stored
    session.source_original = data
    session.source_size = len(data)
    session.source_sha256 = hashlib.sha256(data).hexdigest()
    session.save()
    result.added = stats["entries"]
    result.new_entries = writer.created(result.added)
