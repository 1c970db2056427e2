"""A real HTTP server on 127.0.0.1 that speaks OpenAI chat-completions with SSE streaming.

Tests (and the end-to-end tests of the live layer) point the OpenAI-compatible client at it
to exercise the whole network path: request encoding, chunked event streams, the usage chunk,
`[DONE]`, HTTP errors and slow streams that the caller cancels.

    with FakeOpenAIServer(script=[Reply("Hello", chunks=["Hel", "lo"])]) as server:
        provider = OpenAIChatProvider(server.base_url, "fake-model")
        ...
        server.requests[0]["body"]["messages"]

A script item is a `Reply`, a plain string (one reply with that text), or a callable taking
the parsed request body and returning a `Reply`. Items are used in order; the last repeats.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeOpenAIServer", "Reply"]


@dataclass
class Reply:
    """One scripted response.

    `chunks` are the content deltas (default: the whole `text` in one delta); `status` other
    than 200 sends `error_body` as JSON instead of a stream; `delay` sleeps before each event
    (to make a slow stream); `raw_events` replaces the generated events entirely (each string
    is sent as one `data:` event).
    """

    text: str = ""
    chunks: list[str] | None = None
    finish_reason: str | None = "stop"
    usage: dict[str, Any] | None = field(
        default_factory=lambda: {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    )
    tool_calls: list[dict[str, Any]] | None = None
    reasoning: list[str] | None = None
    status: int = 200
    error_body: Any = None
    delay: float = 0.0
    raw_events: list[str] | None = None
    send_done: bool = True

    def events(self, model: str) -> list[str]:
        if self.raw_events is not None:
            return list(self.raw_events)
        base = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
        }
        out: list[dict[str, Any]] = []
        out.append(
            {
                **base,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "finish_reason": None,
                    }
                ],
            }
        )
        for piece in self.reasoning or []:
            out.append(
                {
                    **base,
                    "choices": [
                        {"index": 0, "delta": {"reasoning_content": piece}, "finish_reason": None}
                    ],
                }
            )
        chunks = self.chunks if self.chunks is not None else ([self.text] if self.text else [])
        for piece in chunks:
            out.append(
                {
                    **base,
                    "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                }
            )
        for i, call in enumerate(self.tool_calls or []):
            args = json.dumps(call.get("arguments", {}))
            half = len(args) // 2
            first = {
                "index": i,
                "id": call.get("id", f"call_{i}"),
                "type": "function",
                "function": {"name": call["name"], "arguments": args[:half]},
            }
            out.append(
                {
                    **base,
                    "choices": [
                        {"index": 0, "delta": {"tool_calls": [first]}, "finish_reason": None}
                    ],
                }
            )
            second = {"index": i, "function": {"arguments": args[half:]}}
            out.append(
                {
                    **base,
                    "choices": [
                        {"index": 0, "delta": {"tool_calls": [second]}, "finish_reason": None}
                    ],
                }
            )
        if self.finish_reason is not None:
            out.append(
                {
                    **base,
                    "choices": [{"index": 0, "delta": {}, "finish_reason": self.finish_reason}],
                }
            )
        if self.usage is not None:
            out.append({**base, "choices": [], "usage": self.usage})
        events = [json.dumps(e) for e in out]
        if self.send_done:
            events.append("[DONE]")
        return events


ScriptItem = Reply | str | Callable[[dict[str, Any]], Reply]


class FakeOpenAIServer:
    """Context manager running the fake server in a background thread."""

    def __init__(
        self, script: list[ScriptItem] | ScriptItem | None = None, *, model: str = "fake-model"
    ) -> None:
        if script is None:
            script = [Reply("fake reply")]
        self.script: list[ScriptItem] = script if isinstance(script, list) else [script]
        self.model = model
        self.requests: list[dict[str, Any]] = []
        self.disconnects = 0
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> FakeOpenAIServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        handler = _make_handler(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting --------------------------------------------------------------------------

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            index = min(len(self.requests) - 1, len(self.script) - 1)
        item = self.script[index]
        if isinstance(item, str):
            return Reply(item)
        if isinstance(item, Reply):
            return item
        return item(body)


def _make_handler(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - silence logging
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server naming
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw.decode("utf-8"))
            except ValueError:
                body = None
            with server._lock:
                server.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body}
                )
            if not self.path.endswith("/chat/completions"):
                self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                return
            reply = server._next_reply(body if isinstance(body, dict) else {})
            if reply.status != 200:
                payload = (
                    reply.error_body
                    if reply.error_body is not None
                    else {"error": {"message": "fake failure"}}
                )
                self._send_json(reply.status, payload)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for event in reply.events(server.model):
                    if reply.delay:
                        time.sleep(reply.delay)
                    self.wfile.write(f"data: {event}\n\n".encode())
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                with server._lock:
                    server.disconnects += 1
            self.close_connection = True

        def _send_json(self, status: int, payload: Any) -> None:
            data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
