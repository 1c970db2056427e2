"""The engine's ``SessionStorage`` over the database.

``SessionManager.from_storage(DatabaseStorage(...))`` makes a stored session behave like a
file to the engine: every append the engine writes (context edits, labels, compactions, turn
messages) goes through the same engine code as for a file on disk and lands here as rows.
Runs inside the caller's transaction; ``explorer.services`` holds the single-writer lock.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from explorer import conf
from explorer.files import entry_fields, export_bytes, findings_for, session_name_of
from explorer.models import Entry, Leaf, SecretFinding, Session
from explorer.queries import path_bytes
from explorer.session import jsonfmt


class DatabaseStorage:
    """``SessionStorage`` for a stored session, so ``SessionManager.from_storage`` appends
    through the same engine code as a file. Appends insert rows; rewrites are refused
    (stored sessions are append-only).

    ``path_only``: ``read_bytes`` returns only the header, the path to ``view_leaf`` and the
    entries named in ``extra_ids`` instead of the whole session (the caller then moves the
    manager's leaf to ``view_leaf``).
    """

    def __init__(
        self,
        session: Session,
        *,
        author=None,
        view_leaf: str | None | Any = None,
        path_only: bool = False,
        extra_ids: Iterable[str] = (),
    ) -> None:
        self.session = session
        self.extra_ids = list(extra_ids)
        self.author = author
        self.view_leaf = view_leaf
        self.path_only = path_only
        self.path: str | None = session.source_path or None
        self.appended: list[Entry] = []

    def exists(self) -> bool:
        return True

    def read_bytes(self) -> bytes:
        if self.path_only:
            return path_bytes(self.session, self.view_leaf, self.extra_ids)
        return export_bytes(self.session)

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
]


class IdCollision(Exception):
    """A generated id exists elsewhere in the session (the manager saw only one path)."""


def append_lines(session: Session, data: bytes, *, author=None) -> list[Entry]:
    """Insert complete lines written by the engine at the end of the session. Runs inside
    the caller's transaction (``services`` holds the single-writer lock)."""
    if not data.endswith(b"\n"):
        raise ValueError("append expects complete lines")
    created: list[Entry] = []
    # The counters and the next position come from the row as it is now (the caller holds
    # its lock), never from a copy loaded before: another process may have appended since.
    session.refresh_from_db(fields=COUNTER_FIELDS)
    position = session.next_position
    findings: list[SecretFinding] = []
    key = conf.secrets_key()
    for piece in data[:-1].split(b"\n"):
        line = piece.decode("utf-8", errors="surrogatepass")
        value = jsonfmt.loads(line)
        if not isinstance(value, dict) or not isinstance(value.get("id"), str):
            raise ValueError("the engine appended a line that is not an entry")
        entry_id = value["id"]
        if Entry.objects.filter(session=session, entry_id=entry_id).exists():
            raise IdCollision(entry_id)
        fields = entry_fields(value)
        parent = fields["parent_id"]
        depth = 0
        if parent is not None:
            parent_row = Entry.objects.filter(session=session, entry_id=parent).first()
            if parent_row is not None:
                depth = parent_row.depth + 1
                if parent_row.child_count == 0:
                    session.leaf_count -= 1
                Entry.objects.filter(pk=parent_row.pk).update(
                    child_count=parent_row.child_count + 1
                )
        row = Entry.objects.create(
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
        findings.extend(findings_for(session, entry_id, position + 1, value, key))
        position += 1
        session.entry_count += 1
        session.leaf_count += 1
        if fields["type"] == "compaction":
            session.compaction_count += 1
        elif fields["type"] == "context_edit":
            session.context_edit_count += 1
        elif fields["type"] == "session_info":
            session.name = session_name_of(value) or ""
    if findings:
        SecretFinding.objects.bulk_create(findings)
    session.next_position = position
    session.missing_final_newline = False
    session.save(update_fields=[*COUNTER_FIELDS, "modified"])
    if created:
        Leaf.objects.update_or_create(
            session=session,
            name=Leaf.DEFAULT,
            defaults={"entry_id": created[-1].entry_id, "user": None},
        )
    return created
