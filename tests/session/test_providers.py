"""The OpenAI-compatible client against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import threading

from explorer.session.providers import (
    OpenAIChatProvider,
    map_finish_reason,
    parse_usage,
    provider_from_env,
    to_openai_messages,
)
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.session.ctx_helpers import AC, A, R, U


def _run(provider, messages, **kwargs):
    events = list(provider.stream(messages, **kwargs))
    deltas = [v for k, v in events if k == "delta"]
    done = [v for k, v in events if k == "done"]
    assert len(done) == 1
    assert events[-1][0] == "done"
    return deltas, done[0]


def test_streams_deltas_usage_and_done():
    script = Reply(
        chunks=["Hel", "lo ", "world"],
        usage={
            "prompt_tokens": 100,
            "completion_tokens": 7,
            "total_tokens": 107,
            "prompt_tokens_details": {"cached_tokens": 40},
            "completion_tokens_details": {"reasoning_tokens": 2},
        },
    )
    with FakeOpenAIServer(script) as server:
        provider = OpenAIChatProvider(
            server.base_url, "fake-model", api_key="sk-test", clock=lambda: 1234
        )
        deltas, message = _run(provider, [U("hi")], max_tokens=50)
        request = server.requests[0]
    assert deltas == ["Hel", "lo ", "world"]
    assert message == {
        "role": "assistant",
        "content": [{"type": "text", "text": "Hello world"}],
        "api": "openai-completions",
        "provider": "openai-compatible",
        "model": "fake-model",
        "usage": {
            "input": 60,
            "output": 7,
            "cacheRead": 40,
            "cacheWrite": 0,
            "reasoning": 2,
            "totalTokens": 107,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        },
        "stopReason": "stop",
        "timestamp": 1234,
    }
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    body = request["body"]
    assert body["model"] == "fake-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 50
    assert body["messages"] == [{"role": "user", "content": "hi"}]


def test_finish_reason_length_and_tool_calls():
    with FakeOpenAIServer(
        [
            Reply("cut", finish_reason="length"),
            Reply(
                "",
                tool_calls=[{"id": "c9", "name": "read", "arguments": {"path": "a.py"}}],
                finish_reason="tool_calls",
            ),
        ]
    ) as server:
        provider = OpenAIChatProvider(server.base_url, "m")
        _, first = _run(provider, [U("a")])
        _, second = _run(provider, [U("b")])
    assert first["stopReason"] == "length"
    assert first["content"] == [{"type": "text", "text": "cut"}]
    assert second["stopReason"] == "toolUse"
    assert second["content"] == [
        {"type": "toolCall", "id": "c9", "name": "read", "arguments": {"path": "a.py"}}
    ]


def test_reasoning_deltas_become_a_thinking_block():
    with FakeOpenAIServer(Reply("answer", reasoning=["let me ", "think"])) as server:
        _, message = _run(OpenAIChatProvider(server.base_url, "m"), [U("q")])
    assert message["content"] == [
        {"type": "thinking", "thinking": "let me think"},
        {"type": "text", "text": "answer"},
    ]


def test_http_error_becomes_error_message():
    with FakeOpenAIServer(
        Reply(status=401, error_body={"error": {"message": "invalid api key"}})
    ) as server:
        deltas, message = _run(OpenAIChatProvider(server.base_url, "m"), [U("q")])
    assert deltas == []
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "401 Unauthorized: invalid api key"
    assert message["content"] == []


def test_unknown_finish_reason_and_missing_finish_reason():
    with FakeOpenAIServer(
        [
            Reply("x", finish_reason="content_filter"),
            Reply("x", finish_reason=None, send_done=False, usage=None),
        ]
    ) as server:
        provider = OpenAIChatProvider(server.base_url, "m")
        _, filtered = _run(provider, [U("q")])
        _, truncated = _run(provider, [U("q")])
    assert filtered["stopReason"] == "error"
    assert filtered["errorMessage"] == "Provider finish_reason: content_filter"
    assert truncated["stopReason"] == "error"
    assert truncated["errorMessage"] == "Stream ended without finish_reason"


def test_error_event_inside_stream():
    raw = [
        '{"choices":[{"index":0,"delta":{"content":"par"}}]}',
        '{"error":{"message":"overloaded"}}',
    ]
    with FakeOpenAIServer(Reply(raw_events=raw)) as server:
        deltas, message = _run(OpenAIChatProvider(server.base_url, "m"), [U("q")])
    assert deltas == ["par"]
    assert message["stopReason"] == "error"
    assert message["errorMessage"] == "overloaded"


def test_connection_refused_is_an_error_not_an_exception():
    with FakeOpenAIServer() as server:
        url = server.base_url
    _, message = _run(OpenAIChatProvider(url, "m", timeout=5), [U("q")])
    assert message["stopReason"] == "error"
    assert message["errorMessage"]


def test_cancel_aborts_a_slow_stream():
    cancel = threading.Event()
    with FakeOpenAIServer(Reply(chunks=[f"c{i} " for i in range(200)], delay=0.05)) as server:
        provider = OpenAIChatProvider(server.base_url, "m")
        events = []
        for kind, value in provider.stream([U("q")], cancel=cancel):
            events.append((kind, value))
            if kind == "delta" and len(events) == 3:
                cancel.set()
    kinds = [k for k, _ in events]
    assert kinds[-1] == "done"
    assert kinds.count("delta") < 200
    final = events[-1][1]
    assert final["stopReason"] == "aborted"
    assert final["content"][0]["text"].startswith("c0 c1 c2")


def test_cancel_before_start_makes_no_request():
    cancel = threading.Event()
    cancel.set()
    with FakeOpenAIServer() as server:
        _, message = _run(OpenAIChatProvider(server.base_url, "m"), [U("q")], cancel=cancel)
        assert server.requests == []
    assert message["stopReason"] == "aborted"


def test_message_conversion():
    call = AC("read", {"path": "a.py"})
    unanswered = AC("bash", {"command": "ls"})
    unanswered["content"][0]["id"] = "call_2"
    failed = A("oops", stop="error")
    system = {
        "role": "system",
        "content": "base",
        "sections": {"policy": "be careful", "gone": None},
        "timestamp": 1,
    }
    image_user = U(
        [{"type": "text", "text": "see"}, {"type": "image", "data": "AAA", "mimeType": "image/png"}]
    )
    out = to_openai_messages(
        [system, U("hi"), call, R("file text"), unanswered, failed, image_user], system_prompt="SP"
    )
    assert out == [
        {"role": "system", "content": "SP"},
        {"role": "system", "content": "base\n\nbe careful"},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path":"a.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "file text"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command":"ls"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_2", "content": "No result provided"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "see"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
            ],
        },
    ]


def test_usage_and_finish_reason_mapping():
    assert parse_usage({"prompt_tokens": 10, "completion_tokens": 3})["totalTokens"] == 13
    assert parse_usage({"prompt_tokens": 10, "prompt_cache_hit_tokens": 4})["cacheRead"] == 4
    assert map_finish_reason("stop") == ("stop", None)
    assert map_finish_reason(None) == ("stop", None)
    assert map_finish_reason("function_call") == ("toolUse", None)


def test_provider_from_env():
    assert provider_from_env({}) is None
    provider = provider_from_env(
        {
            "SESSIONS_LLM_BASE_URL": "http://h:1/v1/",
            "SESSIONS_LLM_MODEL": "gpt",
            "SESSIONS_LLM_API_KEY": "k",
        }
    )
    assert provider.endpoint == "http://h:1/v1/chat/completions"
    assert (provider.model, provider.api_key) == ("gpt", "k")


def test_projection_roles_are_converted_first():
    summary = {"role": "compactionSummary", "summary": "S", "tokensBefore": 1, "timestamp": 5}
    bash = {
        "role": "bashExecution",
        "command": "ls",
        "output": "a",
        "exitCode": 0,
        "cancelled": False,
        "truncated": False,
        "excludeFromContext": True,
        "timestamp": 6,
    }
    out = to_openai_messages([summary, bash, U("go")])
    assert out[0]["role"] == "user"
    assert out[0]["content"].startswith("The conversation history before this point was compacted")
    assert out[1:] == [{"role": "user", "content": "go"}]
