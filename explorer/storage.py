"""The engine's ``SessionStorage`` over the database.

``SessionManager.from_storage(DatabaseStorage(...))`` makes a stored session behave like a
file to the engine: every append the engine writes (context edits, labels, compactions, turn
messages) goes through the same engine code as for a file on disk and lands here as rows.
Runs inside the caller's transaction; ``explorer.services`` holds the single-writer lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from explorer import conf, line_text_store, route_store, survival_writer
from explorer.files.export import export_bytes
from explorer.files.findings import findings_for
from explorer.files.scan import entry_fields, session_name_of
from explorer.models import Entry, Leaf, SecretFinding, Session
from explorer.queries.entries import entries_bytes, path_bytes
from explorer.route_check import on_route
from explorer.session import exactsum, jsonfmt


class DatabaseStorage:
    """``SessionStorage`` for a stored session, so ``SessionManager.from_storage`` appends
    through the same engine code as a file. Appends insert rows; rewrites are refused
    (stored sessions are append-only).

    ``path_only``: ``read_bytes`` returns only the header, the path to ``view_leaf`` and the
    entries named in ``extra_ids`` instead of the whole session (the caller then moves the
    manager's leaf to ``view_leaf``).

    ``lean``: not even the path, only the header, ``view_leaf`` and ``extra_ids``: what a
    label, a rename or a context edit needs, so their cost does not grow with the route
    (reading and parsing a 24,000-entry route was most of a label's 3 s). The engine asks
    :meth:`on_branch` whether a target is on the route instead of walking loaded entries.
    """

    def __init__(
        self,
        session: Session,
        *,
        author=None,
        view_leaf: str | None | Any = None,
        path_only: bool = False,
        lean: bool = False,
        extra_ids: Iterable[str] = (),
    ) -> None:
        self.session = session
        self.extra_ids = list(extra_ids)
        self.author = author
        self.view_leaf = view_leaf
        self.path_only = path_only
        self.lean = lean
        self.path: str | None = session.source_path or None
        self.appended: list[Entry] = []

    def exists(self) -> bool:
        return True

    def read_bytes(self) -> bytes:
        if self.lean:
            leaf = [self.view_leaf] if isinstance(self.view_leaf, str) else []
            return entries_bytes(self.session, [*leaf, *self.extra_ids])
        if self.path_only:
            return path_bytes(self.session, self.view_leaf, self.extra_ids)
        return export_bytes(self.session)

    def on_branch(self, entry_id: str, leaf_id: str | None) -> bool:
        """Whether ``entry_id`` is on the route root → ``leaf_id`` (the engine's question
        when it loaded the leaf alone): never the route's lines, and a cost that does not
        grow with the route once this process keeps it (:mod:`explorer.route_check`)."""
        return on_route(self.session, entry_id, leaf_id)

    def create_exclusive(self, data: bytes) -> None:
        raise FileExistsError(f"Session {self.session.session_id} already exists")

    def rewrite(self, data: bytes) -> None:
        raise PermissionError("Stored sessions are append-only; a rewrite is not allowed")

    def append(self, data: bytes) -> None:
        self.appended.extend(append_lines(self.session, data, author=self.author))


COUNTER_FIELDS = [
    "next_position",
    "missing_final_newline",
    "entry_count",
    "leaf_count",
    "compaction_count",
    "context_edit_count",
    "name",
    "cost_partials",
]


class IdCollision(Exception):
    """A generated id exists elsewhere in the session (the manager saw only one path)."""


def append_lines(session: Session, data: bytes, *, author=None) -> list[Entry]:
    """Insert complete lines written by the engine at the end of the session. Runs inside
    the caller's transaction (``services`` holds the single-writer lock).

    Set-based: one query for ids already stored, one for the parents stored before, one
    insert of all rows and one update per parent whose child count changes, whatever the
    number of lines (the follower hands over hundreds at a time on a busy session; a query
    per line made it fall behind a writer at 200 entries/s)."""
    if not data.endswith(b"\n"):
        raise ValueError("append expects complete lines")
    # The counters and the next position come from the row as it is now (the caller holds
    # its lock), never from a copy loaded before: another process may have appended since.
    session.refresh_from_db(fields=COUNTER_FIELDS)
    parsed: list[tuple[bytes, str, dict]] = []
    for piece in data[:-1].split(b"\n"):
        line = piece.decode("utf-8", errors="surrogatepass")
        value = jsonfmt.loads(line)
        if not isinstance(value, dict) or not isinstance(value.get("id"), str):
            raise ValueError("the engine appended a line that is not an entry")
        parsed.append((piece, line, value))
    ids = [value["id"] for _piece, _line, value in parsed]
    stored = set(
        Entry.objects.filter(session=session, entry_id__in=set(ids))
        .order_by()  # by the id index; sorting by position would walk the whole session
        .values_list("entry_id", flat=True)
    )
    seen: set[str] = set()
    for entry_id in ids:  # the first id in file order that is taken (or repeated) is named
        if entry_id in stored or entry_id in seen:
            raise IdCollision(entry_id)
        seen.add(entry_id)
    fields_of = [entry_fields(value) for _piece, _line, value in parsed]
    outside = {f["parent_id"] for f in fields_of if f["parent_id"] is not None} - seen
    # Parents stored before this batch: their depth and child count, never their bodies.
    parents = {
        eid: [pk, depth, children, children]
        for pk, eid, depth, children in Entry.objects.filter(session=session, entry_id__in=outside)
        .order_by()
        .values_list("pk", "entry_id", "depth", "child_count")
    }
    created: list[Entry] = []
    by_id: dict[str, Entry] = {}
    findings: list[SecretFinding] = []
    texts = line_text_store.TextWriter(session.pk)  # what rows show of multi-MB lines
    key = conf.secrets_key()
    position = session.next_position
    for (piece, line, value), fields in zip(parsed, fields_of, strict=True):
        entry_id = value["id"]
        parent = fields["parent_id"]
        depth = 0
        if parent is not None:
            if parent in by_id:  # appended earlier in this batch
                row_before = by_id[parent]
                depth = row_before.depth + 1
                if row_before.child_count == 0:
                    session.leaf_count -= 1
                row_before.child_count += 1
            elif parent in parents:
                known = parents[parent]
                depth = known[1] + 1
                if known[3] == 0:
                    session.leaf_count -= 1
                known[3] += 1
        row = Entry(
            session=session,
            entry_id=entry_id,
            position=position,
            line_no=position + 1,
            depth=depth,
            raw=line,
            size=len(piece),
            author=author,
            **fields,
        )
        created.append(row)
        by_id[entry_id] = row
        found = findings_for(session, entry_id, position + 1, value, key)
        findings.extend(found)
        texts.add(entry_id, value, row.size, secret=bool(found))
        position += 1
        session.entry_count += 1
        session.leaf_count += 1
        if fields["type"] == "compaction":
            session.compaction_count += 1
        elif fields["type"] == "context_edit":
            session.context_edit_count += 1
        elif fields["type"] == "session_info":
            session.name = session_name_of(value) or ""
    Entry.objects.bulk_create(created)
    known = exactsum.loads(session.cost_partials)
    if known is not None:
        session.cost_partials = exactsum.dumps(
            exactsum.added(known, [row.cost for row in created if row.cost])
        )
    route_store.write_appended(session.pk, created, [value for _p, _l, value in parsed])
    texts.write({row.entry_id: row.pk for row in created if row.pk is not None})
    for pk, _depth, before, after in parents.values():
        if after != before:
            Entry.objects.filter(pk=pk).update(child_count=after)
    if findings:
        SecretFinding.objects.bulk_create(findings)
    session.next_position = position
    session.missing_final_newline = False
    session.save(update_fields=[*COUNTER_FIELDS, "modified"])
    survival_writer.write_checks(session, [(row.entry_id, row.type) for row in created])
    if created:
        Leaf.objects.update_or_create(
            session=session,
            name=Leaf.DEFAULT,
            defaults={"entry_id": created[-1].entry_id, "user": None},
        )
    return created
