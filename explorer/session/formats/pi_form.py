"""A Claude Code or Codex session written as a Pi version-3 file, for storing and showing.

The app stores and shows Pi sessions; a foreign session is stored as the Pi file this module
writes (its tree entries, in file order, under a header) while the original bytes are kept
apart and exported unchanged. The conversion is deterministic, so importing the same file
twice writes the same lines, and a grown file writes the old lines again plus new ones: the
Pi import's idempotent, incremental path applies as is.

Usage: Pi pages read spend from assistant messages. Claude Code usage already sits on one
assistant record per response. A Codex token count is attributed (X6) to the tip record,
which can be a tool output; here it moves to the nearest assistant message at or above it on
the route, so route sums stay those of X6 except when that ancestor is shared by branches.
A Claude Code compaction summary record becomes a `custom` entry (its text is the compaction
entry's `summary`), so Pi's projection of this file gives what the engine derives: summary,
preserved messages, what follows. A Claude Code user record answering several tool calls at
once is one entry per result (`part_ids`), since a Pi entry holds one message. A Codex
compaction's recorded replacement history is not re-created by Pi's projection (only its
summary is): the engine's `context` is the reference.
Costs are estimated from the price list and marked as such inside `usage.cost`
(`estimate`: the price list's name), since neither agent records them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from explorer.session import jsonfmt

from .common import ForeignSession, Record

__all__ = [
    "agent_notes",
    "agent_of_stored_id",
    "fork_branch",
    "part_ids",
    "pi_bytes",
    "pi_entries",
    "split_records",
    "stored_session_id",
]

_PREFIXES = ("claude-code:", "codex:")


def stored_session_id(session: ForeignSession) -> str:
    """The id a foreign session is stored under: its agent, its own id and, for a Claude Code
    sub-agent file (which repeats its parent's session id), the agent id."""
    own = session.session_id or "unknown"
    parent = session.links.get("parent") if session.format == "claude-code" else None
    if isinstance(parent, dict) and parent.get("agentId"):
        own = f"{own}:agent-{parent['agentId']}"
    return f"{session.format}:{own}"


def agent_of_stored_id(stored_id: str) -> str:
    """The agent of a stored session from its id ("pi" unless it has an agent's prefix)."""
    for prefix in _PREFIXES:
        if stored_id.startswith(prefix):
            return prefix[:-1]
    return "pi"


def agent_notes(agent: str) -> list[str]:
    """What a reader must know about a stored foreign session's figures (shown on its pages)."""
    if agent not in ("claude-code", "codex"):
        return []
    from explorer.session.pricing import price_list

    name = "Claude Code" if agent == "claude-code" else "Codex"
    notes = [
        f"Imported from a {name} file and stored as its Pi form; the export is the original file.",
        f"Costs are estimates priced with {price_list()}: {name} records no cost.",
    ]
    if agent == "claude-code":
        notes.append(
            "What the model saw is derived from the records (summary, preserved messages, what"
            " follows): Claude Code does not write the context it sends."
        )
    else:
        notes.append(
            "What the model saw is read from the file: after a compaction, the context Codex"
            " recorded (its replacement history; an encrypted summary is shown as such), then"
            " what follows."
        )
    return notes


def _usage_with_cost(provider: str, model: str, usage: dict[str, int]) -> dict[str, Any]:
    from explorer.session.pricing import estimate_cost, price_list

    out: dict[str, Any] = {
        key: usage.get(key, 0) for key in ("input", "output", "cacheRead", "cacheWrite")
    }
    out["totalTokens"] = sum(out.values())
    estimate = estimate_cost(provider, model, out)
    if not estimate.unpriced and out["totalTokens"]:
        cost = estimate.to_json()
        cost["estimate"] = price_list()
        out["cost"] = cost
    return out


def _assistant_owner(session: ForeignSession, record: Record) -> Record | None:
    node: Record | None = record
    while node is not None:
        message = node.entry.get("message") if node.entry else None
        if isinstance(message, dict) and message.get("role") == "assistant":
            return node
        node = session.get(node.parent) if node.parent is not None else None
    return None


def pi_entries(
    session: ForeignSession, *, split: bool | Mapping[str, str] = True
) -> list[dict[str, Any]]:
    """Header plus one Pi entry per tree entry, in file order (copies: the session's own
    entries are not changed), except that a Claude Code user record holding several tool
    results is several entries (:func:`_part_entries`), unless ``split`` is False (the form
    stored before, kept for sessions stored so: :func:`explorer.agent_import`). ``split``
    may also be :func:`split_records`'s answer, when the caller has it already."""
    header = {
        "type": "session",
        "version": 3,
        "id": stored_session_id(session),
        "timestamp": session.created or "",
        "cwd": session.cwd or "",
    }
    moved: dict[str, dict[str, int]] = {}
    if session.format == "codex":
        for record in session.entries():
            if record.usage is None:
                continue
            owner = _assistant_owner(session, record)
            if owner is None:
                continue
            total = moved.setdefault(owner.id, dict.fromkeys(record.usage, 0))
            for key, count in record.usage.items():
                total[key] += count
    summaries = set(getattr(session, "summary_of", {}).values())
    first_part = split if not isinstance(split, bool) else split_records(session) if split else {}
    out: list[dict[str, Any]] = [header]
    for record in session.entries():
        assert record.entry is not None
        if record.id in first_part:
            out.extend(_part_entries(record))
            continue
        entry = dict(record.entry)
        if entry.get("type") == "compaction" and entry.get("firstKeptEntryId") in first_part:
            # Kept from the record's first part, so Pi's projection keeps every part.
            entry["firstKeptEntryId"] = first_part[entry["firstKeptEntryId"]]
        if record.id in summaries:
            # The compaction entry carries this text; as a message too it would reach Pi's
            # projection twice (once as the compaction summary).
            entry = {
                "type": "custom",
                "customType": "claude-code/compact-summary",
                "data": {"message": entry.get("message")},
                "id": entry["id"],
                "parentId": entry["parentId"],
                "timestamp": entry["timestamp"],
            }
        message = entry.get("message")
        if isinstance(message, dict) and message.get("role") == "assistant":
            message = dict(message)
            usage = moved.get(record.id) if session.format == "codex" else record.usage
            if usage is not None:
                message["usage"] = _usage_with_cost(
                    str(message.get("provider") or ""), str(message.get("model") or ""), usage
                )
            entry["message"] = message
        out.append(entry)
    return out


def part_ids(record: Record) -> list[str]:
    """The ids of the Pi entries a Claude Code record is stored as, in block order: one per
    message it puts in the model's context. The last keeps the record's uuid, the earlier
    ones are ``<uuid>:1``, ``<uuid>:2``, ... (deterministic, so a re-import writes the same
    lines). The last keeps the uuid because everything else names the record by it: its
    children's ``parentUuid``, a leaf and its route, a compaction's logical parent, the
    reading rules' findings; none of those needs rewriting."""
    n = max(len(record.messages), 1)
    return [f"{record.id}:{k}" for k in range(1, n)] + [record.id]


def split_records(session: ForeignSession) -> dict[str, str]:
    """The records stored as several entries: record uuid -> its first part's id."""
    summaries = set(getattr(session, "summary_of", {}).values())
    return {r.id: part_ids(r)[0] for r in session.entries() if _splits(session, r, summaries)}


def _splits(session: ForeignSession, record: Record, summaries: set[str]) -> bool:
    """A Claude Code user record answering several tool calls at once (or a tool result with
    a text typed beside it), stored as one entry per message."""
    return (
        session.format == "claude-code"
        and len(record.messages) > 1
        and record.record_type == "user"
        and record.id not in summaries
        and record.entry is not None
        and record.entry.get("type") == "message"
    )


def _part_entries(record: Record) -> list[dict[str, Any]]:
    """One Pi message entry per message of ``record``, chained in block order from the
    record's parent (ids: :func:`part_ids`).

    Why entries and not one message: the engine reads such a record as several messages
    (one ``toolResult`` per ``tool_result`` block, each with its ``toolCallId``), while a Pi
    entry holds one message. Stored as one ``user`` message of the results' texts, every
    page that pairs a result with its call by id (entry panel, Transcript, Live, Integrity,
    HTML export) lost the pairs and the projection counted the results as user text. As
    entries of Pi's own shape (Pi writes each result of a parallel call as its own entry,
    chained), every page and Pi's projection read them as they read a Pi session: one
    source of truth, no page taught a second shape."""
    assert record.entry is not None
    meta = record.value.get("isMeta") is True
    parent = record.entry.get("parentId")
    out = []
    for entry_id, message in zip(part_ids(record), record.messages, strict=True):
        if meta and message.get("role") == "user":
            message = dict(message, isMeta=True)
        out.append(
            {
                "type": "message",
                "id": entry_id,
                "parentId": parent,
                "timestamp": record.entry.get("timestamp"),
                "message": message,
            }
        )
        parent = entry_id
    return out


def pi_bytes(session: ForeignSession, *, split: bool | Mapping[str, str] = True) -> bytes:
    """The Pi file: one line per entry, serialized as Pi would (JSON.stringify). ``split``
    False writes a multi-result Claude Code record as the one merged entry sessions stored
    before the split were written with (:func:`pi_entries`)."""
    lines = [jsonfmt.dumps(entry) for entry in pi_entries(session, split=split)]
    return ("\n".join(lines) + "\n").encode("utf-8", errors="surrogatepass")


def _same_item(a: Record, b: Record) -> bool:
    """Two records carry the same item: type and payload, never timestamps (a fork's replayed
    copies may carry the fork's own)."""
    return a.value.get("type") == b.value.get("type") and a.value.get("payload") == b.value.get(
        "payload"
    )


def fork_branch(parent: ForeignSession, fork: ForeignSession) -> list[dict[str, Any]] | None:
    """A Codex fork's own entries as a branch of its parent's tree, or None when none of its
    records is found in the parent.

    The fork replays its parent's history before its own turns. Its conversation records are
    matched, in file order, against the parent's: each one against the first later parent
    record carrying the same item that descends from the last match (so records the replay
    left out, reasoning or tool calls, may lie between two matches on the parent's route), as
    long as the fork's records form a chain. The matched prefix is the parent's (stored once);
    every other fork entry is returned as its Pi entry, with usage as `pi_entries` gives it
    (the prefix's token counts are the parent's and are dropped with it), named
    ``<fork thread id>:<its id>`` so that it cannot collide with the parent's ``L<line>`` ids,
    and an entry whose parent is in the prefix hangs from the matching parent record."""
    mine = [r for r in fork.records if r.kind == "conversation" and r.entry is not None]
    theirs = [r for r in parent.records if r.kind == "conversation" and r.entry is not None]
    parent_of = {r.id: r.entry.get("parentId") for r in theirs if r.entry is not None}

    def descends(node: str | None, ancestor: str | None) -> bool:
        seen: set[str] = set()
        while node is not None and node not in seen:
            if node == ancestor:
                return True
            seen.add(node)
            node = parent_of.get(node)
        return ancestor is None

    matched: dict[str, str] = {}
    last_theirs: str | None = None
    last_mine: str | None = None
    start = 0
    for record in mine:
        assert record.entry is not None
        if record.entry.get("parentId") != last_mine:
            break
        found = next(
            (
                k
                for k in range(start, len(theirs))
                if _same_item(theirs[k], record)
                and theirs[k].id != last_theirs
                and descends(theirs[k].id, last_theirs)
            ),
            None,
        )
        if found is None:
            break
        matched[record.id] = theirs[found].id
        last_theirs, last_mine, start = theirs[found].id, record.id, found + 1
    if not matched:
        return None
    prefix = f"{fork.session_id}:"

    def named(entry_id: Any) -> Any:
        if not isinstance(entry_id, str):
            return entry_id
        return matched.get(entry_id) or prefix + entry_id

    out = []
    for entry in pi_entries(fork)[1:]:
        if entry["id"] in matched:
            continue
        entry = dict(entry)
        for key in ("id", "parentId", "firstKeptEntryId"):
            if key in entry:
                entry[key] = named(entry[key])
        out.append(entry)
    return out
