"""A scripted "stub model" for summary requests (SPEC section 8.0).

It answers each request with the next scripted response and records every request, so tests
can check what was asked (prompt text, maxTokens, options) as well as what was done with the
answer.
"""

from __future__ import annotations

import copy
from typing import Any

from explorer.session.summarizers import SummaryRequest


def ZERO_USAGE() -> dict[str, Any]:
    return {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }


def response(
    text: str | None = "SUMMARY",
    *,
    stop: str = "stop",
    usage: dict[str, Any] | None = None,
    error: str | None = None,
    tool_call: bool = False,
) -> dict[str, Any]:
    """An assistant response dict in the shape a summarizer returns."""
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    if tool_call:
        content.append(
            {"type": "toolCall", "id": "call_x", "name": "bash", "arguments": {"command": "ls"}}
        )
    message: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "api": "stub",
        "provider": "stub",
        "model": "stub-model",
        "usage": usage if usage is not None else ZERO_USAGE(),
        "stopReason": stop,
        "timestamp": 0,
    }
    if error is not None:
        message["errorMessage"] = error
    return message


class StubSummarizer:
    """Returns scripted responses in order (the last one repeats) and records requests."""

    def __init__(self, *responses: dict[str, Any] | str) -> None:
        self.responses = [response(r) if isinstance(r, str) else r for r in responses] or [
            response()
        ]
        self.requests: list[SummaryRequest] = []

    def complete(self, request: SummaryRequest) -> dict[str, Any]:
        self.requests.append(request)
        index = min(len(self.requests) - 1, len(self.responses) - 1)
        return copy.deepcopy(self.responses[index])

    @property
    def prompts(self) -> list[str]:
        return [r.prompt_text for r in self.requests]
