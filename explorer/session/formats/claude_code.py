"""Claude Code transcripts (`~/.claude/projects/<encoded cwd>/<session>.jsonl`) as engine trees.

The reading rules are R1-R9 of `shared/formats/claude-code.md` section 8 (the acceptance tests
check exactly those facts): chain records are lines with a uuid (first copy wins), only
`user`/`assistant`/`system` records are tree entries, `attachment`/`progress`/unknown chain
records link but are never shown, a `compact_boundary` root continues from its logical parent
(or the first preserved message that is not its own descendant), and usage is counted once per
API response (`message.id`), because Claude Code writes one record per content block and repeats
the response's usage on each. docs/formats.md describes the mapping to Pi's message shape.
"""

from __future__ import annotations

import json
import os
from typing import Any

from .common import (
    ForeignSession,
    Problem,
    Record,
    Source,
    as_count,
    empty_usage,
    iso_ms,
    split_lines,
)

__all__ = ["ClaudeCodeSession", "load_claude_code", "looks_like_claude_code"]

CONVERSATION_TYPES = frozenset({"user", "assistant", "system"})
METADATA_TYPES = frozenset(
    {
        "summary",
        "ai-title",
        "custom-title",
        "agent-name",
        "agent-color",
        "agent-setting",
        "file-history-snapshot",
        "queue-operation",
        "last-prompt",
        "permission-mode",
        "pr-link",
    }
)
_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "toolUse",
    "max_tokens": "length",
    "pause_turn": "stop",
    "refusal": "stop",
}


def looks_like_claude_code(value: dict[str, Any]) -> bool:
    """A line only Claude Code writes: a chain record with its session fields, or one of its
    metadata records."""
    kind = value.get("type")
    if kind in CONVERSATION_TYPES or kind in ("attachment", "progress"):
        return "uuid" in value and ("parentUuid" in value or "sessionId" in value)
    if kind == "summary":
        return "leafUuid" in value
    return kind in METADATA_TYPES and kind != "summary"


class ClaudeCodeSession(ForeignSession):
    """A Claude Code file read by R1-R9; `usage_parts` and `context` follow the same rules."""

    summary_of: dict[str, str]
    """compact boundary id -> id of its `isCompactSummary` record."""

    def usage_parts(self, leaf: str) -> list[tuple[str, str, dict[str, int]]]:
        """R9: the route's assistant records with usage, grouped by `message.id` (else the
        uuid); the last record of each group in route order counts."""
        groups: dict[tuple[str, str], Record] = {}
        for record in self.route(leaf):
            message = record.value.get("message")
            if record.record_type != "assistant" or not isinstance(message, dict):
                continue
            if not isinstance(message.get("usage"), dict):
                continue
            group = response_key(message, record.id)
            groups.pop(group, None)  # the later record replaces it (and moves to the end)
            groups[group] = record
        parts = []
        for record in groups.values():
            message = record.value["message"]
            model = message.get("model")
            parts.append(
                ("anthropic", model if isinstance(model, str) else "", _usage(message["usage"]))
            )
        return parts

    def context(self, leaf: str) -> list[tuple[str, dict[str, Any]]]:
        """What Claude Code sends after each compaction, as far as the file tells: the summary
        message, the preserved messages, then everything after. Derived from the records
        (Claude Code does not write the context it sends)."""
        route = self.route(leaf)
        out: list[tuple[str, dict[str, Any]]] = []
        pending: list[Record] = []
        summary_id: str | None = None
        for i, record in enumerate(route):
            entry = record.entry
            if entry is not None and entry["type"] == "compaction":
                out = []
                later = {r.id for r in route[i + 1 :]}
                pending = [
                    r
                    for pid in self.preserved_ids(record)
                    if pid not in later and (r := self.get(pid)) is not None
                ]
                summary_id = self.summary_of.get(record.id)
                if summary_id not in later:
                    out.extend((r.id, m) for r in pending for m in r.messages)
                    pending = []
                continue
            out.extend((record.id, m) for m in record.messages)
            if record.id == summary_id and pending:
                out.extend((r.id, m) for r in pending for m in r.messages)
                pending = []
        return out

    def preserved_ids(self, boundary: Record) -> list[str]:
        """The messages a compaction kept verbatim, oldest first (`preservedMessages` wins
        over `preservedSegment`)."""
        meta = boundary.value.get("compactMetadata")
        if not isinstance(meta, dict):
            return []
        kept = meta.get("preservedMessages")
        if isinstance(kept, dict) and isinstance(kept.get("uuids"), list):
            return [u for u in kept["uuids"] if isinstance(u, str)]
        segment = meta.get("preservedSegment")
        if not isinstance(segment, dict):
            return []
        head, tail = segment.get("headUuid"), segment.get("tailUuid")
        if not isinstance(head, str) or not isinstance(tail, str):
            return []
        chain: list[str] = []
        node: str | None = tail
        seen: set[str] = set()
        while node is not None and node not in seen:
            seen.add(node)
            chain.append(node)
            if node == head:
                chain.reverse()
                return chain
            node = self._chain_parent.get(node)
        return [u for u in (head, tail) if u in self._chain_parent]

    _chain_parent: dict[str, str | None]


def response_key(message: dict[str, Any], uuid: str) -> tuple[str, str]:
    """R9's group of an assistant record: its `message.id` (whatever JSON value it is), or
    its own uuid when it has none."""
    key = message.get("id")
    if key is None:
        return ("uuid", uuid)
    return ("id", key if isinstance(key, str) else json.dumps(key, sort_keys=True))


def _usage(raw: dict[str, Any]) -> dict[str, int]:
    return {
        "input": as_count(raw.get("input_tokens")),
        "output": as_count(raw.get("output_tokens")),
        "cacheRead": as_count(raw.get("cache_read_input_tokens")),
        "cacheWrite": as_count(raw.get("cache_creation_input_tokens")),
    }


def _pi_usage(usage: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = dict(usage)
    out["totalTokens"] = sum(usage.values())
    return out


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _image_block(block: dict[str, Any]) -> dict[str, Any]:
    source = block.get("source")
    if isinstance(source, dict) and source.get("type") == "base64":
        return {
            "type": "image",
            "data": source.get("data") if isinstance(source.get("data"), str) else "",
            "mimeType": source.get("media_type")
            if isinstance(source.get("media_type"), str)
            else "application/octet-stream",
        }
    url = source.get("url") if isinstance(source, dict) else None
    return _text_block(f"[image: {url}]" if isinstance(url, str) else "[image]")


def _plain_blocks(content: Any) -> list[dict[str, Any]]:
    """Text and image blocks of a tool result or user content; anything else as its JSON."""
    if isinstance(content, str):
        return [_text_block(content)]
    if not isinstance(content, list):
        return [] if content is None else [_text_block(json.dumps(content))]
    out = []
    for block in content:
        if isinstance(block, str):
            out.append(_text_block(block))
        elif isinstance(block, dict) and block.get("type") == "text":
            text = block.get("text")
            out.append(_text_block(text if isinstance(text, str) else ""))
        elif isinstance(block, dict) and block.get("type") == "image":
            out.append(_image_block(block))
        else:
            out.append(_text_block(json.dumps(block, ensure_ascii=False)))
    return out


def _assistant_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [_text_block(content)]
    if not isinstance(content, list):
        return []
    out: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, str):
            out.append(_text_block(block))
            continue
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            out.append(_text_block(text if isinstance(text, str) else ""))
        elif kind == "thinking":
            thinking: dict[str, Any] = {"type": "thinking", "thinking": block.get("thinking") or ""}
            if isinstance(block.get("signature"), str):
                thinking["thinkingSignature"] = block["signature"]
            out.append(thinking)
        elif kind == "redacted_thinking":
            out.append(
                {
                    "type": "thinking",
                    "thinking": "",
                    "thinkingSignature": block.get("data") or "",
                    "redacted": True,
                }
            )
        elif kind in ("tool_use", "server_tool_use"):
            arguments = block.get("input")
            out.append(
                {
                    "type": "toolCall",
                    "id": block.get("id") or "",
                    "name": block.get("name") or "",
                    "arguments": arguments if isinstance(arguments, dict) else {"input": arguments},
                }
            )
        else:
            out.append(_text_block(json.dumps(block, ensure_ascii=False)))
    return out


def _user_messages(
    content: Any, ms: int | None, tool_names: dict[str, str]
) -> list[dict[str, Any]]:
    """A Claude Code user record's content as Pi messages: each `tool_result` block becomes a
    `toolResult` message, runs of other blocks one `user` message, in block order."""
    if isinstance(content, str):
        return [{"role": "user", "content": content, "timestamp": ms}]
    if not isinstance(content, list):
        return []
    out: list[dict[str, Any]] = []
    run: list[Any] = []

    def flush() -> None:
        if run:
            out.append({"role": "user", "content": _plain_blocks(list(run)), "timestamp": ms})
            run.clear()

    for block in content:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            flush()
            call_id = block.get("tool_use_id")
            call_id = call_id if isinstance(call_id, str) else ""
            out.append(
                {
                    "role": "toolResult",
                    "toolCallId": call_id,
                    "toolName": tool_names.get(call_id, ""),
                    "content": _plain_blocks(block.get("content")),
                    "isError": block.get("is_error") is True,
                    "timestamp": ms,
                }
            )
        else:
            run.append(block)
    flush()
    return out


def _assistant_message(
    value: dict[str, Any], message: dict[str, Any], ms: int | None, counted: bool
) -> dict[str, Any]:
    raw_stop = message.get("stop_reason")
    stop = _STOP_REASONS.get(raw_stop, "stop") if isinstance(raw_stop, str) else "stop"
    if value.get("isApiErrorMessage") is True:
        stop = "error"
    usage = message.get("usage")
    parsed = _usage(usage) if isinstance(usage, dict) and counted else empty_usage()
    out: dict[str, Any] = {
        "role": "assistant",
        "content": _assistant_blocks(message.get("content")),
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": message.get("model") if isinstance(message.get("model"), str) else "",
        "usage": _pi_usage(parsed),
        "stopReason": stop,
        "timestamp": ms,
    }
    if isinstance(message.get("id"), str):
        out["responseId"] = message["id"]
    if isinstance(raw_stop, str):
        out["rawStopReason"] = raw_stop
    if stop == "error":
        texts = [b["text"] for b in out["content"] if b.get("type") == "text"]
        out["errorMessage"] = "\n".join(texts)
    return out


def load_claude_code(data: bytes, source: Source) -> ClaudeCodeSession:
    """Read a Claude Code file's bytes by R1-R9. Never fails on content: damaged lines are
    skipped and reported in `problems`."""
    lines, skipped, _ = split_lines(data)
    session = ClaudeCodeSession(format="claude-code", source=source, size=len(data), records=[])
    problems = session.problems
    for s in skipped:
        severity = "warning" if s.reason == "truncated last line" else "error"
        problems.append(
            Problem(s.line, severity, "skipped-line", f"{s.reason}, skipped: {s.excerpt}")  # type: ignore[arg-type]
        )

    # R1-R3: records, first copy of each uuid.
    records: list[Record] = []
    chain: dict[str, Record] = {}
    for line in lines:
        value = line.value
        kind_value = value.get("type")
        record_type = kind_value if isinstance(kind_value, str) else ""
        uuid = value.get("uuid")
        if isinstance(uuid, str) and uuid:
            if uuid in chain:
                records.append(
                    Record(
                        f"L{line.number}",
                        line.number,
                        line.start,
                        line.end,
                        value,
                        record_type,
                        "duplicate",
                    )
                )
                problems.append(
                    Problem(
                        line.number,
                        "warning",
                        "duplicate-id",
                        f"uuid {uuid} already read on line {chain[uuid].line}: this copy is ignored",
                        uuid,
                    )
                )
                continue
            kind = "conversation" if record_type in CONVERSATION_TYPES else "structural"
            record = Record(uuid, line.number, line.start, line.end, value, record_type, kind)  # type: ignore[arg-type]
            chain[uuid] = record
            records.append(record)
        else:
            kind = "metadata" if record_type in METADATA_TYPES else "unknown"
            records.append(
                Record(
                    f"L{line.number}",
                    line.number,
                    line.start,
                    line.end,
                    value,
                    record_type,
                    kind,  # type: ignore[arg-type]
                )
            )
    session.records = records

    # R4: parents.
    parent: dict[str, str | None] = {}
    for uuid, record in chain.items():
        p = record.value.get("parentUuid")
        if isinstance(p, str) and p in chain and p != uuid:
            parent[uuid] = p
        else:
            parent[uuid] = None
            if isinstance(p, str) and p and p != uuid and p not in chain:
                problems.append(
                    Problem(
                        record.line,
                        "warning",
                        "dangling-parent",
                        f"parentUuid {p} names no record in this file: read as a root",
                        uuid,
                    )
                )

    # R5: cycles; the member first in the file becomes a root.
    state: dict[str, int] = {}
    for uuid in chain:
        if uuid in state:
            continue
        path: list[str] = []
        node: str | None = uuid
        while node is not None and node not in state:
            state[node] = 1
            path.append(node)
            node = parent[node]
        if node is not None and state[node] == 1:
            members = path[path.index(node) :]
            first = min(members, key=lambda m: chain[m].line)
            parent[first] = None
            problems.append(
                Problem(
                    chain[first].line,
                    "warning",
                    "cycle",
                    f"parentUuid links form a cycle of {len(members)} records: {first} read as a root",
                    first,
                )
            )
        for n in path:
            state[n] = 2

    # R6: a compact boundary continues from its logical parent.
    def descends_from(candidate: str, ancestor: str) -> bool:
        node: str | None = candidate
        while node is not None:
            if node == ancestor:
                return True
            node = parent[node]
        return False

    summary_of: dict[str, str] = {}
    for uuid, record in chain.items():
        value = record.value
        if record.record_type != "system" or value.get("subtype") != "compact_boundary":
            continue
        if parent[uuid] is not None:
            continue
        meta = value.get("compactMetadata")
        meta = meta if isinstance(meta, dict) else {}
        candidates: list[Any] = [value.get("logicalParentUuid")]
        kept = meta.get("preservedMessages")
        if isinstance(kept, dict) and isinstance(kept.get("uuids"), list):
            candidates.extend(reversed(kept["uuids"]))
        segment = meta.get("preservedSegment")
        if isinstance(segment, dict):
            candidates.extend([segment.get("tailUuid"), segment.get("headUuid")])
        for candidate in candidates:
            if (
                isinstance(candidate, str)
                and candidate in chain
                and not descends_from(candidate, uuid)
            ):
                parent[uuid] = candidate
                break
        else:
            logical = value.get("logicalParentUuid")
            problems.append(
                Problem(
                    record.line,
                    "warning",
                    "compaction-unlinked",
                    f"compact boundary: logicalParentUuid {logical} and the preserved messages"
                    " name no earlier record: the compaction starts a new root",
                    uuid,
                )
            )

    # R7: conversation parents.
    for record in records:
        if record.kind != "conversation":
            continue
        p = parent[record.id]
        while p is not None and chain[p].kind != "conversation":
            p = parent[p]
        record.parent = p
    for record in records:
        if record.kind == "structural":
            record.parent = parent[record.id]
    for uuid, record in chain.items():
        if record.value.get("isCompactSummary") is True:
            raw_parent = record.value.get("parentUuid")
            if isinstance(raw_parent, str) and raw_parent in chain:
                summary_of.setdefault(raw_parent, uuid)
    session.summary_of = summary_of
    session._chain_parent = parent

    _build_entries(session, chain, summary_of)
    session.index()
    _describe_session(session)
    problems.sort(key=lambda p: p.line)
    return session


def _build_entries(
    session: ClaudeCodeSession, chain: dict[str, Record], summary_of: dict[str, str]
) -> None:
    """Pi-shaped entries and messages for the tree entries. Usage sits on the last record
    (file order) of each API response so that sums over entries count each response once."""
    last_of_response: dict[tuple[str, str], str] = {}
    tool_names: dict[str, str] = {}
    for record in session.records:
        if record.kind != "conversation" or record.record_type != "assistant":
            continue
        message = record.value.get("message")
        if not isinstance(message, dict):
            continue
        last_of_response[response_key(message, record.id)] = record.id
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if (
                isinstance(block, dict)
                and block.get("type") in ("tool_use", "server_tool_use")
                and isinstance(block.get("id"), str)
                and isinstance(block.get("name"), str)
            ):
                tool_names[block["id"]] = block["name"]

    for record in session.records:
        if record.kind != "conversation":
            continue
        value = record.value
        timestamp = value.get("timestamp") if isinstance(value.get("timestamp"), str) else ""
        ms = iso_ms(timestamp)
        base: dict[str, Any] = {"id": record.id, "parentId": record.parent, "timestamp": timestamp}
        message = value.get("message")
        if record.record_type == "system":
            subtype = value.get("subtype") if isinstance(value.get("subtype"), str) else ""
            if subtype == "compact_boundary":
                meta = value.get("compactMetadata")
                meta = meta if isinstance(meta, dict) else {}
                summary_id = summary_of.get(record.id)
                summary_text = ""
                if summary_id is not None:
                    summary_text = _text_of(chain[summary_id].value.get("message"))
                kept = session.preserved_ids(record)
                record.entry = {
                    "type": "compaction",
                    **base,
                    "summary": summary_text,
                    "firstKeptEntryId": kept[0] if kept else record.id,
                    "tokensBefore": as_count(meta.get("preTokens")),
                    "details": {
                        "trigger": meta.get("trigger"),
                        "summaryEntryId": summary_id,
                        "keptEntryIds": kept,
                        "postTokens": meta.get("postTokens"),
                    },
                }
                if summary_id is None:
                    session.problems.append(
                        Problem(
                            record.line,
                            "warning",
                            "compaction-no-summary",
                            "compact boundary without an isCompactSummary record after it",
                            record.id,
                        )
                    )
            else:
                record.entry = {
                    "type": "custom",
                    "customType": f"claude-code/system:{subtype}",
                    "data": {k: value[k] for k in ("content", "level") if k in value},
                    **base,
                }
            continue
        if not isinstance(message, dict):
            session.problems.append(
                Problem(
                    record.line,
                    "warning",
                    "no-message",
                    f"{record.record_type} record without a message object",
                    record.id,
                )
            )
            empty: dict[str, Any] = {"role": record.record_type, "content": [], "timestamp": ms}
            record.messages = [empty]
            record.entry = {"type": "message", **base, "message": empty}
            continue
        if record.record_type == "assistant":
            group = response_key(message, record.id)
            counted = last_of_response.get(group) == record.id
            pi_message = _assistant_message(value, message, ms, counted)
            if not counted:
                pi_message["usageOnEntry"] = last_of_response.get(group)
            record.messages = [pi_message]
            if counted and isinstance(message.get("usage"), dict):
                record.usage = _usage(message["usage"])
        else:
            record.messages = _user_messages(message.get("content"), ms, tool_names)
            pi_message = (
                record.messages[0]
                if len(record.messages) == 1
                else {"role": "user", "content": [], "timestamp": ms}
            )
            if len(record.messages) > 1:
                pi_message = {
                    "role": "user",
                    "content": [b for m in record.messages for b in _as_blocks(m)],
                    "timestamp": ms,
                }
            if not record.messages:
                # No readable content: Pi sends such a message with empty content.
                record.messages = [pi_message]
            if value.get("isCompactSummary") is True:
                pi_message = dict(pi_message, compactSummary=True)
            if value.get("isMeta") is True:
                pi_message = dict(pi_message, isMeta=True)
        record.entry = {"type": "message", **base, "message": pi_message}


def _as_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [_text_block(content)]
    return list(content) if isinstance(content, list) else []


def _text_of(message: Any) -> str:
    if not isinstance(message, dict):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def _describe_session(session: ClaudeCodeSession) -> None:
    """Id, cwd, title, start and cross-file links from the records."""
    titles: dict[str, str] = {}
    summaries: list[tuple[str, str]] = []
    for record in session.records:
        value = record.value
        if session.session_id is None and isinstance(value.get("sessionId"), str):
            session.session_id = value["sessionId"]
        if session.cwd is None and isinstance(value.get("cwd"), str):
            session.cwd = value["cwd"]
        if session.created is None and isinstance(value.get("timestamp"), str):
            session.created = value["timestamp"]
        kind = record.record_type
        for key, field_name in (
            ("custom-title", "customTitle"),
            ("agent-name", "agentName"),
            ("ai-title", "aiTitle"),
        ):
            if kind == key and isinstance(value.get(field_name), str):
                titles[key] = value[field_name]
        if kind == "summary" and isinstance(value.get("summary"), str):
            summaries.append((str(value.get("leafUuid")), value["summary"]))
    known = {s for s in summaries if session.get(s[0]) is not None}
    session.title = (
        titles.get("custom-title")
        or titles.get("agent-name")
        or titles.get("ai-title")
        or (list(known)[-1][1] if known else None)
        or (summaries[-1][1] if summaries else None)
    )
    path = session.source.path
    stem = os.path.splitext(os.path.basename(path))[0] if path else None
    if session.session_id is None:
        session.session_id = stem
    entries = session.entries()
    if entries:
        leaf = entries[-1].id
        while session.children(leaf):
            leaf = session.children(leaf)[-1]
        session.current_leaf = leaf
    session.links = _links(session, stem)


def _links(session: ClaudeCodeSession, stem: str | None) -> dict[str, Any]:
    """Sub-agent links both ways: a main file's Task/Agent results name their agent files;
    an agent file names its parent session and the tool call that started it."""
    path = session.source.path
    # Neighbouring files are looked up only for a file read from disk (an absolute path),
    # never relative to the process (an uploaded file has only its name).
    folder = os.path.dirname(path) if path and os.path.isabs(path) else None
    links: dict[str, Any] = {}
    agents = []
    for record in session.entries():
        result = record.value.get("toolUseResult")
        if not isinstance(result, dict) or not isinstance(result.get("agentId"), str):
            continue
        agent_id = result["agentId"]
        message = record.value.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        call_ids = [
            b.get("tool_use_id")
            for b in (content if isinstance(content, list) else [])
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
        link: dict[str, Any] = {
            "agentId": agent_id,
            "toolUseId": call_ids[0] if call_ids else None,
            "resultEntryId": record.id,
            "file": None,
        }
        if folder is not None and stem is not None:
            for candidate in (
                os.path.join(folder, stem, "subagents", f"agent-{agent_id}.jsonl"),
                os.path.join(folder, f"agent-{agent_id}.jsonl"),
            ):
                if os.path.isfile(candidate):
                    link["file"] = candidate
                    break
        agents.append(link)
    if agents:
        links["subagents"] = agents
    if stem is not None and stem.startswith("agent-"):
        agent_id = stem[len("agent-") :]
        parent: dict[str, Any] = {
            "agentId": agent_id,
            "sessionId": session.session_id,
            "toolUseId": None,
            "file": None,
        }
        if folder is not None:
            _read_agent_meta(folder, stem, session.session_id, parent)
        links["parent"] = parent
        if session.title is None and isinstance(parent.get("description"), str):
            session.title = parent["description"]
    return links


def _read_agent_meta(
    folder: str, stem: str, session_id: str | None, parent: dict[str, Any]
) -> None:
    """An agent file's `meta.json` (spawning tool call, type, description) and main file."""
    meta_path = os.path.join(folder, f"{stem}.meta.json")
    if os.path.isfile(meta_path):
        try:
            with open(meta_path, "rb") as fh:
                meta = json.loads(fh.read())
        except (OSError, ValueError):
            meta = None
        if isinstance(meta, dict):
            for key in ("toolUseId", "agentType", "description"):
                if isinstance(meta.get(key), str):
                    parent[key] = meta[key]
    if os.path.basename(folder) == "subagents" and session_id:
        main = os.path.join(os.path.dirname(os.path.dirname(folder)), f"{session_id}.jsonl")
        if os.path.isfile(main):
            parent["file"] = main
