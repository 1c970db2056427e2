"""Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`) as engine trees.

The reading rules are X1-X6 of `shared/formats/codex.md` section 7: every `response_item` and
`compacted` line is a tree entry named `L<line>`, chained in file order to the current tip; a
`thread_rolled_back` moves the tip back N user turns, so what follows starts a branch beside the
abandoned turns (which stay in the file); a `token_count` whose cumulative total changed gives
its `last_token_usage` to the tip. Unlike Claude Code, Codex writes the context it rebuilt at
each compaction (`replacement_history`): the projection at a leaf starts from the newest one on
its route and replays what follows, as Codex itself does when it resumes.
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
    iso_ms,
    split_lines,
)

__all__ = ["CodexSession", "first_typed_turn", "load_codex", "looks_like_codex", "user_text"]

ENVELOPE_TYPES = frozenset(
    {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
)
NEWER_TYPES = frozenset(
    {
        "inter_agent_communication",
        "inter_agent_communication_metadata",
        "world_state",
        "rollout_reference",
    }
)
BARE_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "web_search_call",
    }
)
_NONE_COUNTED: Any = object()
ENCRYPTED_SUMMARY = (
    "[encrypted compaction: the provider computed this summary and stored it encrypted;"
    " its text is not in the file]"
)


def looks_like_codex(value: dict[str, Any], first: bool) -> bool:
    """An envelope line (`type` + `payload` object), or a pre-envelope rollout's line: its
    bare header (first line: `id` and `timestamp`, no `type`), a `{"record_type":"state"}`
    marker or a bare item (`{"type":"message","role":…}`, `{"type":"function_call",…}`)."""
    if value.get("type") in ENVELOPE_TYPES and isinstance(value.get("payload"), dict):
        return True
    if value.get("record_type") == "state":
        return True
    if (
        value.get("type") in BARE_ITEM_TYPES
        and "payload" not in value
        and "uuid" not in value
        and ("role" in value or "call_id" in value or "summary" in value)
    ):
        return True  # a pre-envelope item (the header line may be missing or damaged)
    return (
        first
        and "type" not in value
        and isinstance(value.get("id"), str)
        and "timestamp" in value
        and any(k in value for k in ("instructions", "cli_version", "originator", "git"))
    )


def is_turn_start(payload: dict[str, Any]) -> bool:
    """X4: a user message whose first text item does not begin with `<` (injected context
    such as `<environment_context>` is model input, not a typed turn)."""
    if payload.get("type") != "message" or payload.get("role") != "user":
        return False
    text = _first_text(payload.get("content"))
    return text is None or not text.startswith("<")


def first_typed_turn(session: CodexSession) -> str | None:
    """The text of the first turn the user typed (X4), in file order: what names a rollout
    that carries no title (Codex's own resume list shows it), never the injected
    `<environment_context>` that comes before it."""
    for record in session.entries():
        payload = record.value.get("payload")
        payload = payload if isinstance(payload, dict) else record.value
        if record.record_type == "response_item/message" and is_turn_start(payload):
            text = user_text(payload)
            if text and text.strip():
                return " ".join(text.split())
    return None


def _first_text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    for item in content if isinstance(content, list) else []:
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            return str(item["text"])
    return None


class CodexSession(ForeignSession):
    """A Codex rollout read by X1-X6."""

    def usage_parts(self, leaf: str) -> list[tuple[str, str, dict[str, int]]]:
        """X6: the usage attributed to each record on the route (one part per counted
        `token_count`, with the model of its turn)."""
        parts: list[tuple[str, str, dict[str, int]]] = []
        for record in self.route(leaf):
            for model, usage in self.usage_by_record.get(record.id, []):
                parts.append((self.provider, model, usage))
        return parts

    def context_source(self) -> str:
        return "recorded"

    def context(self, leaf: str) -> list[tuple[str, dict[str, Any]]]:
        """Codex's own reconstruction (`reconstruct_history_from_rollout`) over the route:
        the newest `replacement_history` is the base, later items are appended, a legacy
        compaction (summary text only) rebuilds the history as the earlier user messages
        plus the summary. Rollbacks are already in the route."""
        out: list[tuple[str, dict[str, Any]]] = []
        for record in self.route(leaf):
            if record.record_type == "compacted":
                payload = record.value.get("payload") or {}
                history = payload.get("replacement_history")
                if isinstance(history, list):
                    out = [(record.id, m) for m in record.messages]
                else:
                    users = [
                        (i, m)
                        for i, m in out
                        if m.get("role") == "user" and not _starts_with_tag(m)
                    ]
                    out = users + [(record.id, m) for m in record.messages]
                continue
            out.extend((record.id, m) for m in record.messages)
        return out

    provider: str = "openai"
    usage_by_record: dict[str, list[tuple[str, dict[str, int]]]]


def _starts_with_tag(message: dict[str, Any]) -> bool:
    text = _first_text(message.get("content"))
    return text is not None and text.startswith("<")


def _text_items(content: Any) -> list[dict[str, Any]]:
    """Codex content items (`input_text`, `output_text`, `input_image`) as Pi blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    out: list[dict[str, Any]] = []
    for item in content if isinstance(content, list) else []:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("text"), str):
            out.append({"type": "text", "text": item["text"]})
        elif item.get("type") == "input_image":
            url = item.get("image_url")
            if isinstance(url, str) and url.startswith("data:") and ";base64," in url:
                head, data = url.split(";base64,", 1)
                out.append({"type": "image", "data": data, "mimeType": head[len("data:") :]})
            else:
                out.append({"type": "text", "text": f"[image: {url}]"})
        else:
            out.append({"type": "text", "text": json.dumps(item, ensure_ascii=False)})
    return out


def _arguments(raw: Any) -> dict[str, Any]:
    """`function_call.arguments` is a JSON string; keep what does not parse as `{"raw": ...}`."""
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except ValueError:
            return {"raw": raw}
        return value if isinstance(value, dict) else {"value": value}
    return {} if raw is None else {"value": raw}


def _output_blocks(output: Any) -> tuple[list[dict[str, Any]], bool]:
    """A tool output as Pi blocks and whether it failed. Older CLIs wrote a JSON string
    `{output, metadata: {exit_code}}`; a non-zero exit code is an error."""
    if isinstance(output, str):
        try:
            value = json.loads(output)
        except ValueError:
            value = None
        if (
            isinstance(value, dict)
            and "output" in value
            and isinstance(value.get("metadata"), dict)
        ):
            code = value["metadata"].get("exit_code")
            text = (
                value["output"] if isinstance(value["output"], str) else json.dumps(value["output"])
            )
            return [{"type": "text", "text": text}], isinstance(code, int) and code != 0
        return [{"type": "text", "text": output}], False
    if isinstance(output, dict) and isinstance(output.get("content"), str):
        return [{"type": "text", "text": output["content"]}], output.get("success") is False
    return _text_items(output), False


def item_messages(
    payload: dict[str, Any], ms: int | None, model: str, provider: str, tools: dict[str, str]
) -> list[dict[str, Any]]:
    """One response item as Pi messages (none for an item type the reader does not know)."""
    kind = payload.get("type")
    if kind == "message":
        role = payload.get("role")
        blocks = _text_items(payload.get("content"))
        if role == "assistant":
            return [_assistant(blocks, ms, model, provider, "stop")]
        if role in ("developer", "system"):
            return [
                {
                    "role": "custom",
                    "customType": f"codex:{role}",
                    "content": blocks,
                    "display": True,
                    "timestamp": ms,
                }
            ]
        return [{"role": "user", "content": blocks, "timestamp": ms}]
    if kind == "reasoning":
        summary = payload.get("summary")
        texts = [
            s["text"]
            for s in (summary if isinstance(summary, list) else [])
            if isinstance(s, dict) and isinstance(s.get("text"), str)
        ]
        block: dict[str, Any] = {"type": "thinking", "thinking": "\n\n".join(texts)}
        if payload.get("encrypted_content"):
            block["thinkingSignature"] = "encrypted"
            if not texts:
                block["redacted"] = True
        return [_assistant([block], ms, model, provider, "stop")]
    if kind in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
        call_id = payload.get("call_id") or payload.get("id") or ""
        if kind == "function_call":
            name, arguments = payload.get("name"), _arguments(payload.get("arguments"))
        elif kind == "custom_tool_call":
            name, arguments = payload.get("name"), {"input": payload.get("input")}
        elif kind == "local_shell_call":
            name, arguments = "local_shell", {"action": payload.get("action")}
        else:
            name, arguments = "web_search", {"action": payload.get("action")}
        name = name if isinstance(name, str) else ""
        if isinstance(call_id, str):
            tools[call_id] = name
        call = {"type": "toolCall", "id": call_id, "name": name, "arguments": arguments}
        return [_assistant([call], ms, model, provider, "toolUse")]
    if kind in ("function_call_output", "custom_tool_call_output"):
        raw_id = payload.get("call_id")
        call_id = raw_id if isinstance(raw_id, str) else ""
        blocks, failed = _output_blocks(payload.get("output"))
        return [
            {
                "role": "toolResult",
                "toolCallId": call_id,
                "toolName": tools.get(call_id, ""),
                "content": blocks,
                "isError": failed,
                "timestamp": ms,
            }
        ]
    if kind == "compaction":
        return [_summary_message(ENCRYPTED_SUMMARY, ms, encrypted=True)]
    return []


def _assistant(
    blocks: list[dict[str, Any]], ms: int | None, model: str, provider: str, stop: str
) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": blocks,
        "api": "openai-responses",
        "provider": provider,
        "model": model,
        "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0},
        "stopReason": stop,
        "timestamp": ms,
    }


def _summary_message(summary: str, ms: int | None, encrypted: bool = False) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "compactionSummary",
        "summary": summary,
        "tokensBefore": 0,
        "timestamp": ms,
    }
    if encrypted:
        message["encrypted"] = True
    return message


def load_codex(data: bytes, source: Source) -> CodexSession:
    """Read a Codex rollout's bytes by X1-X6; damaged lines are skipped and reported."""
    lines, skipped, _ = split_lines(data)
    session = CodexSession(format="codex", source=source, size=len(data), records=[])
    session.usage_by_record = {}
    problems = session.problems
    for s in skipped:
        severity = "warning" if s.reason == "truncated last line" else "error"
        problems.append(
            Problem(s.line, severity, "skipped-line", f"{s.reason}, skipped: {s.excerpt}")  # type: ignore[arg-type]
        )
    records: list[Record] = []
    tip: Record | None = None
    by_id: dict[str, Record] = {}
    model = ""
    tools: dict[str, str] = {}
    last_total: Any = _NONE_COUNTED  # no token count counted yet
    first_object = True
    for line in lines:
        value = line.value
        payload = value.get("payload")
        kind = value.get("type")
        if not isinstance(payload, dict):
            if kind in BARE_ITEM_TYPES:
                kind, payload = "response_item", value
            elif first_object and looks_like_codex(value, True):
                kind, payload = "session_meta", value
            else:
                record_kind = "metadata" if value.get("record_type") == "state" else "unknown"
                records.append(
                    Record(
                        f"L{line.number}",
                        line.number,
                        line.start,
                        line.end,
                        value,
                        str(kind) if kind is not None else "",
                        record_kind,  # type: ignore[arg-type]
                    )
                )
                first_object = False
                continue
        first_object = False
        subtype = payload.get("type") if isinstance(payload.get("type"), str) else ""
        record_type = f"{kind}/{subtype}" if kind in ("response_item", "event_msg") else str(kind)
        record = Record(
            f"L{line.number}", line.number, line.start, line.end, value, record_type, "unknown"
        )
        records.append(record)
        timestamp = value.get("timestamp") if isinstance(value.get("timestamp"), str) else ""
        ms = iso_ms(timestamp)
        if kind == "session_meta":
            record.kind = "metadata"
            if session.session_id is None:
                _describe(session, payload)
            continue
        if kind == "turn_context":
            record.kind = "metadata"
            if isinstance(payload.get("model"), str):
                model = payload["model"]
            continue
        if kind in ("response_item", "compacted"):
            record.kind = "conversation"
            record.parent = tip.id if tip is not None else None
            base = {"id": record.id, "parentId": record.parent, "timestamp": timestamp}
            if kind == "compacted":
                record.messages = _compacted_messages(payload, ms, model, session.provider, tools)
                summary = _compaction_summary(payload, record.messages)
                history = payload.get("replacement_history")
                record.entry = {
                    "type": "compaction",
                    **base,
                    "summary": summary,
                    "firstKeptEntryId": record.id,
                    "tokensBefore": 0,
                    "details": {
                        "replacementHistory": len(history) if isinstance(history, list) else None,
                        "encrypted": any(m.get("encrypted") for m in record.messages),
                    },
                }
            else:
                record.messages = item_messages(payload, ms, model, session.provider, tools)
                if record.messages:
                    message = record.messages[0]
                    if len(record.messages) > 1:
                        message = dict(message)
                    record.entry = {"type": "message", **base, "message": message}
                else:
                    record.entry = {
                        "type": "custom",
                        "customType": f"codex:{subtype or 'unknown'}",
                        **base,
                    }
                    problems.append(
                        Problem(
                            line.number,
                            "warning",
                            "unknown-item",
                            f"response item of unknown type {subtype!r}: kept, not shown to the model",
                            record.id,
                        )
                    )
            by_id[record.id] = record
            tip = record
            continue
        if kind == "event_msg":
            record.kind = "event"
            if subtype == "thread_rolled_back":
                tip = _roll_back(tip, by_id, payload.get("num_turns"), line.number, problems)
            elif subtype == "token_count":
                info = payload.get("info")
                if not isinstance(info, dict):
                    continue
                total = info.get("total_token_usage")
                if total == last_total:
                    continue
                last_total = total
                last = info.get("last_token_usage")
                usage = _usage(last if isinstance(last, dict) else {})
                if tip is None:
                    for key, count in usage.items():
                        session.unattributed_usage[key] += count
                else:
                    session.usage_by_record.setdefault(tip.id, []).append((model, usage))
                    if tip.usage is None:
                        tip.usage = dict(usage)
                    else:
                        for key, count in usage.items():
                            tip.usage[key] += count
            continue
        if kind in NEWER_TYPES:
            record.kind = "metadata"
            continue
        problems.append(
            Problem(
                line.number,
                "warning",
                "unknown-record",
                f"record type {kind!r} is unknown: kept, not part of the tree",
            )
        )
    session.records = records
    session.index()
    if tip is not None and not session.children(tip.id):
        session.current_leaf = tip.id
    else:
        leaves = session.leaves()
        session.current_leaf = leaves[-1] if leaves else None
    for record in session.entries():
        if record.record_type == "response_item/function_call_output":
            call_id = (record.value.get("payload") or record.value).get("call_id")
            if isinstance(call_id, str) and call_id not in tools:
                problems.append(
                    Problem(
                        record.line,
                        "warning",
                        "orphan-output",
                        f"tool output for call {call_id}, which no earlier record made",
                        record.id,
                    )
                )
    _check_replacement_histories(session)
    if session.session_id is None and source.path:
        session.session_id = os.path.splitext(os.path.basename(source.path))[0]
    problems.sort(key=lambda p: p.line)
    return session


def user_text(payload: Any) -> str | None:
    """The text of a user message item (its text parts joined), else None."""
    if not isinstance(payload, dict):
        return None
    if payload.get("type") != "message" or payload.get("role") != "user":
        return None
    content = payload.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(
        str(item["text"])
        for item in (content if isinstance(content, list) else [])
        if isinstance(item, dict) and isinstance(item.get("text"), str)
    )


def _check_replacement_histories(session: CodexSession) -> None:
    """The recorded context against the file: a compaction keeps earlier user messages and
    adds its summary (last), so every other user message of a replacement history should be
    one typed earlier on the compaction's own route. One that is not (copied from another
    branch, or from after a fork point) is reported."""
    for record in session.entries():
        payload = record.value.get("payload")
        history = payload.get("replacement_history") if isinstance(payload, dict) else None
        if record.record_type != "compacted" or not isinstance(history, list):
            continue
        earlier: set[str] = set()
        for step in session.route(record.id)[:-1]:
            step_payload = step.value.get("payload")
            text = user_text(step_payload if isinstance(step_payload, dict) else step.value)
            if text is not None:
                earlier.add(text)
        kept = [item for item in history if isinstance(item, dict)][:-1]
        for item in kept:
            text = user_text(item)
            if text is None or text.startswith("<") or text in earlier:
                continue
            session.problems.append(
                Problem(
                    record.line,
                    "warning",
                    "compaction-history",
                    f"the compaction's recorded history keeps the user message {text[:60]!r},"
                    " which is not on its route",
                    record.id,
                )
            )


def _describe(session: CodexSession, meta: dict[str, Any]) -> None:
    """Identity from the first `session_meta` (a fork replays its parent's as a later line)."""
    if isinstance(meta.get("id"), str):
        session.session_id = meta["id"]
    if isinstance(meta.get("cwd"), str):
        session.cwd = meta["cwd"]
    if isinstance(meta.get("timestamp"), str):
        session.created = meta["timestamp"]
    if isinstance(meta.get("model_provider"), str) and meta["model_provider"]:
        session.provider = meta["model_provider"]
    if isinstance(meta.get("forked_from_id"), str):
        session.links["forkedFrom"] = {"threadId": meta["forked_from_id"]}
    source = meta.get("source")
    spawn = (
        source.get("subagent", {}).get("thread_spawn")
        if isinstance(source, dict) and isinstance(source.get("subagent"), dict)
        else None
    )
    if isinstance(spawn, dict):
        session.links["spawnedBy"] = {
            "threadId": spawn.get("parent_thread_id"),
            "callId": spawn.get("spawn_call_id"),
        }


def _usage(raw: dict[str, Any]) -> dict[str, int]:
    """X6: Codex's `input_tokens` include the cached ones; Pi's `input` does not."""
    cached = as_count(raw.get("cached_input_tokens"))
    return {
        "input": as_count(raw.get("input_tokens")) - cached,
        "output": as_count(raw.get("output_tokens")),
        "cacheRead": cached,
        "cacheWrite": as_count(raw.get("cache_creation_input_tokens")),
    }


def _roll_back(
    tip: Record | None,
    by_id: dict[str, Record],
    num_turns: Any,
    line: int,
    problems: list[Problem],
) -> Record | None:
    """X4: move the tip to the parent of the N-th user-turn start above it."""
    wanted = as_count(num_turns)
    found = 0
    node = tip
    while node is not None and found < wanted:
        payload = node.value.get("payload")
        payload = payload if isinstance(payload, dict) else node.value
        if node.record_type == "response_item/message" and is_turn_start(payload):
            found += 1
            if found == wanted:
                return by_id.get(node.parent) if node.parent is not None else None
        node = by_id.get(node.parent) if node.parent is not None else None
    if found < wanted:
        problems.append(
            Problem(
                line,
                "warning",
                "rollback-too-far",
                f"rollback of {wanted} turns, only {found} before it: the next record starts a new root",
            )
        )
        return None
    return tip


def _compacted_messages(
    payload: dict[str, Any], ms: int | None, model: str, provider: str, tools: dict[str, str]
) -> list[dict[str, Any]]:
    history = payload.get("replacement_history")
    if isinstance(history, list):
        out: list[dict[str, Any]] = []
        for item in history:
            if isinstance(item, dict):
                out.extend(item_messages(item, ms, model, provider, tools))
        return out
    message = payload.get("message")
    text = message if isinstance(message, str) else ""
    return [{"role": "user", "content": [{"type": "text", "text": text}], "timestamp": ms}]


def _compaction_summary(payload: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    """The summary text to show: the legacy `message`, else the replacement history's last
    user text (Codex puts its summary there), else the encrypted placeholder."""
    message = payload.get("message")
    if isinstance(message, str) and message:
        return message
    for m in reversed(messages):
        if m.get("role") == "compactionSummary":
            return str(m.get("summary"))
        if m.get("role") == "user":
            text = _first_text(m.get("content"))
            if text:
                return text
    return ""
