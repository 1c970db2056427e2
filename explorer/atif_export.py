"""A route as Agent Trajectory Interchange Format (ATIF v1.8) documents, built with the
``atif`` package's own models so every document is validated as it is made.

Why ATIF: evaluation tools read it, and a Pi route maps onto it without loss of what they
need (user turns, agent turns with reasoning, tool calls and their results, token figures
and cost). A compaction rewrites what the model sees, so a route is cut there: the history
before it is one trajectory, whose ``continued_trajectory_ref`` names the next one, which
opens with the compaction's summary and the kept entries (marked ``is_copied_context``, as
the format asks for context copied from a prior trajectory). Entries come in masked
(``queries.load_entries``), so no secret reaches a file.

:func:`trajectories` is pure (route entries in, models out); :func:`route_documents` reads a
stored route for the download view.
"""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from atif import (
    Agent,
    ContentPart,
    FinalMetrics,
    ImageSource,
    Metrics,
    Observation,
    ObservationResult,
    Step,
    ToolCall,
    Trajectory,
)

from explorer.session.describe import blocks_text, entry_message, finite

SCHEMA_VERSION = "ATIF-v1.8"
AGENT_NAME = "pi"
_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
_NOTES = (
    "Exported by Session Explorer from a Pi session route (JSONL format v3). Secrets are "
    "masked as [REDACTED:kind]. Each compaction ends a trajectory; the next one "
    "(continued_trajectory_ref) opens with the compaction summary as a system step and the "
    "kept entries copied with is_copied_context. Tool results are the observations of the "
    "agent step that called them. Labels, names, model and thinking-level changes and "
    "context edits are not steps; their count is in extra.skipped."
)


def segment_name(index: int) -> str:
    """The file name of the route's ``index``-th trajectory (0-based) in the download."""
    return f"trajectory-{index + 1}.json"


def _timestamp(entry: dict) -> str | None:
    value = entry.get("timestamp")
    if not isinstance(value, str):
        return None
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value


def _content(content: Any) -> str | list[ContentPart]:
    """Message content as ATIF wants it: a string, or parts when it holds images (as data
    URLs, so the file needs nothing beside it)."""
    if not isinstance(content, list):
        return content if isinstance(content, str) else ""
    images = [b for b in content if isinstance(b, dict) and b.get("type") == "image"]
    if not images:
        return blocks_text(content)
    parts: list[ContentPart] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(ContentPart(type="text", text=block["text"]))
        elif block.get("type") == "image":
            mime = block.get("mimeType")
            data = block.get("data")
            if mime in _IMAGE_TYPES and isinstance(data, str):
                source = ImageSource(media_type=mime, path=f"data:{mime};base64,{data}")
                parts.append(ContentPart(type="image", source=source))
            else:
                parts.append(ContentPart(type="text", text=f"[image {mime or 'of unknown type'}]"))
    return parts


def _metrics(message: dict) -> Metrics | None:
    usage = message.get("usage")
    if not isinstance(usage, dict):
        return None
    cached = int(finite(usage.get("cacheRead")))
    written = int(finite(usage.get("cacheWrite")))
    cost = usage.get("cost") if isinstance(usage.get("cost"), dict) else {}
    return Metrics(
        prompt_tokens=int(finite(usage.get("input"))) + cached + written,
        completion_tokens=int(finite(usage.get("output"))),
        cached_tokens=cached,
        cost_usd=finite(cost.get("total")) if cost else None,
    )


@dataclass
class _Segment:
    steps: list[dict[str, Any]]
    opened_by: dict | None  # the compaction this trajectory continues from


class _Builder:
    """Steps as plain dicts first (tool results join their call's step later), then
    validated as models once a segment is complete."""

    def __init__(self) -> None:
        self.segments: list[_Segment] = [_Segment([], None)]
        self.skipped: dict[str, int] = {}

    @property
    def steps(self) -> list[dict[str, Any]]:
        return self.segments[-1].steps

    def add(self, entry: dict, *, copied: bool = False) -> None:
        kind = entry.get("type")
        message = entry_message(entry)
        base: dict[str, Any] = {"timestamp": _timestamp(entry)}
        base["extra"] = {"pi_entry_id": entry.get("id"), "pi_type": kind}
        if copied:
            base["is_copied_context"] = True
        if message is not None:
            self._message(message, base)
        elif kind == "branch_summary":
            summary = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
            base["extra"]["fromId"] = entry.get("fromId")
            self.steps.append({**base, "source": "system", "message": summary})
        elif kind == "custom_message":
            self.steps.append({**base, "source": "user", "message": _content(entry.get("content"))})
        elif kind == "compaction":
            if not copied:  # an older compaction inside a kept tail sends nothing: left out
                self._compaction(entry, base)
        elif not copied:  # counted once, where it stands on the route
            self.skipped[str(kind)] = self.skipped.get(str(kind), 0) + 1

    def _message(self, message: dict, base: dict[str, Any]) -> None:
        role = message.get("role")
        content = message.get("content")
        if role == "assistant":
            blocks = content if isinstance(content, list) else []
            thinking = [
                b["thinking"]
                for b in blocks
                if isinstance(b, dict)
                and b.get("type") == "thinking"
                and isinstance(b.get("thinking"), str)
            ]
            calls = [
                ToolCall(
                    tool_call_id=str(b.get("id") or f"call-{i}"),
                    function_name=str(b.get("name") or "unknown"),
                    arguments=b["arguments"]
                    if isinstance(b.get("arguments"), dict)
                    else {"value": b.get("arguments")},
                )
                for i, b in enumerate(blocks)
                if isinstance(b, dict) and b.get("type") == "toolCall"
            ]
            model = "/".join(str(message[k]) for k in ("provider", "model") if message.get(k))
            extra = {**base["extra"], "stopReason": message.get("stopReason")}
            if message.get("errorMessage"):
                extra["errorMessage"] = message.get("errorMessage")
            self.steps.append(
                {
                    **base,
                    "extra": extra,
                    "source": "agent",
                    "message": _content(content)
                    if isinstance(content, str)
                    else blocks_text(blocks),
                    "model_name": model or None,
                    "reasoning_content": "\n\n".join(thinking) or None,
                    "tool_calls": calls or None,
                    "metrics": _metrics(message),
                }
            )
        elif role == "toolResult":
            self._tool_result(message, base)
        elif role == "bashExecution":
            output = f"{message.get('output', '')}"
            result = ObservationResult(content=output, extra={"exitCode": message.get("exitCode")})
            self.steps.append(
                {
                    **base,
                    "source": "user",
                    "message": f"$ {message.get('command', '')}",
                    "observation": Observation(results=[result]),
                }
            )
        else:  # user, custom and any role a later Pi adds: what the user side sent
            source = "user" if role in ("user", "custom") else "system"
            base["extra"]["role"] = role
            self.steps.append({**base, "source": source, "message": _content(content)})

    def _tool_result(self, message: dict, base: dict[str, Any]) -> None:
        call_id = message.get("toolCallId")
        content = _content(message.get("content"))
        extra = {"pi_entry_id": base["extra"]["pi_entry_id"], "toolName": message.get("toolName")}
        if message.get("isError"):
            extra["isError"] = True
        for step in reversed(self.steps):
            calls = step.get("tool_calls") or []
            if any(c.tool_call_id == call_id for c in calls):
                result = ObservationResult(source_call_id=call_id, content=content, extra=extra)
                observation = step.get("observation")
                results = [*(observation.results if observation else []), result]
                step["observation"] = Observation(results=results)
                return
        # A result whose call is not on this trajectory (cut off by a compaction, or
        # dangling): a system event of its own.
        result = ObservationResult(content=content, extra={**extra, "toolCallId": call_id})
        self.steps.append(
            {
                **base,
                "source": "system",
                "message": "",
                "observation": Observation(results=[result]),
            }
        )

    def _compaction(self, entry: dict, base: dict[str, Any]) -> None:
        if self.steps:
            self.segments.append(_Segment([], entry))
        else:  # nothing before it to end: the summary opens this trajectory
            self.segments[-1].opened_by = entry
        summary = entry.get("summary") if isinstance(entry.get("summary"), str) else ""
        base["extra"]["tokensBefore"] = entry.get("tokensBefore")
        base["extra"]["firstKeptEntryId"] = entry.get("firstKeptEntryId")
        self.steps.append({**base, "source": "system", "message": summary})


def trajectories(
    route: Sequence[dict], *, session_id: str, leaf: str | None, cwd: str = ""
) -> list[Trajectory]:
    """The route (root first, entries masked) as one trajectory per stretch between
    compactions, each pointing at the next by ``continued_trajectory_ref``."""
    builder = _Builder()
    index = {e.get("id"): i for i, e in enumerate(route)}
    for i, entry in enumerate(route):
        builder.add(entry)
        if entry.get("type") == "compaction" and builder.segments[-1].opened_by is entry:
            kept = index.get(entry.get("firstKeptEntryId"))
            for copied in route[kept:i] if kept is not None and kept < i else ():
                builder.add(copied, copied=True)
    docs: list[Trajectory] = []
    segments = builder.segments
    for k, segment in enumerate(segments):
        steps = [Step(step_id=n, **s) for n, s in enumerate(segment.steps, start=1)]
        metrics = [s.metrics for s in steps if s.metrics is not None and not s.is_copied_context]
        extra: dict[str, Any] = {
            "source": "pi-session",
            "cwd": cwd,
            "leaf": leaf,
            "segment": k + 1,
            "segments": len(segments),
            "skipped": builder.skipped if k == 0 else {},
        }
        if segment.opened_by is not None:
            extra["continues_from"] = {
                "trajectory": segment_name(k - 1) if k else None,
                "compaction": segment.opened_by.get("id"),
            }
        models = [s.model_name for s in steps if s.model_name]
        docs.append(
            Trajectory(
                schema_version=SCHEMA_VERSION,
                session_id=session_id,
                trajectory_id=f"{session_id}:{leaf or ''}:{k + 1}",
                agent=Agent(
                    name=AGENT_NAME, version="unknown", model_name=models[0] if models else None
                ),
                steps=steps,
                notes=_NOTES,
                final_metrics=FinalMetrics(
                    total_prompt_tokens=sum(m.prompt_tokens or 0 for m in metrics),
                    total_completion_tokens=sum(m.completion_tokens or 0 for m in metrics),
                    total_cached_tokens=sum(m.cached_tokens or 0 for m in metrics),
                    total_cost_usd=round(sum(m.cost_usd or 0.0 for m in metrics), 10),
                    total_steps=len(steps),
                ),
                continued_trajectory_ref=segment_name(k + 1) if k + 1 < len(segments) else None,
                extra=extra,
            )
        )
    return docs


def document_bytes(doc: Trajectory) -> bytes:
    return json.dumps(doc.to_json_dict(), ensure_ascii=False, indent=2).encode("utf-8")


def zip_bytes(docs: Sequence[Trajectory]) -> bytes:
    """Every trajectory of a route in one zip, under the names their refs use."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for k, doc in enumerate(docs):
            zf.writestr(segment_name(k), document_bytes(doc))
    return out.getvalue()


def route_documents(session: Any, leaf: str | None) -> list[Trajectory]:
    """The stored route to ``leaf`` as trajectories (entries read masked)."""
    from explorer import queries

    ids = [e.entry_id for e in queries.light_path(session, leaf)]
    data = queries.load_entries(session, ids)
    route = [data[i] for i in ids if i in data]
    return trajectories(route, session_id=session.session_id, leaf=leaf, cwd=session.shown_cwd)
