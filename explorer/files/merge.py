"""The first pass of a file that changed other than by growing (rewritten elsewhere, or a
copy with other lines): which of its entries the stored session lacks, read without holding
the stored lines, and the lines that add them, in file order. Used by the one-transaction
merge (``imports._merge_by_id``) and by the staged one (``growth``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from explorer.files.progress import _progress
from explorer.files.scan import Problem, _Line, _Scan, _scan_lines, changed_entry
from explorer.files.store import _existing_scan
from explorer.models import Entry, Session


@dataclass
class MergePlan:
    """What the second pass adds: the fresh ids and how many, and the scan state (the
    stored ids plus every problem found) the store continues."""

    scan: _Scan
    fresh: set[str]
    count: int


def _digest(raw: str) -> bytes:
    return hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def merge_plan(data: Any, consumed: int, session: Session, result: Any) -> MergePlan | None:
    """Compare the file with the stored session by entry id; None when there is nothing to
    add (``result.unchanged``) or a blocking problem (on ``result``): an id stored with other
    content is a conflict, and so is a file sharing no entry with the session. Reads only."""
    if session.source_version < 3:
        result.problems.append(
            Problem(
                0,
                "error",
                "legacy-changed",
                f"This session was imported from a version {session.source_version} file and "
                "stored migrated; the file has changed since (Pi rewrites such files with new "
                "entry ids when it opens them), so it cannot be merged. Delete the stored session "
                "and import the file again.",
            )
        )
        return None
    # Digests, not the stored lines: a 2 GB session is compared without holding it.
    stored = {
        entry_id: _digest(raw)
        for entry_id, raw in Entry.objects.filter(session=session)
        .values_list("entry_id", "raw")
        .iterator(chunk_size=200)
    }
    scan = _existing_scan(session)
    header_index = None
    fresh: set[str] = set()
    fresh_count = 0
    common = 0
    for item in _scan_lines(data, 0, consumed, 0, header_index, _Scan()):
        if item.kind != "entry":
            continue
        entry_id = item.value["id"]
        if entry_id in stored:
            common += 1
            if stored[entry_id] != _digest(item.raw):
                scan.add(changed_entry(item.index + 1, entry_id))
            continue
        fresh.add(entry_id)
        fresh_count += 1
    if stored and fresh and not common:
        scan.add(
            Problem(
                0,
                "error",
                "conflict",
                "The file shares no entry with the stored session of the same id; "
                "it is another history, not a newer copy. Nothing was imported.",
            )
        )
    if not fresh or scan.failed:
        if not scan.failed:
            result.unchanged = True
        result.problems.extend(scan.problems)
        return None
    return MergePlan(scan, fresh, fresh_count)


def merge_lines(
    data: Any, consumed: int, plan: MergePlan, base: int
) -> tuple[Iterator[_Line], Callable[[int], int]]:
    """The second pass: the fresh entries' lines in file order, and their positions from
    ``base`` on (the stored session's next position)."""
    progress = _progress.get()
    if progress is not None:
        progress.bytes = 0  # the second pass stores the new entries, in file order
    counter = iter(range(base, base + plan.count))
    lines = (
        item
        for item in _scan_lines(data, 0, consumed, 0, None, _Scan())
        if item.kind == "entry" and item.value["id"] in plan.fresh
    )
    return lines, lambda index: next(counter)
