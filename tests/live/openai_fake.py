"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions streaming protocol.

Each request is answered from a script: the text pieces to stream (one SSE chunk each), a
pause between pieces, the usage to report, and optionally a gate the stream waits on before
each piece (so a test can hold a turn open to try a second one or to cancel it).
Runs in-process (``FakeOpenAI``) or as a script for tests that start daphne as a subprocess:
``python -m tests.live.openai_fake PORTFILE [pieces...]``.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Script:
    pieces: list[str] = field(default_factory=lambda: ["Hello", ", ", "world", "!"])
    delay: float = 0.0
    prompt_tokens: int = 1000
    completion_tokens: int = 20
    cached_tokens: int = 0
    finish_reason: str = "stop"
    gate: threading.Event | None = None  # stream waits for it before every piece


class FakeOpenAI:
    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script()
        self.requests: list[dict] = []
        self.disconnects = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server API
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                fake.requests.append({"path": self.path, "body": body,
                                      "auth": self.headers.get("Authorization")})
                if not self.path.endswith("/chat/completions"):
                    self.send_error(404)
                    return
                script = fake.script
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                try:
                    for i, piece in enumerate(script.pieces):
                        if script.gate is not None:
                            script.gate.wait(30)
                        if script.delay:
                            time.sleep(script.delay)
                        chunk = {
                            "id": "chatcmpl-fake", "object": "chat.completion.chunk",
                            "model": body.get("model", "fake"),
                            "choices": [{"index": 0, "delta": (
                                {"role": "assistant", "content": piece} if i == 0
                                else {"content": piece}), "finish_reason": None}],
                        }
                        self._event(chunk)
                    self._event({"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                                 "choices": [{"index": 0, "delta": {},
                                              "finish_reason": script.finish_reason}]})
                    self._event({"id": "chatcmpl-fake", "object": "chat.completion.chunk",
                                 "choices": [], "usage": {
                                     "prompt_tokens": script.prompt_tokens,
                                     "completion_tokens": script.completion_tokens,
                                     "total_tokens": script.prompt_tokens + script.completion_tokens,
                                     "prompt_tokens_details": {"cached_tokens": script.cached_tokens},
                                 }})
                    self.wfile.write(b"data: [DONE]\n\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    fake.disconnects += 1
                self.close_connection = True

            def _event(self, payload: dict) -> None:
                self.wfile.write(b"data: " + json.dumps(payload).encode() + b"\n\n")
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.script.gate is not None:
            self.script.gate.set()
        self.server.shutdown()
        self.server.server_close()


def main(argv: list[str]) -> None:
    """Serve until killed; write the base URL to ``argv[0]``. Options: ``--delay=S``,
    ``--prompt-tokens=N``; the remaining arguments are the pieces to stream."""
    portfile, rest = argv[0], argv[1:]
    script = Script()
    pieces = []
    for arg in rest:
        if arg.startswith("--delay="):
            script.delay = float(arg.split("=", 1)[1])
        elif arg.startswith("--prompt-tokens="):
            script.prompt_tokens = int(arg.split("=", 1)[1])
        else:
            pieces.append(arg)
    if pieces:
        script.pieces = pieces
    fake = FakeOpenAI(script)
    with fake:
        with open(portfile + ".tmp", "w") as fh:
            fh.write(fake.base_url)
        import os

        os.replace(portfile + ".tmp", portfile)
        threading.Event().wait()


if __name__ == "__main__":
    main(sys.argv[1:])
