"""A minimal OpenAI-compatible chat-completions client (streaming, standard library only).

It lets the explorer talk to any server that speaks `/chat/completions` with server-sent
events (OpenAI, vLLM, llama.cpp, Ollama, LiteLLM ...) and returns the reply in Pi's assistant
message shape, so a reply can be appended to a session exactly like one Pi recorded. Failures
never raise: like Pi's providers, they come back as an assistant message with
`stopReason: "error"` (or `"aborted"` when the caller cancelled), because a session records
failed attempts too.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

from .jsonfmt import dumps, loads
from .messages import convert_to_llm
from .serialize import js_string, tolerant_content_text

__all__ = [
    "OpenAIChatProvider",
    "StreamEvent",
    "map_finish_reason",
    "parse_usage",
    "provider_from_env",
    "to_openai_messages",
    "zero_usage",
]

StreamEvent = tuple[str, Any]

API_NAME = "openai-completions"


def zero_usage() -> dict[str, Any]:
    return {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def parse_usage(raw: dict[str, Any]) -> dict[str, Any]:
    """Chat-completions usage → Pi usage; cached prompt tokens count as cache reads."""
    prompt = _int(raw.get("prompt_tokens"))
    details = (
        raw.get("prompt_tokens_details")
        if isinstance(raw.get("prompt_tokens_details"), dict)
        else {}
    )
    cached = details.get("cached_tokens")  # type: ignore[union-attr]
    if cached is None:
        cached = raw.get("prompt_cache_hit_tokens", raw.get("cached_tokens"))
    cache_read = _int(cached)
    cache_write = _int(details.get("cache_write_tokens"))  # type: ignore[union-attr]
    completion = raw.get("completion_tokens_details")
    reasoning = _int(completion.get("reasoning_tokens")) if isinstance(completion, dict) else 0
    output = _int(raw.get("completion_tokens"))
    input_tokens = max(0, prompt - cache_read - cache_write)
    return {
        "input": input_tokens,
        "output": output,
        "cacheRead": cache_read,
        "cacheWrite": cache_write,
        "reasoning": reasoning,
        "totalTokens": input_tokens + output + cache_read + cache_write,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


def map_finish_reason(reason: Any) -> tuple[str, str | None]:
    """`(stopReason, errorMessage)` for a chat-completions `finish_reason`."""
    if reason is None or reason in ("stop", "end"):
        return "stop", None
    if reason == "length":
        return "length", None
    if reason in ("tool_calls", "function_call"):
        return "toolUse", None
    return "error", f"Provider finish_reason: {js_string(reason)}"


# ---------------------------------------------------------------------------------------------
# Pi context messages → chat-completions messages


def _system_text(message: dict[str, Any]) -> str:
    parts = [tolerant_content_text(message.get("content"))]
    sections = message.get("sections")
    if isinstance(sections, dict):
        parts.extend(v for v in sections.values() if isinstance(v, str))
    return "\n\n".join(p for p in parts if p)


def _user_content(content: Any) -> Any:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    blocks = [b for b in content if isinstance(b, dict)]
    if not any(b.get("type") == "image" for b in blocks):
        return tolerant_content_text(blocks, "\n")
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if block.get("type") == "text":
            parts.append({"type": "text", "text": js_string(block.get("text") or "")})
        elif block.get("type") == "image":
            url = f"data:{block.get('mimeType', 'image/png')};base64,{block.get('data', '')}"
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def to_openai_messages(
    messages: list[dict[str, Any]], system_prompt: str | None = None
) -> list[dict[str, Any]]:
    """Convert context messages to chat-completions messages.

    Messages go through `convert_to_llm` first (a no-op for model roles), so a projection's
    messages can be passed as they are.

    Failed and aborted assistant replies are left out (they are not part of what the model
    said), and every tool call gets a tool answer before the next turn, because
    chat-completions servers reject unanswered calls.
    """
    out: list[dict[str, Any]] = []
    if system_prompt:
        out.append({"role": "system", "content": system_prompt})
    pending: list[str] = []
    messages = convert_to_llm([m for m in messages if isinstance(m, dict)])

    def flush_pending() -> None:
        for call_id in pending:
            out.append({"role": "tool", "tool_call_id": call_id, "content": "No result provided"})
        pending.clear()

    for message in messages:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role == "toolResult":
            call_id = js_string(message.get("toolCallId"))
            if call_id in pending:
                pending.remove(call_id)
                text = tolerant_content_text(message.get("content"))
                out.append(
                    {"role": "tool", "tool_call_id": call_id, "content": text or "(no output)"}
                )
            continue
        flush_pending()
        if role == "system":
            text = _system_text(message)
            if text:
                out.append({"role": "system", "content": text})
        elif role == "user":
            out.append({"role": "user", "content": _user_content(message.get("content"))})
        elif role == "assistant":
            if message.get("stopReason") in ("error", "aborted"):
                continue
            content = message.get("content")
            blocks = (
                [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
            )
            text = (
                tolerant_content_text(blocks)
                if blocks
                else (content if isinstance(content, str) else "")
            )
            calls = [b for b in blocks if b.get("type") == "toolCall"]
            item: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                item["tool_calls"] = [
                    {
                        "id": js_string(b.get("id")),
                        "type": "function",
                        "function": {
                            "name": js_string(b.get("name")),
                            "arguments": dumps(
                                b.get("arguments") if b.get("arguments") is not None else {}
                            ),
                        },
                    }
                    for b in calls
                ]
                pending.extend(js_string(b.get("id")) for b in calls)
            elif not text:
                continue
            out.append(item)
    flush_pending()
    return out


# ---------------------------------------------------------------------------------------------
# The client


class _Aborted(Exception):
    pass


class OpenAIChatProvider:
    """Streams one chat completion; see `stream`."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout: float = 120.0,
        provider: str = "openai-compatible",
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.provider = provider
        self._clock = clock

    # -- request ------------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        if self.base_url.endswith("/chat/completions"):
            return self.base_url
        return self.base_url + "/chat/completions"

    def build_body(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        system_prompt: str | None = None,
        reasoning: str | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(messages, system_prompt),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if reasoning:
            body["reasoning_effort"] = reasoning
        return body

    def _now_ms(self) -> int:
        return int(self._clock() if self._clock is not None else time.time() * 1000)

    def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int | None = None,
        cancel: threading.Event | None = None,
        system_prompt: str | None = None,
        reasoning: str | None = None,
    ) -> Iterator[StreamEvent]:
        """Yield `("delta", text)` per content chunk, then exactly one `("done", message)`."""
        state = _StreamState(self, self._now_ms())
        body = self.build_body(
            messages, max_tokens=max_tokens, system_prompt=system_prompt, reasoning=reasoning
        )
        if cancel is not None and cancel.is_set():
            yield ("done", state.finish("aborted", "Request was aborted"))
            return
        parts = urlsplit(self.endpoint)
        conn_cls = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        conn = conn_cls(parts.hostname or "localhost", parts.port, timeout=self.timeout)
        finished = threading.Event()
        watcher = None
        if cancel is not None:
            watcher = threading.Thread(
                target=_close_on_cancel, args=(conn, cancel, finished), daemon=True
            )
            watcher.start()
        try:
            path = parts.path or "/"
            if parts.query:
                path += "?" + parts.query
            headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            conn.request("POST", path, body=dumps(body).encode("utf-8"), headers=headers)
            response = conn.getresponse()
            if response.status >= 400:
                detail = response.read(4096).decode("utf-8", errors="replace")
                yield (
                    "done",
                    state.finish(
                        "error", _http_error_message(response.status, response.reason, detail)
                    ),
                )
                return
            yield from state.consume(response, cancel)
            yield ("done", state.result())
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if cancel is not None and cancel.is_set():
                yield ("done", state.finish("aborted", "Request was aborted"))
            else:
                yield (
                    "done",
                    state.finish(
                        "error", f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                    ),
                )
        except _Aborted:
            yield ("done", state.finish("aborted", "Request was aborted"))
        finally:
            finished.set()
            conn.close()

    def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> dict[str, Any]:
        """Run `stream` to the end and return the final assistant message."""
        final: dict[str, Any] | None = None
        for kind, value in self.stream(messages, **kwargs):
            if kind == "done":
                final = value
        assert final is not None
        return final


def _close_on_cancel(
    conn: http.client.HTTPConnection, cancel: threading.Event, finished: threading.Event
) -> None:
    while not finished.is_set():
        if cancel.wait(0.05):
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            return


def _http_error_message(status: int, reason: str, body: str) -> str:
    message = body.strip()
    try:
        parsed = loads(body)
        if isinstance(parsed, dict):
            err = parsed.get("error")
            if isinstance(err, dict) and isinstance(err.get("message"), str):
                message = err["message"]
            elif isinstance(err, str):
                message = err
    except ValueError:
        pass
    return f"{status} {reason}: {message}" if message else f"{status} {reason}"


class _StreamState:
    """Accumulates one streamed reply."""

    def __init__(self, provider: OpenAIChatProvider, timestamp: int) -> None:
        self.provider = provider
        self.timestamp = timestamp
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.usage = zero_usage()
        self.finish_reason: Any = None
        self.saw_finish = False
        self.saw_done = False
        self.error: str | None = None

    def consume(
        self, response: http.client.HTTPResponse, cancel: threading.Event | None
    ) -> Iterator[StreamEvent]:
        data_lines: list[str] = []
        while True:
            if cancel is not None and cancel.is_set():
                raise _Aborted
            raw = response.readline()
            if not raw:
                if cancel is not None and cancel.is_set():
                    raise _Aborted
                if data_lines:
                    yield from self._dispatch("\n".join(data_lines))
                return
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            if line == "":
                if data_lines:
                    payload = "\n".join(data_lines)
                    data_lines = []
                    yield from self._dispatch(payload)
                    if self.saw_done or self.error is not None:
                        return
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            if field == "data":
                data_lines.append(value[1:] if value.startswith(" ") else value)

    def _dispatch(self, payload: str) -> Iterator[StreamEvent]:
        if payload.strip() == "[DONE]":
            self.saw_done = True
            return
        try:
            chunk = loads(payload)
        except ValueError:
            return
        if not isinstance(chunk, dict):
            return
        err = chunk.get("error")
        if err is not None:
            msg = err.get("message") if isinstance(err, dict) else err
            self.error = js_string(msg) if msg is not None else "Unknown error"
            return
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.usage = parse_usage(usage)
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return
        choice = choices[0]
        if "finish_reason" in choice and choice["finish_reason"] is not None:
            self.finish_reason = choice["finish_reason"]
            self.saw_finish = True
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return
        for key in ("reasoning_content", "reasoning"):
            piece = delta.get(key)
            if isinstance(piece, str) and piece:
                self.thinking.append(piece)
                break
        content = delta.get("content")
        if isinstance(content, str) and content:
            self.text.append(content)
            yield ("delta", content)
        calls = delta.get("tool_calls")
        if isinstance(calls, list):
            for call in calls:
                if isinstance(call, dict):
                    self._add_tool_delta(call)

    def _add_tool_delta(self, call: dict[str, Any]) -> None:
        index = call.get("index") if isinstance(call.get("index"), int) else len(self.tool_calls)
        slot = self.tool_calls.setdefault(index, {"id": "", "name": "", "arguments": ""})  # type: ignore[arg-type]
        if isinstance(call.get("id"), str):
            slot["id"] = call["id"]
        fn = call.get("function")
        if isinstance(fn, dict):
            if isinstance(fn.get("name"), str):
                slot["name"] += fn["name"]
            if isinstance(fn.get("arguments"), str):
                slot["arguments"] += fn["arguments"]

    def _content(self) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        if self.thinking:
            content.append({"type": "thinking", "thinking": "".join(self.thinking)})
        if self.text:
            content.append({"type": "text", "text": "".join(self.text)})
        for index in sorted(self.tool_calls):
            slot = self.tool_calls[index]
            try:
                args = loads(slot["arguments"]) if slot["arguments"].strip() else {}
            except ValueError:
                args = {}
            content.append(
                {
                    "type": "toolCall",
                    "id": slot["id"],
                    "name": slot["name"],
                    "arguments": args if isinstance(args, dict) else {},
                }
            )
        return content

    def finish(self, stop_reason: str, error_message: str | None) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": self._content(),
            "api": API_NAME,
            "provider": self.provider.provider,
            "model": self.provider.model,
            "usage": self.usage,
            "stopReason": stop_reason,
            "timestamp": self.timestamp,
        }
        if error_message is not None:
            message["errorMessage"] = error_message
        return message

    def result(self) -> dict[str, Any]:
        if self.error is not None:
            return self.finish("error", self.error)
        if not self.saw_finish and not self.saw_done:
            return self.finish("error", "Stream ended without finish_reason")
        stop, error = map_finish_reason(self.finish_reason)
        return self.finish(stop, error)


def provider_from_env(environ: dict[str, str] | None = None) -> OpenAIChatProvider | None:
    """The provider configured by `SESSIONS_LLM_BASE_URL` / `_MODEL` / `_API_KEY`, if any."""
    env = os.environ if environ is None else environ
    base_url = env.get("SESSIONS_LLM_BASE_URL", "").strip()
    if not base_url:
        return None
    model = env.get("SESSIONS_LLM_MODEL", "").strip() or "default"
    api_key = env.get("SESSIONS_LLM_API_KEY", "").strip() or None
    return OpenAIChatProvider(base_url, model, api_key)
