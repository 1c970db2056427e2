"""Integrity: what in a session's tree cannot be trusted, and where.

The tree checks are the engine's own (``explorer.session.diagnostics.diagnose_tree``, the
same functions ``pisession validate`` runs on a file), grouped here into the panel's
sections; the page adds one check the engine does not make (tool results whose call is not
in the assistant message above them), which needs the raw lines and runs on request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from explorer.session import jsonfmt
from explorer.session.diagnostics import diagnose_tree

LIMIT = 200

SECTIONS = (
    (
        "dangling",
        "Dangling parents",
        "Entries whose parent id names no entry; they become extra roots.",
        {"dangling-parent"},
    ),
    (
        "cycles",
        "Cycles",
        "Parent links that loop; a path walk stops at the repetition.",
        {"parent-cycle"},
    ),
    (
        "compactions",
        "Compactions keeping an off-path entry",
        "firstKeptEntryId is not an ancestor: nothing before the compaction is kept.",
        {"first-kept-not-on-path"},
    ),
    (
        "edits",
        "Edits that cannot apply",
        "The edit has no effect (or hides a non-editable entry).",
        {
            "edit-unknown-target",
            "edit-off-path",
            "edit-not-editable",
            "edit-without-replacement",
            "edit-malformed-replacement",
        },
    ),
    (
        "labels",
        "Labels on missing entries",
        "The label names no entry of this session.",
        {"label-unknown-target"},
    ),
)


def tree_sections(entries: list[dict[str, Any]], numbers: list[int]) -> list[dict[str, Any]]:
    """The panel's sections: each the engine's findings of its codes (at most ``LIMIT``)."""
    problems = diagnose_tree(entries, numbers)
    out = []
    for key, title, help_text, codes in SECTIONS:
        items = [
            {"id": p.entry_id, "line": p.line, "code": p.code, "detail": p.message}
            for p in problems
            if p.code in codes
        ][:LIMIT]
        out.append({"key": key, "title": title, "help": help_text, "items": items})
    return out


_CALL_ID = re.compile(r'"toolCallId":"((?:[^"\\]|\\.)*)"')
_CALL_BLOCK = re.compile(r'"type":"toolCall","id":"((?:[^"\\]|\\.)*)"')


def _call_ids(raw: str) -> set[str]:
    found = set(_CALL_BLOCK.findall(raw))
    if found or '"toolCall"' not in raw:
        return found
    try:  # unusual key order: parse properly
        m = jsonfmt.loads(raw).get("message") or {}
    except (ValueError, AttributeError):
        return set()
    content = m.get("content") if isinstance(m, dict) else None
    return {
        jsonfmt.dumps(b.get("id"))[1:-1]
        for b in content or []
        if isinstance(content, list) and isinstance(b, dict) and b.get("type") == "toolCall"
    }


def unmatched_tool_results(
    rows: Sequence[tuple[str, str | None, str, int]],
    load_raws: Callable[[Iterable[str]], dict[str, str]],
) -> list[dict[str, Any]]:
    """Tool results whose call id appears in no assistant message above them (within the
    turn). ``rows``: (id, parent id, role, line) of every entry in file order; ``load_raws``
    returns raw lines by id (called in chunks). Ids are matched on the JSON text, where both
    sides are spelled the same way."""
    parent = {r[0]: r[1] for r in rows}
    role = {r[0]: r[2] for r in rows}
    line = {r[0]: r[3] for r in rows}
    out: list[dict[str, Any]] = []
    results = [r[0] for r in rows if r[2] == "toolResult"]
    for k in range(0, len(results), 2000):
        chunk = results[k : k + 2000]
        owner: dict[str, str | None] = {}
        for rid in chunk:
            cur, steps, found = parent.get(rid), 0, None
            while cur and cur in parent and steps < 64:
                if role.get(cur) == "assistant":
                    found = cur
                    break
                cur, steps = parent[cur], steps + 1
            owner[rid] = found
        raws = load_raws(chunk + [a for a in owner.values() if a])
        calls: dict[str, set[str]] = {}
        for rid in chunk:
            m = _CALL_ID.search(raws.get(rid, ""))
            cid = m.group(1) if m else None
            a = owner[rid]
            if a is not None and a not in calls:
                calls[a] = _call_ids(raws.get(a, ""))
            if (a is None or cid not in calls[a]) and len(out) < LIMIT:
                out.append(
                    {"id": rid, "line": line[rid], "detail": f"no assistant call {cid} above it"}
                )
    return out
