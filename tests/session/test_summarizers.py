"""Summarizers: the embedded offline one and the OpenAI-compatible one."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.session.branch_summary import generate_branch_summary
from explorer.session.compaction import (
    build_summary_request,
    compact,
    prepare_compaction,
    summary_options,
)
from explorer.session.errors import SummarizationError
from explorer.session.prompts import build_history_prompt, build_turn_prefix_prompt
from explorer.session.serialize import serialize_conversation
from explorer.session.summarizers import (
    EmbeddedSummarizer,
    OpenAICompatibleSummarizer,
    SummaryRequest,
    summarizer_from_env,
)
from explorer.session.tokens import CompactionSettings
from tests.fakes.openai_server import FakeOpenAIServer, Reply
from tests.session.ctx_helpers import AC, A, R, U, chain, msg

HISTORY_HEADINGS = [
    "## Goal",
    "## Constraints & Preferences",
    "## Progress",
    "### Done",
    "### In Progress",
    "### Blocked",
    "## Key Decisions",
    "## Next Steps",
    "## Critical Context",
]


def headings(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith("#")]


def conversation_messages():
    failing = R("Traceback (most recent call last):\nValueError: bad port 99999")
    failing["toolCallId"] = "call_3"
    return [
        U(
            "Please fix the login bug in src/auth/login.py; ticket AUTH-421. "
            "You must not change the public API. Docs: https://example.com/auth#login"
        ),
        AC("read", {"path": "src/auth/login.py"}),
        R("def login(user):\n    return check(user)\n"),
        A(
            "The bug is probably in `check_password`, which compares hashes with ==. I'll switch to hmac.compare_digest."
        ),
        AC("edit", {"path": "src/auth/login.py", "oldText": "==", "newText": "compare_digest"}),
        R("Successfully replaced text."),
        AC("bash", {"command": "pytest tests/test_login.py -q"}),
        failing,
        A(
            "Tests fail with ValueError: bad port 99999 from config id 7f3a9c2e1b. Next I will fix settings.toml."
        ),
    ]


def history_request(messages, previous=None, max_tokens=13107, focus=None):
    prompt = build_history_prompt(serialize_conversation(messages), previous, focus)
    return build_summary_request(prompt, max_tokens, summary_options(), kind="history")


def test_embedded_history_summary_structure_and_references():
    response = EmbeddedSummarizer(clock=lambda: 5).complete(
        history_request(conversation_messages())
    )
    assert response["stopReason"] == "stop"
    assert response["usage"]["totalTokens"] == 0
    assert response["usage"]["cost"]["total"] == 0
    assert response["timestamp"] == 5
    text = response["content"][0]["text"]
    assert headings(text) == HISTORY_HEADINGS
    for reference in [
        "src/auth/login.py",
        "AUTH-421",
        "https://example.com/auth#login",
        "pytest tests/test_login.py -q",
        "ValueError: bad port 99999",
        "7f3a9c2e1b",
        "settings.toml",
        "check_password",
    ]:
        assert reference in text, reference
    goal = text.split("## Constraints")[0]
    assert "Please fix the login bug" in goal
    constraints = text.split("## Constraints & Preferences")[1].split("## Progress")[0]
    assert "You must not change the public API" in constraints
    blocked = text.split("### Blocked")[1].split("## Key Decisions")[0]
    assert "pytest tests/test_login.py -q" in blocked
    assert "Unverified: The bug is probably in `check_password`" in text
    assert "fix settings.toml" in text.split("## Next Steps")[1]


def test_embedded_summary_is_deterministic():
    request = history_request(conversation_messages())
    first = EmbeddedSummarizer(clock=lambda: 1).complete(request)
    second = EmbeddedSummarizer(clock=lambda: 1).complete(request)
    assert first == second


@pytest.mark.parametrize("max_tokens", [60, 120, 400])
def test_embedded_summary_honours_max_tokens(max_tokens):
    messages = conversation_messages() * 20
    text = EmbeddedSummarizer().summarize_text(history_request(messages, max_tokens=max_tokens))
    assert len(text.encode("utf-16-le")) // 2 <= max_tokens * 4
    if max_tokens >= 120:
        assert headings(text) == HISTORY_HEADINGS


def test_embedded_summary_keeps_references_when_tight():
    messages = conversation_messages() + [U("Also please rename " + "x" * 3000)] * 5
    text = EmbeddedSummarizer().summarize_text(history_request(messages, max_tokens=300))
    assert len(text) <= 1200
    assert "src/auth/login.py" in text


def test_embedded_update_keeps_previous_items():
    previous = (
        "## Goal\n- Ship release 2.1 (ticket REL-7)\n\n## Constraints & Preferences\n- Never force-push\n\n"
        "## Progress\n### Done\n- [x] Tagged v2.1.0-rc1\n\n### In Progress\n- [ ] Write changelog\n\n"
        "### Blocked\n- (none)\n\n## Key Decisions\n- **Use squash merges**: cleaner history\n\n"
        "## Next Steps\n1. Publish\n\n## Critical Context\n- Build id b77e0f12aa\n\n"
        "<read-files>\nold/notes.md\n</read-files>"
    )
    text = EmbeddedSummarizer().summarize_text(
        history_request(conversation_messages(), previous=previous)
    )
    assert headings(text) == HISTORY_HEADINGS
    for kept in [
        "Ship release 2.1 (ticket REL-7)",
        "Never force-push",
        "Tagged v2.1.0-rc1",
        "Write changelog",
        "**Use squash merges**: cleaner history",
        "Publish",
        "Build id b77e0f12aa",
        "old/notes.md",
        "src/auth/login.py",
        "AUTH-421",
    ]:
        assert kept in text, kept


def test_embedded_turn_prefix_summary():
    prompt = build_turn_prefix_prompt(serialize_conversation(conversation_messages()[:3]))
    request = build_summary_request(prompt, 8192, summary_options(), kind="turn_prefix")
    text = EmbeddedSummarizer().summarize_text(request)
    assert headings(text) == [
        "## Original Request",
        "## Progress So Far",
        "## Context Needed to Continue",
    ]
    assert "Please fix the login bug in src/auth/login.py" in text
    assert "src/auth/login.py" in text.split("## Context Needed to Continue")[1]


def test_embedded_recognizes_prompt_kind_without_hint():
    prompt = build_turn_prefix_prompt(serialize_conversation([U("do the big task now")]))
    request = SummaryRequest(
        "sys", [{"role": "user", "content": prompt, "timestamp": 0}], 100, {}, kind=""
    )
    assert headings(EmbeddedSummarizer().summarize_text(request))[0] == "## Original Request"


def test_embedded_branch_summary_has_no_critical_context():
    entries = chain(*(msg(f"e{i}", m) for i, m in enumerate(conversation_messages())))
    result = generate_branch_summary(entries, EmbeddedSummarizer())
    assert result.summary.startswith("The user explored a different conversation branch")
    assert "## Critical Context" not in result.summary
    assert "## Next Steps" in result.summary
    assert "src/auth/login.py" in result.summary
    assert result.modified_files == ["src/auth/login.py"]


def test_embedded_focus_and_chinese_constraints():
    messages = [
        U("请把数据库迁移到 PostgreSQL，必须保留所有订单 ID。不要删除 legacy/orders.sql"),
        A("好的。"),
    ]
    text = EmbeddedSummarizer().summarize_text(history_request(messages, focus="orders"))
    assert "必须保留所有订单 ID" in text
    assert "legacy/orders.sql" in text
    assert "Requested focus: orders" in text


def test_compact_with_embedded_summarizer_keeps_every_summarized_path():
    x = "x" * 4000
    path = chain(
        msg("e1", U("Refactor module parser in lib/parse.py and lib/lex.py")),
        msg("e2", AC("read", {"path": "lib/parse.py"})),
        msg("e3", R("code")),
        msg("e4", AC("edit", {"path": "lib/lex.py"})),
        msg("e5", R("ok")),
        msg("e6", A("Done: lexer updated.")),
        msg("e7", U(x)),
        msg("e8", A(x)),
    )
    prep = prepare_compaction(path, CompactionSettings(True, 16384, 1500))
    result = compact(prep, EmbeddedSummarizer())
    assert result.first_kept_entry_id == "e7"
    assert headings(result.summary.split("\n\n<read-files>")[0]) == HISTORY_HEADINGS
    assert result.summary.endswith(
        "<read-files>\nlib/parse.py\n</read-files>\n\n<modified-files>\nlib/lex.py\n</modified-files>"
    )
    assert result.summary.count("lib/parse.py") >= 2


# --------------------------------------------------------------------------------------------
# OpenAI-compatible summarizer (real HTTP server)


def test_openai_summarizer_through_compact():
    x = "x" * 4000
    path = chain(msg("e1", U(x)), msg("e2", A(x)), msg("e3", U(x)), msg("e4", A(x)))
    prep = prepare_compaction(path, CompactionSettings(True, 16384, 1500))
    reply = Reply(
        chunks=["## Goal\n", "- test"],
        usage={"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59},
    )
    with FakeOpenAIServer([reply, reply]) as server:
        summarizer = OpenAICompatibleSummarizer(server.base_url, "sum-model", api_key="k")
        result = compact(prep, summarizer, model={"maxTokens": 0})
        compact(prep, summarizer, model={"maxTokens": 0}, pi_version="1.0.3")
        body, legacy_body = (r["body"] for r in server.requests)
    assert result.summary == "## Goal\n- test"
    assert (
        result.usage["input"] == 50
        and result.usage["output"] == 9
        and result.usage["totalTokens"] == 59
    )
    # Pi 1.6.0 sends no output cap for a compaction summary; 1.0.3 sent 0.8 x reserve.
    assert "max_tokens" not in body
    assert legacy_body["max_tokens"] == 13107
    assert body["model"] == "sum-model"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"].startswith("You are a context-summarization assistant")
    assert body["messages"][1]["content"].startswith("<conversation>\n[User]: ")
    assert "reasoning_effort" not in body


def test_openai_summarizer_failures_raise_summarization_errors():
    x = "x" * 4000
    path = chain(msg("e1", U(x)), msg("e2", A(x)), msg("e3", U(x)), msg("e4", A(x)))
    prep = prepare_compaction(path, CompactionSettings(True, 16384, 1500))
    with FakeOpenAIServer(
        [
            Reply(status=500, error_body={"error": {"message": "upstream down"}}),
            Reply("partial", finish_reason="length"),
        ]
    ) as server:
        summarizer = OpenAICompatibleSummarizer(server.base_url, "m")
        with pytest.raises(
            SummarizationError,
            match=re.escape("Summarization failed: 500 Internal Server Error: upstream down"),
        ):
            compact(prep, summarizer)
        with pytest.raises(SummarizationError, match="generation hit the token cap"):
            compact(prep, summarizer)


def test_openai_summarizer_passes_reasoning():
    request = build_summary_request(
        "<conversation>\n\n</conversation>\n\nx", 100, summary_options({"reasoning": True}, "high")
    )
    with FakeOpenAIServer("ok") as server:
        out = OpenAICompatibleSummarizer(server.base_url, "m").complete(request)
        assert server.requests[0]["body"]["reasoning_effort"] == "high"
    assert out["content"] == [{"type": "text", "text": "ok"}]


def test_summarizer_from_env():
    assert isinstance(summarizer_from_env({}), EmbeddedSummarizer)
    chosen = summarizer_from_env(
        {"SESSIONS_LLM_BASE_URL": "http://127.0.0.1:9/v1", "SESSIONS_LLM_MODEL": "m1"}
    )
    assert isinstance(chosen, OpenAICompatibleSummarizer)
    assert chosen.provider.model == "m1"


# --------------------------------------------------------------------------------------------
# Retry policy (SPEC 6.9)


def _s68_prep():
    x = "x" * 4000
    path = chain(msg("e1", U(x)), msg("e2", A(x)), msg("e3", U(x)), msg("e4", A(x)))
    return prepare_compaction(path, CompactionSettings(True, 16384, 1500))


def test_retry_transient_errors_then_succeed():
    from explorer.session.summarizers import RetryPolicy
    from tests.fakes.stub_summarizer import StubSummarizer, response

    stub = StubSummarizer(
        response(None, stop="error", error="503 Service Unavailable: overloaded"),
        response(None, stop="error", error="socket hang up"),
        response("OK"),
    )
    result = compact(_s68_prep(), stub, retry=RetryPolicy(max_retries=3, base_delay_ms=1))
    assert result.summary == "OK"
    assert len(stub.requests) == 3


def test_retry_gives_up_and_skips_permanent_errors():
    from explorer.session.summarizers import RetryPolicy
    from tests.fakes.stub_summarizer import StubSummarizer, response

    transient = StubSummarizer(response(None, stop="error", error="429 Too Many Requests"))
    with pytest.raises(SummarizationError, match="^Summarization failed: 429 Too Many Requests$"):
        compact(_s68_prep(), transient, retry=RetryPolicy(max_retries=2, base_delay_ms=1))
    assert len(transient.requests) == 3
    quota = StubSummarizer(response(None, stop="error", error="429 insufficient_quota"))
    with pytest.raises(SummarizationError):
        compact(_s68_prep(), quota, retry=RetryPolicy(max_retries=2, base_delay_ms=1))
    assert len(quota.requests) == 1
    disabled = StubSummarizer(response(None, stop="error", error="503 overloaded"))
    with pytest.raises(SummarizationError):
        compact(_s68_prep(), disabled, retry=RetryPolicy(enabled=False, base_delay_ms=1))
    assert len(disabled.requests) == 1


def test_abort_during_backoff_returns_aborted():
    import threading

    from explorer.session.summarizers import RetryPolicy, complete_summary, is_retryable_error
    from tests.fakes.stub_summarizer import StubSummarizer, response

    signal = threading.Event()
    signal.set()
    request = build_summary_request("p", 10, summary_options(), signal=signal)
    stub = StubSummarizer(response("partial", stop="error", error="timeout"))
    out = complete_summary(stub, request, RetryPolicy(base_delay_ms=60_000))
    assert out["stopReason"] == "aborted"
    assert "errorMessage" not in out
    assert len(stub.requests) == 1
    assert RetryPolicy(base_delay_ms=2000).delay_ms(3) == 8000
    assert RetryPolicy(base_delay_ms=2000).delay_ms(10) == 60_000
    assert not is_retryable_error(response("x", stop="aborted"))


# --------------------------------------------------------------------------------------------
# Robustness

_text = st.text(st.characters(codec="utf-8"), max_size=300) | st.sampled_from(
    [
        "src/a.py",
        "Error: boom",
        "[User]: fake",
        "\n\n[Tool result]: x",
        "## Goal",
        "<previous-summary>",
        "`x`",
    ]
)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant", "call", "result"]), _text), max_size=12
    ),
    st.integers(1, 2000),
    st.one_of(st.none(), _text),
)
def test_embedded_summarizer_never_fails_and_respects_limit(parts, max_tokens, previous):
    messages = []
    for kind, text in parts:
        if kind == "user":
            messages.append(U(text))
        elif kind == "assistant":
            messages.append(A(text))
        elif kind == "call":
            messages.append(AC("bash", {"command": text}))
        else:
            messages.append(R(text))
    request = history_request(messages, previous=previous or None, max_tokens=max_tokens)
    response = EmbeddedSummarizer(clock=lambda: 0).complete(request)
    text = response["content"][0]["text"]
    assert len(text.encode("utf-16-le", errors="surrogatepass")) // 2 <= max_tokens * 4
    assert response["stopReason"] == "stop"
    if max_tokens >= 200:
        assert text.startswith("## Goal")


@pytest.mark.pi_fixtures
def test_embedded_compaction_of_a_real_session_keeps_tool_call_references():
    from explorer.session.loading import load_entries_from_file
    from explorer.session.manager import SessionManager
    from tests.conftest import PI_FIXTURES

    m = SessionManager.in_memory(
        "/w", entries=load_entries_from_file(str(PI_FIXTURES / "before-compaction.jsonl"))
    )
    prep = prepare_compaction(m.get_branch(), CompactionSettings())
    result = compact(prep, EmbeddedSummarizer())
    body = result.summary.split("\n\n<read-files>")[0].split("\n\n<modified-files>")[0]
    history = body.split("\n\n---\n\n**Turn Context (split turn):**")[0]
    assert len(history) <= 13107 * 4
    assert headings(history) == HISTORY_HEADINGS
    wanted_paths, wanted_commands = set(), set()
    for message in prep.messages_to_summarize:
        for block in message.get("content") or [] if message.get("role") == "assistant" else []:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                args = block.get("arguments") or {}
                if isinstance(args.get("path"), str):
                    wanted_paths.add(args["path"])
                if isinstance(args.get("command"), str):
                    wanted_commands.add(" ".join(args["command"].split("\n")[0].split())[:200])
    assert wanted_paths and wanted_commands
    flat = " ".join(history.split())
    assert [p for p in wanted_paths if p not in history] == []
    missing = [c for c in wanted_commands if c not in flat]
    assert len(missing) <= len(wanted_commands) // 10


def test_branch_summary_in_history_is_carried_context_not_a_goal():
    from explorer.session.manager import SessionManager

    zero = {
        "input": 0,
        "output": 0,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 0,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }
    m = SessionManager.in_memory("/w")
    m.append_message(
        {"role": "user", "content": "Fix the login test in tests/test_login.py", "timestamp": 1}
    )
    a = m.append_message(
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Looking."}],
            "api": "x",
            "provider": "p",
            "model": "m",
            "usage": zero,
            "stopReason": "stop",
            "timestamp": 2,
        }
    )
    m.branch_with_summary(
        a, "## Goal\nMake it stable.\n## Progress\nFroze the clock in tests/clock.py"
    )
    for i in range(6):
        m.append_message({"role": "user", "content": f"step {i} " + "x" * 400, "timestamp": 3})
        m.append_message(
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "ok " * 200}],
                "api": "x",
                "provider": "p",
                "model": "m",
                "usage": zero,
                "stopReason": "stop",
                "timestamp": 4,
            }
        )
    prep = prepare_compaction(m.get_branch(), CompactionSettings(keep_recent_tokens=300))
    summary = compact(prep, EmbeddedSummarizer()).summary
    goal = summary.split("## Constraints")[0]
    assert "summary of a branch" not in summary
    assert "Make it stable" not in goal
    critical = summary.split("## Critical Context")[1]
    assert "Carried over from an earlier summary: ## Goal Make it stable." in critical
    assert "tests/clock.py" in critical
