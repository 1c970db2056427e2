"""The batch writer: the rows of a scanned file written in bounded batches, the lines
whose parent arrives later resolved, and a stored session's counters, default leaf and
problems brought up to date. A stored session's rows read back as the scan state
(:func:`_existing_scan`) let a grown file add only its new lines, new-style or legacy.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from explorer import conf, line_text_store, route_store, survival_store, survival_writer
from explorer.files.findings import findings_for
from explorer.files.index import search_row, store_search_rows
from explorer.files.progress import _progress
from explorer.files.scan import (
    MAX_ID_LENGTH,
    Problem,
    _Line,
    _long_id,
    _Scan,
    _sha256,
    changed_entry,
    entry_fields,
    session_name_of,
)
from explorer.models import Entry, ExtraLine, ImportProblem, Leaf, SecretFinding, Session
from explorer.session import exactsum, jsonfmt

# Characters of stored lines plus their search text held before a batch is written: it bounds
# the importer's memory (with the few lines in flight), not its speed (fewer rows per
# statement cost nothing measurable above a few MB).
_BATCH_BYTES = 4 * 1024 * 1024
_BATCH_ROWS = 2000


_ENTRY_COLUMNS = (
    "session_id",
    "entry_id",
    "parent_id",
    "type",
    "timestamp",
    "position",
    "line_no",
    "depth",
    "raw",
    "raw_bytes",
    "role",
    "custom_type",
    "target_id",
    "size",
    "child_count",
    "author_id",
    "cost",
)


class _Writer:
    """Buffers rows and inserts them in batches inside the import transaction.

    Plain ``executemany`` on the driver's cursor: model instances and the debug cursor (which
    formats every statement with its parameters, several MB per line here) would cost more
    than the insert itself.
    """

    def __init__(
        self,
        session: Session,
        author,
        *,
        commit: bool = False,
        also_reads: int | None = None,
        segments: bool = True,
    ) -> None:
        self.session = session
        self.author_id = getattr(author, "pk", None)
        # Each batch its own transaction (a new session's import, ``_import_new_batched``):
        # the write lock is held for one batch at a time, never for the whole file.
        self.commit = commit
        self.rows: list[list] = []
        # Child counts are counted while streaming: a parent still in the unflushed batch is
        # bumped in place, others (branch points far back, earlier imports) at the end.
        self.pending: dict[str, list] = {}
        self.late: dict[str, int] = {}
        self.extras: list[ExtraLine] = []
        self.findings: list[SecretFinding] = []
        # The search index is filled from the entries parsed here, in the same pass: reading
        # every stored line back and parsing it again doubled the import's time.
        self.texts: list[tuple] = []
        # Compactions and branch summaries written, whose survival checks are stored once
        # the import's entries and counters are (``explorer.survival_store``).
        self.checked: list[tuple[str, str]] = []
        self.check_rows: list[Any] | None = None  # their rows, when computed beforehand
        # The row texts of multi-MB lines, written after each batch (``line_text_store``).
        self.line_texts = line_text_store.TextWriter(session.pk)
        self.secrets_key = conf.secrets_key()
        self.buffered = 0
        self.first_position: int | None = None
        self.total = 0
        # Route figures of each entry, computed as the lines stream (``explorer.route_store``).
        # ``also_reads``, ``segments``: a grown file's staged import (``files.imports``) reads
        # parents in the stored session too, and places its entries in the tree's segments
        # once they are moved there.
        self.figures = route_store.FigureWriter(
            session.pk,
            flush_entries=self.flush,
            unflushed=self._unflushed,
            also_reads=also_reads,
            segments=segments,
        )
        mark = "?" if connection.vendor == "sqlite" else "%s"
        table = connection.ops.quote_name(Entry._meta.db_table)
        columns = ", ".join(connection.ops.quote_name(c) for c in _ENTRY_COLUMNS)
        self.sql = (
            f"INSERT INTO {table} ({columns}) VALUES ({', '.join([mark] * len(_ENTRY_COLUMNS))})"
        )

    def entry(
        self,
        *,
        entry_id: str,
        position: int,
        depth: int,
        raw: str,
        raw_bytes: bytes | None,
        size: int,
        fields: dict[str, Any],
        value: Any = None,
    ) -> None:
        if self.first_position is None:
            self.first_position = position
        if self.rows and self.buffered + 2 * len(raw) > _BATCH_BYTES:
            # A line that would overflow the batch goes into the next one: a multi-MB line
            # is then scanned, held and written next to a few rows, not next to a full batch.
            self.flush()
        escaped = "\\u" in raw
        if escaped:
            # A \\u escape may decode to a lone surrogate or NUL, which the driver refuses.
            entry_id = jsonfmt.visible(entry_id)
            fields = {k: jsonfmt.visible(v) if type(v) is str else v for k, v in fields.items()}
        parent = fields["parent_id"]
        if parent is not None:
            parent_row = self.pending.get(parent)
            if parent_row is not None:
                parent_row[14] += 1
            else:
                self.late[parent] = self.late.get(parent, 0) + 1
        row = [
            self.session.pk,
            entry_id,
            parent,
            fields["type"],
            fields["timestamp"],
            position,
            position + 1,
            depth,
            raw,
            raw_bytes,
            fields["role"],
            fields["custom_type"],
            fields["target_id"],
            size,
            0,
            self.author_id,
            fields["cost"],
        ]
        self.rows.append(row)
        self.pending[entry_id] = row
        if fields["type"] in survival_store.CHECKED_TYPES:
            self.checked.append((entry_id, fields["type"]))
        self.figures.add(entry_id, parent, position, value if type(value) is dict else {})
        if value is not None:
            found = findings_for(self.session, entry_id, position + 1, value, self.secrets_key)
            self.findings.extend(found)
            self.line_texts.add(entry_id, value, size, secret=bool(found))
            row_text = search_row(
                self.session.pk, entry_id, position, fields, value, escaped=escaped
            )
            if row_text is not None:
                self.texts.append(row_text)
                self.buffered += len(row_text[5])  # the text is a second copy of the line
        self.buffered += len(raw)
        self.total += size
        if self.buffered >= _BATCH_BYTES or len(self.rows) >= _BATCH_ROWS:
            self.flush()

    def _unflushed(self, entry_id: str) -> str | None:
        """The raw line of an entry of the batch not inserted yet (for route figures)."""
        row = self.pending.get(entry_id)
        return row[8] if row is not None else None

    def extra(self, row: ExtraLine) -> None:
        self.extras.append(row)

    def flush(self) -> None:
        if not self.commit:
            self._flush()
            return
        with transaction.atomic():
            self._flush()
            Session.every.filter(pk=self.session.pk).update(import_heartbeat=timezone.now())

    def _flush(self) -> None:
        if self.rows:
            connection.ensure_connection()
            cursor = connection.connection.cursor()
            try:
                cursor.executemany(self.sql, self.rows)
            finally:
                cursor.close()
            self.rows = []
            self.figures.write()
            self.line_texts.write()
            self.pending = {}
            self.buffered = 0
        if self.extras:
            ExtraLine.objects.bulk_create(self.extras)
            self.extras = []
        if self.findings:
            SecretFinding.objects.bulk_create(self.findings)
            self.findings = []
        if self.texts:
            store_search_rows(self.texts)
            self.texts = []

    def finish_child_counts(self) -> None:
        """Add the children whose parent row was already written."""
        if not self.late:
            return
        mark = "?" if connection.vendor == "sqlite" else "%s"
        table = connection.ops.quote_name(Entry._meta.db_table)
        sql = (
            f"UPDATE {table} SET child_count = child_count + {mark} "
            f"WHERE session_id = {mark} AND entry_id = {mark}"
        )
        connection.ensure_connection()
        cursor = connection.connection.cursor()
        try:
            cursor.executemany(sql, [(n, self.session.pk, pid) for pid, n in self.late.items()])
        finally:
            cursor.close()
        self.late = {}

    def created(self, added: int) -> list[Entry] | None:
        """The new rows for signal listeners (None when there are too many to hand over)."""
        if self.first_position is None or added > 1000 or self.total > 8 * 1024 * 1024:
            return None
        return list(
            Entry.objects.filter(session=self.session, position__gte=self.first_position).order_by(
                "position"
            )
        )


def _store_lines(
    lines: Iterable[_Line],
    session: Session,
    scan: _Scan,
    writer: _Writer,
    position_of,
) -> dict[str, Any]:
    """Turn classified lines into rows; returns counters for the session."""
    stats = {"entries": 0, "compactions": 0, "context_edits": 0, "name": None}
    progress = _progress.get()
    for item in lines:
        position = position_of(item.index)
        if item.kind != "entry":
            if not scan.failed:
                writer.extra(
                    ExtraLine(
                        session=session,
                        position=position,
                        line_no=position + 1,
                        kind=item.kind,
                        raw=item.original or b"",
                    )
                )
            continue
        value = item.value
        entry_id = value["id"]
        fields = entry_fields(value)
        line_no = item.index + 1
        if "\\u" in item.raw and _unstorable(entry_id, line_no, scan):
            continue
        for key, what in ((entry_id, "entry id"), (fields["parent_id"], "parentId")):
            if key is not None and len(key) > MAX_ID_LENGTH:
                scan.add(_long_id(line_no, what, key))
        target = value.get("targetId")
        if isinstance(target, str) and len(target) > MAX_ID_LENGTH:
            scan.add(_long_id(line_no, "targetId", target))
        if entry_id in scan.existing:
            # Already stored (e.g. appended live while Pi wrote the file): the same line is
            # fine, a different one would rewrite history.
            stored = (
                Entry.objects.filter(session_id=scan.session_pk, entry_id=entry_id)
                .values_list("raw", flat=True)
                .first()
            )
            if stored != item.raw:
                scan.add(changed_entry(line_no, entry_id))
            continue
        if entry_id in scan.ids:
            scan.add(
                Problem(
                    line_no,
                    "error",
                    "duplicate-id",
                    f"Duplicate entry id {entry_id} (first on line {scan.first_line[entry_id]}); "
                    "Pi would keep only the later one in its index.",
                    entry_id,
                )
            )
            continue
        parent = fields["parent_id"]
        scan.ids[entry_id] = parent
        scan.first_line[entry_id] = line_no
        if parent is None:
            depth = 0
        elif parent in scan.depth and parent not in scan.pending_depth:
            depth = scan.depth[parent] + 1
        else:
            # The parent comes later in the file (or never): settled after the pass.
            depth = 0
            scan.pending_depth.add(entry_id)
        scan.depth[entry_id] = depth
        stats["entries"] += 1
        if progress is not None:
            progress.entries += 1
        if fields["type"] == "compaction":
            stats["compactions"] += 1
        elif fields["type"] == "context_edit":
            stats["context_edits"] += 1
        elif fields["type"] == "session_info":
            stats["name"] = session_name_of(value)
        if scan.failed:
            continue
        writer.entry(
            entry_id=entry_id,
            position=position,
            depth=depth,
            raw=item.raw,
            raw_bytes=item.raw_bytes,
            size=item.nbytes,
            fields=fields,
            value=value,
        )
    return stats


def _unstorable(entry_id: str, line_no: int, scan: _Scan) -> bool:
    """Columns hold the visible form of an id (lone surrogates and NUL as U+FFFD, see
    ``explorer.dbtext``); two ids Pi tells apart that look the same there cannot both be
    stored, so the second is refused with its line."""
    shown = jsonfmt.visible(entry_id)
    first = scan.visible_ids.setdefault(shown, entry_id)
    if first == entry_id:
        return False
    scan.add(
        Problem(
            line_no,
            "error",
            "duplicate-id",
            f"Entry id {shown} differs from the id on line {scan.first_line.get(first, 0)} "
            "only in invalid Unicode (lone surrogates or NUL), which cannot be stored apart.",
            shown,
        )
    )
    return True


def _resolve_pending(session: Session, scan: _Scan) -> None:
    """Depths of entries whose parent came later in the file, and parent problems."""
    # In file order, so the same file always gives the same report (a set's order varies).
    for entry_id in sorted(scan.pending_depth, key=lambda e: scan.first_line.get(e, 0)):
        chain: list[str] = []
        seen: set[str] = set()
        current: str | None = entry_id
        depth_base = None
        while current is not None:
            if current in seen:
                members = " → ".join(chain[chain.index(current) :] + [current])
                scan.add(
                    Problem(
                        scan.first_line.get(entry_id, 0),
                        "error",
                        "parent-cycle",
                        f"Parent cycle: {members}; Pi would loop forever.",
                        entry_id,
                    )
                )
                depth_base = 0
                break
            seen.add(current)
            chain.append(current)
            parent = scan.ids.get(current)
            if parent is None:
                depth_base = 0
                break
            if parent not in scan.ids:
                scan.add(
                    Problem(
                        scan.first_line.get(current, 0),
                        "warning",
                        "dangling-parent",
                        f"Entry {current} names a parent {parent} that does not exist; "
                        "its path stops there.",
                        current,
                    )
                )
                depth_base = 0
                break
            if parent not in scan.pending_depth and parent in scan.depth:
                depth_base = scan.depth[parent] + 1
                break
            current = parent
        if scan.failed:
            return
        # chain[0] is entry_id; the last element has depth depth_base.
        for offset, member in enumerate(reversed(chain)):
            depth = (depth_base or 0) + offset
            scan.depth[member] = depth
            scan.pending_depth.discard(member)
            if depth:
                scan.fixed[member] = depth


def _finish_session(session: Session, scan: _Scan, writer: _Writer) -> None:
    writer.finish_child_counts()
    writer.figures.finish()
    for entry_id, depth in scan.fixed.items():
        Entry.objects.filter(session=session, entry_id=entry_id).update(depth=depth)
    refresh_counters(session, scan)
    if writer.check_rows is not None:  # computed before the transaction (``_import_new``)
        survival_writer.store_checks(session, writer.check_rows)
    else:
        # A new session's entries were all scanned just now, their findings stored: an
        # entry without one is read for the checks without the masking pass.
        survival_writer.write_checks(session, writer.checked, scanned=not scan.existing)
    writer.checked = []
    writer.check_rows = None


def refresh_counters(session: Session, scan: _Scan | None = None) -> None:
    """Recount what the list page shows. After an import the scan knows every id and parent,
    which spares a pass over the table."""
    entries = Entry.objects.filter(session=session)
    if scan is not None:
        ids = scan.ids
        session.entry_count = len(ids)
        session.leaf_count = len(ids) - len({p for p in ids.values() if p is not None and p in ids})
    else:
        session.entry_count = entries.count()
        session.leaf_count = entries.filter(child_count=0).count()
    session.cost_partials = exactsum.dumps(
        exactsum.added(
            [], entries.exclude(cost=0).values_list("cost", flat=True).iterator(chunk_size=5000)
        )
    )
    session.compaction_count = entries.filter(type="compaction").count()
    session.context_edit_count = entries.filter(type="context_edit").count()
    last = entries.order_by("-position").values_list("position", flat=True).first()
    extra_last = ExtraLine.objects.filter(session=session).aggregate(m=Max("position"))["m"]
    highest = max(x for x in (last, extra_last, session.header_position) if x is not None)
    session.next_position = highest + 1
    session.warning_count = ImportProblem.objects.filter(session=session).count()
    session.save()
    sync_default_leaf(session)


def _update_warning_count(session: Session) -> None:
    session.warning_count = ImportProblem.objects.filter(session=session).count()
    session.save(update_fields=["warning_count"])


def sync_default_leaf(session: Session) -> Leaf:
    """Point the file's own cursor ("default") at its last entry."""
    last = (
        Entry.objects.filter(session=session)
        .order_by("-position")
        .values_list("entry_id", flat=True)
        .first()
    )
    leaf, _ = Leaf.objects.update_or_create(
        session=session, name=Leaf.DEFAULT, defaults={"entry_id": last, "user": None}
    )
    return leaf


def _save_problems(session: Session, problems: list[Problem]) -> None:
    ImportProblem.objects.bulk_create(
        [
            ImportProblem(
                session=session,
                line=p.line,
                severity=p.severity,
                code=p.code[:64],
                message=p.message,
                entry_id=(p.entry_id or "")[:200],
            )
            for p in problems
            if p.severity == "warning"
        ]
    )


def finish_file(
    session: Session,
    data: Any,
    consumed: int,
    problems: list[Problem],
    *,
    source_path: str = "",
    missing_final_newline: bool,
) -> None:
    """Record that ``consumed`` bytes of the file are stored (size, digest, final newline,
    path) and save the session with its new warnings: the last step of every growth."""
    session.missing_final_newline = missing_final_newline
    session.source_size = consumed
    session.source_sha256 = _sha256(data, consumed)
    if source_path:
        session.source_path = source_path
    session.save()
    _save_problems(session, problems)
    _update_warning_count(session)


def _existing_scan(session: Session) -> _Scan:
    scan = _Scan(session_pk=session.pk)
    for entry_id, parent, depth, line_no in Entry.objects.filter(session=session).values_list(
        "entry_id", "parent_id", "depth", "line_no"
    ):
        scan.ids[entry_id] = parent
        scan.depth[entry_id] = depth
        scan.first_line[entry_id] = line_no
    scan.existing = set(scan.ids)
    return scan


def _store_scanned(
    session: Session, scan: Any, lines: Any, base: int, result: Any
) -> tuple[dict[str, Any], _Writer] | None:
    """Store scanned lines after position `base` of an existing session.

    Returns None, with the problems recorded on `result` and the session left unfinished,
    when the scan found a blocking problem (the caller's transaction then rolls back).
    """
    writer = _Writer(session, None)
    stats = _store_lines(lines, session, scan, writer, position_of=lambda index: base + index)
    writer.flush()
    _resolve_pending(session, scan)
    result.problems.extend(scan.problems)
    if not result.ok:
        return None
    _finish_session(session, scan, writer)
    if stats["name"] is not None:
        session.name = stats["name"]
    return stats, writer
