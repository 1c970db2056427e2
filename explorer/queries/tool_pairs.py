"""A tool result's call, read from stored rows (the rule: :mod:`explorer.analysis.tool_pairs`).

The walk reads one index row (role, parent) per step and parses only the assistant
messages it meets, masked as every page shows them; never a result's content (the step
from a second result to the first of a parallel pair passes a line of maybe megabytes) and
never the whole route.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from explorer.analysis.tool_pairs import MAX_STEPS, call_blocks, find_call
from explorer.models import Entry, Session
from explorer.queries.entries import load_entries
from explorer.session.describe import entry_message


@dataclass(frozen=True)
class CallAbove:
    """The call a result answers: the entry holding it and its (masked) block."""

    entry_id: str
    block: dict[str, Any]


class StoredWalk:
    """(entry id, role) of an entry and then its ancestors, nearest first, read from
    stored index rows one at a time as the walk needs them (a pairing usually stops after
    a step or two), and replayed for the next reader: the results of one page that walk
    above it share each row read. Ends at a root, a dangling parent, a loop, or after
    :data:`MAX_STEPS` rows."""

    def __init__(self, session: Session, entry_id: str | None) -> None:
        self._session = session
        self._next = entry_id
        self._read: list[tuple[str, str]] = []
        self._seen: set[str] = set()

    def _step(self) -> tuple[str, str] | None:
        cur = self._next
        if not cur or cur in self._seen or len(self._read) > MAX_STEPS:
            return None
        rows = list(
            Entry.objects.filter(session=self._session, entry_id=cur)
            .order_by()
            .values_list("role", "parent_id")[:1]
        )
        if not rows:
            self._next = None
            return None
        self._seen.add(cur)
        self._next = rows[0][1]
        self._read.append((cur, rows[0][0] or ""))
        return self._read[-1]

    def __iter__(self) -> Iterator[tuple[str, str]]:
        k = 0
        while True:
            if k < len(self._read):
                yield self._read[k]
            elif self._step() is None:
                return
            else:
                yield self._read[k]
            k += 1


def stored_ancestors(session: Session, entry_id: str | None) -> StoredWalk:
    """``entry_id`` and its ancestors from stored rows, lazily (:class:`StoredWalk`)."""
    return StoredWalk(session, entry_id)


def call_of(
    session: Session,
    call_id: Any,
    ancestors: Iterable[tuple[str, str]],
    loaded: Mapping[str, dict] | None = None,
) -> CallAbove | None:
    """The call ``call_id`` names among ``ancestors`` ((id, role), nearest first: the
    result's parent upward), by :func:`~explorer.analysis.tool_pairs.find_call`. An
    assistant's message comes from ``loaded`` (a page's entries, parsed and masked) when
    there, else from its stored row, masked. None when the id is no string or names no
    call of the result's turn."""
    if not isinstance(call_id, str):
        return None
    blocks: dict[str, dict[str, dict[str, Any]]] = {}

    def calls_of(entry_id: str) -> dict[str, dict[str, Any]]:
        if entry_id not in blocks:
            data = (loaded or {}).get(entry_id)
            if data is None:
                data = load_entries(session, [entry_id]).get(entry_id) or {}
            blocks[entry_id] = call_blocks(entry_message(data))
        return blocks[entry_id]

    found = find_call(call_id, ancestors, calls_of)
    return CallAbove(found, blocks[found][call_id]) if found is not None else None


def result_call(session: Session, parent_id: str | None, call_id: Any) -> CallAbove | None:
    """The call a stored result (whose parent is ``parent_id``) answers, walking stored rows
    from its parent up: the entry panel's "Result of"."""
    return call_of(session, call_id, stored_ancestors(session, parent_id))
