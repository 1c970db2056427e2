"""Who writes summaries: the `Summarizer` protocol and its two implementations.

`compact()` and branch summarization only build a `SummaryRequest` and classify the answer
(SPEC sections 6.8-6.10); the answer comes from a `Summarizer`. The embedded one works offline
and deterministically, so the explorer can compact any session without a model or network and
tests get stable output; the OpenAI-compatible one sends the same request to a real model.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .jsonfmt import utf16_len, utf16_slice
from .messages import (
    BRANCH_SUMMARY_PREFIX,
    BRANCH_SUMMARY_SUFFIX,
    COMPACTION_SUMMARY_PREFIX,
    COMPACTION_SUMMARY_SUFFIX,
)
from .prompts import BRANCH_INSTRUCTIONS
from .providers import OpenAIChatProvider, zero_usage
from .serialize import tolerant_content_text

__all__ = [
    "RetryPolicy",
    "complete_summary",
    "is_retryable_error",
    "EmbeddedSummarizer",
    "OpenAICompatibleSummarizer",
    "SummaryRequest",
    "Summarizer",
    "summarizer_from_env",
]

KIND_HISTORY = "history"
KIND_TURN_PREFIX = "turn_prefix"
KIND_BRANCH = "branch"


@dataclass
class SummaryRequest:
    """One summary request: the transcript (system prompt + one user message) and options.

    `options` holds what Pi passes to the model besides the transcript (`cacheRetention`,
    routing `sessionId`, `reasoning` when enabled). `kind` says which of the three requests
    this is (`history`, `turn_prefix`, `branch`) so a summarizer need not guess from wording.
    """

    system_prompt: str
    messages: list[dict[str, Any]]
    max_tokens: int | None
    options: dict[str, Any] = field(default_factory=dict)
    model: dict[str, Any] | None = None
    kind: str = KIND_HISTORY
    signal: threading.Event | None = None

    @property
    def label(self) -> str:
        """The label failures of this request are reported under (SPEC 6.10)."""
        return {
            KIND_TURN_PREFIX: "Turn prefix summarization",
            KIND_BRANCH: "Branch summarization",
        }.get(self.kind, "Summarization")

    def to_json(self) -> dict[str, Any]:
        """What is sent, in Pi's terms: system prompt, transcript and request options.

        The transcript here is the user message(s) only - the system prompt is its own key, as
        in Pi's request context. `maxTokens` appears only when the request sets an output cap
        (never since Pi 1.6.0). Nothing that is not sent (the cancel signal) is included.
        """
        options = dict(self.options)
        if self.max_tokens is not None:
            options["maxTokens"] = self.max_tokens
        return {
            "kind": self.kind,
            "label": self.label,
            "systemPrompt": self.system_prompt,
            "messages": [
                m for m in self.messages if not (isinstance(m, dict) and m.get("role") == "system")
            ],
            "options": options,
        }

    @property
    def prompt_text(self) -> str:
        """The text of the (last) user message."""
        for message in reversed(self.messages):
            if isinstance(message, dict) and message.get("role") == "user":
                return tolerant_content_text(message.get("content"))
        return ""


class Summarizer(Protocol):
    def complete(self, request: SummaryRequest) -> dict[str, Any]:
        """Return an assistant message dict (`content`, `stopReason`, `usage`, `errorMessage`?)."""
        ...


# ---------------------------------------------------------------------------------------------
# Retry (SPEC 6.9): transient provider errors are retried with backoff; aborts never are.


@dataclass(frozen=True)
class RetryPolicy:
    """Retry settings in the agent's terms (`retry.enabled`, `maxRetries`, `baseDelayMs`)."""

    enabled: bool = True
    max_retries: int = 3
    base_delay_ms: float = 2000
    max_delay_ms: float = 60_000

    def delay_ms(self, attempt: int) -> float:
        return min(self.base_delay_ms * 2 ** max(0, attempt - 1), self.max_delay_ms)


# Account limits look like throttling but do not go away by waiting.
_NOT_TRANSIENT_RE = re.compile(
    r"insufficient_quota|quota exceeded|out of budget|billing|usage limit|available balance", re.I
)
_TRANSIENT_RE = re.compile(
    r"overloaded|high demand|at capacity|rate.?limit|too many requests|\b(?:429|500|502|503|504|520|524)\b"
    r"|service.?unavailable|server.?error|internal.?error|provider.?returned.?error|network.?error"
    r"|connection.?(?:error|refused|lost|reset)|other side closed|fetch failed|getaddrinfo|ENOTFOUND"
    r"|EAI_AGAIN|upstream.?connect|socket hang up|timed? ?out|timeout|terminated|ended without"
    r"|retry your request|try your request again|ResourceExhausted|RemoteDisconnected|IncompleteRead",
    re.I,
)


def is_retryable_error(response: dict[str, Any]) -> bool:
    """Does a failed response look transient (overload, rate limit, dropped connection)?"""
    message = response.get("errorMessage")
    if response.get("stopReason") != "error" or not isinstance(message, str) or not message:
        return False
    return not _NOT_TRANSIENT_RE.search(message) and bool(_TRANSIENT_RE.search(message))


def complete_summary(
    summarizer: Summarizer,
    request: SummaryRequest,
    retry: RetryPolicy | None = None,
    *,
    sleep: Callable[[float], None] | None = None,
) -> dict[str, Any]:
    """Ask the summarizer, retrying transient errors under `retry` (none when absent/disabled).

    The last response is returned for the caller to classify; an abort - also one that
    happens while waiting to retry - is returned at once as an `aborted` response.
    """
    attempts = retry.max_retries if retry is not None and retry.enabled else 0
    attempt = 0
    while True:
        response = summarizer.complete(request)
        stop = response.get("stopReason")
        if stop != "error" or attempt >= attempts or not is_retryable_error(response):
            return response
        attempt += 1
        assert retry is not None
        delay = retry.delay_ms(attempt) / 1000
        if request.signal is not None:
            if request.signal.wait(delay):
                aborted = {k: v for k, v in response.items() if k != "errorMessage"}
                aborted["stopReason"] = "aborted"
                return aborted
        else:
            (sleep or time.sleep)(delay)


# ---------------------------------------------------------------------------------------------
# OpenAI-compatible


class OpenAICompatibleSummarizer:
    """Sends summary requests to a chat-completions server (streaming)."""

    def __init__(
        self, base_url: str, model: str, api_key: str | None = None, timeout: float = 120.0
    ) -> None:
        self.provider = OpenAIChatProvider(base_url, model, api_key, timeout=timeout)

    def complete(self, request: SummaryRequest) -> dict[str, Any]:
        reasoning = request.options.get("reasoning") if isinstance(request.options, dict) else None
        return self.provider.complete(
            request.messages,
            max_tokens=request.max_tokens,
            cancel=request.signal,
            reasoning=reasoning if isinstance(reasoning, str) else None,
        )


def summarizer_from_env(environ: dict[str, str] | None = None) -> Summarizer:
    """OpenAI-compatible when `SESSIONS_LLM_BASE_URL` is set, otherwise embedded."""
    env = os.environ if environ is None else environ
    base_url = env.get("SESSIONS_LLM_BASE_URL", "").strip()
    if base_url:
        model = env.get("SESSIONS_LLM_MODEL", "").strip() or "default"
        api_key = env.get("SESSIONS_LLM_API_KEY", "").strip() or None
        return OpenAICompatibleSummarizer(base_url, model, api_key)
    return EmbeddedSummarizer()


# ---------------------------------------------------------------------------------------------
# Embedded: reading the request back


@dataclass
class _Part:
    label: str  # "User", "Assistant", "Assistant thinking", "Assistant tool calls", "Tool result"
    text: str


@dataclass
class _Call:
    name: str
    args: dict[str, Any] | None
    raw: str


_PART_RE = re.compile(
    r"(?:\A|\n\n)\[(User|Assistant thinking|Assistant tool calls|Assistant|Tool result)\]: "
)


def _split_parts(conversation: str) -> list[_Part]:
    matches = list(_PART_RE.finditer(conversation))
    parts = []
    for i, m in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(conversation)
        parts.append(_Part(m.group(1), conversation[m.end() : end]))
    return parts


_DECODER = json.JSONDecoder()
_NAME_RE = re.compile(r"[^\s(;]*\(")
_KEY_RE = re.compile(r"([^=,()\s]+)=")


def _parse_calls(text: str) -> list[_Call]:
    """Read back `name(k=<json>, ...); name2(...)`; unparsable calls keep their raw text."""
    calls: list[_Call] = []
    pos = 0
    n = len(text)
    while pos < n:
        start = pos
        m = _NAME_RE.match(text, pos)
        if m is None:
            calls.append(_Call("", None, text[pos:]))
            break
        name = m.group(0)[:-1]
        pos = m.end()
        args: dict[str, Any] | None = {}
        while pos < n and text[pos] != ")":
            km = _KEY_RE.match(text, pos)
            if km is None:
                args = None
                break
            try:
                value, pos = _DECODER.raw_decode(text, km.end())
            except ValueError:
                args = None
                break
            args[km.group(1)] = value  # type: ignore[index]
            if text.startswith(", ", pos):
                pos += 2
        if args is None:
            nxt = text.find("; ", start)
            end = n if nxt < 0 else nxt
            calls.append(_Call(name, None, text[start:end]))
            pos = end + 2 if nxt >= 0 else n
            continue
        pos += 1  # ")"
        calls.append(_Call(name, args, text[start:pos]))
        if text.startswith("; ", pos):
            pos += 2
    return calls


@dataclass
class _Prompt:
    kind: str
    conversation: str
    previous_summary: str | None
    focus: str | None


def _parse_prompt(text: str, kind_hint: str | None) -> _Prompt:
    focus = None
    fm = re.search(r"\n\nAdditional focus: (.*)\Z", text, re.S)
    if text.startswith("# Conversation\n"):
        end = text.rfind("\n\n# Instructions\n")
        conv = text[len("# Conversation\n") : end if end >= 0 else len(text)]
        return _Prompt(KIND_TURN_PREFIX, conv, None, None)
    kind = kind_hint or (KIND_BRANCH if BRANCH_INSTRUCTIONS in text else KIND_HISTORY)
    if fm:
        focus = fm.group(1)
    previous = None
    conv_end = -1
    pe = text.rfind("\n</previous-summary>\n\n")
    if pe >= 0:
        marker = "\n</conversation>\n\n<previous-summary>\n"
        ps = text.rfind(marker, 0, pe + 1)
        if ps >= 0:
            previous = text[ps + len(marker) : pe]
            conv_end = ps
    if conv_end < 0:
        conv_end = text.rfind("\n</conversation>\n\n")
    start = len("<conversation>\n") if text.startswith("<conversation>\n") else 0
    conv = text[start:conv_end] if conv_end >= start else text[start:]
    return _Prompt(kind, conv, previous, focus)


# ---------------------------------------------------------------------------------------------
# Embedded: extraction

_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n")
_CONSTRAINT_RE = re.compile(
    r"\b(must|mustn't|don't|do not|never|always|only|should|shouldn't|prefer|avoid|without|"
    r"make sure|required|require|keep|no more than|at most|at least)\b|必须|不要|不能|不得|务必|避免|禁止|只能|保持|请勿|至少|最多",
    re.I,
)
_DECISION_RE = re.compile(
    r"\b(let's|lets|go with|decided?|decision|choose|chose|switch to|use|instead|we'll|we will|agreed?)\b|决定|选择|采用|改用|就用",
    re.I,
)
_PLAN_RE = re.compile(r"\b(I'll|I will|I'm going to|decided|chose|instead of|plan is)\b", re.I)
_DONE_RE = re.compile(
    r"\b(done|fixed|created|updated|added|removed|implemented|completed|finished|wrote|renamed|passes|passed|works)\b|完成|已修复|已创建|已更新|通过",
    re.I,
)
_BLOCK_RE = re.compile(
    r"\b(can't|cannot|unable|blocked|failed|failing|broken|stuck)\b|无法|失败|阻塞", re.I
)
_NEXT_RE = re.compile(
    r"\b(next|then|todo|to do|remaining|need to|needs to|will|should|afterwards|later)\b|接下来|下一步|然后|待办|需要",
    re.I,
)
_HEDGE_RE = re.compile(
    r"\b(probably|likely|might|may|maybe|perhaps|seems?|appears?|should work|I think|I believe|assum\w*|untested|unverified|not verified|guess)\b|可能|应该|似乎|大概|未验证|猜测",
    re.I,
)
_ERROR_LINE_RE = re.compile(
    r"^[ \t]*(?:error|fatal|panic)\b|\berror(?: TS\d+)?: |Traceback \(most recent call last\)"
    r"|(?:Error|Exception): |No such file or directory|ENOENT|EACCES|Permission denied"
    r"|command not found|[Cc]ommand exited with code [1-9]|exit code [1-9]|npm ERR!|npm error|\bFAILED\b"
    r"|错误|失败",
    re.I | re.M,
)
_BULLET_RE = re.compile(r"^(?:[-*•]|\d+[.)])\s+")
_RAN_RE = re.compile(r"^Ran `(.*?)`(?:\n|$)", re.S)

_URL_RE = re.compile(r"\bhttps?://[^\s<>\"'`)\]]+")
_PATH_RE = re.compile(
    r"(?<![\w/.-])(?:~?/)?(?:[\w.@+-]+/)+[\w.@+-]+|(?<![\w/.-])[\w@-]+(?:\.[\w-]+)*\.(?:py|js|mjs|cjs|ts|tsx|jsx|json|jsonl|md|txt|toml|yaml|yml|cfg|ini|env|html|css|sh|rs|go|java|c|h|cpp|rb|php|sql|lock|csv|xml|log)\b"
)
_ID_RE = re.compile(
    r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"
    r"|\b[A-Z][A-Z0-9]+-\d+\b"
    r"|(?<![\w#])#\d+\b"
    r"|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"
    r"|\b(?:[a-z]+_)+[A-Za-z0-9]{6,}\b",
    re.I,
)
_CODE_RE = re.compile(r"`([^`\n]{2,120})`")
_NUMBER_RE = re.compile(r"(?<![\w.])\d[\d_,]*(?:\.\d+)?(?![\w.])")
_MAX_REFS = 400  # per kind; the output limit trims further
_KEY_ARGS = (
    "path",
    "file_path",
    "filePath",
    "command",
    "cmd",
    "url",
    "pattern",
    "query",
    "id",
    "name",
    "target",
)


def _sentences(text: str) -> list[str]:
    out = []
    for s in _SENTENCE_SPLIT_RE.split(text):
        s = _BULLET_RE.sub("", s.strip()).strip()
        if s:
            out.append(s)
    return out


_TRACEBACK = "Traceback (most recent call last):"
# Every alternative of _ERROR_LINE_RE contains one of these; checking them first is much
# cheaper than running the case-insensitive pattern over every tool output.
_ERROR_WORDS = (
    "error",
    "fatal",
    "panic",
    "traceback",
    "exception",
    "no such file",
    "enoent",
    "eacces",
    "permission denied",
    "command not found",
    "exit",
    "failed",
    "npm err",
    "错误",
    "失败",
)


def _error_line(text: str, first_line_only: bool) -> str:
    """The error text of a tool output: its first error line and, if different, its last one
    (a traceback ends with the exception that names the failure)."""
    if first_line_only:
        text = text.lstrip()
        cut = text.find("\n")
        text = text if cut < 0 else text[:cut]
    lowered = text.lower()
    if not any(word in lowered for word in _ERROR_WORDS):
        return ""
    found: list[str] = []
    for m in _ERROR_LINE_RE.finditer(text):
        start = text.rfind("\n", 0, m.start()) + 1
        end = text.find("\n", m.end())
        line = text[start : len(text) if end < 0 else end].strip()
        if line and (not found or found[-1] != line):
            found.append(line)
    informative = [ln for ln in found if ln != _TRACEBACK] or found
    if not informative:
        return ""
    first, last = informative[0], informative[-1]
    return first if first == last else f"{first} … {last}"


def _first_line(text: str) -> str:
    for line in text.split("\n"):
        if line.strip():
            return line.strip()
    return ""


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if utf16_len(text) <= limit:
        return text
    return utf16_slice(text, 0, max(0, limit - 1)).rstrip() + "…"


def _call_label(call: _Call, limit: int = 240) -> str:
    if call.args is None:
        return f"`{_clip(call.raw, limit)}`"
    keys = [k for k in _KEY_ARGS if k in call.args] or list(call.args)[:2]
    inner = ", ".join(f"{k}={json.dumps(call.args[k], ensure_ascii=False)}" for k in keys)
    return f"`{_clip(f'{call.name}({inner})', limit)}`"


class _UniqueList(list):
    """A list that ignores items it already holds (in constant time)."""

    def __init__(self, items: Any = ()) -> None:
        super().__init__(items)
        self._seen = set(self)

    def add(self, item: str) -> None:
        if item not in self._seen:
            self._seen.add(item)
            self.append(item)


def _add_unique(target: Any, item: str) -> None:
    """Append once; the reference kinds (dicts) are also capped in number."""
    if not item:
        return
    if isinstance(target, dict):
        if len(target) < _MAX_REFS:
            target[item] = None
    elif isinstance(target, _UniqueList):
        target.add(item)
    elif item not in target:
        target.append(item)


class _Ref(str):
    """An item quoted verbatim: dropped whole when space runs out, never shortened."""


@dataclass
class _Facts:
    goals: list[str] = field(default_factory=_UniqueList)
    constraints: list[str] = field(default_factory=_UniqueList)
    done: list[str] = field(default_factory=_UniqueList)
    in_progress: list[str] = field(default_factory=_UniqueList)
    blocked: list[str] = field(default_factory=_UniqueList)
    decisions: list[str] = field(default_factory=_UniqueList)
    next_steps: list[str] = field(default_factory=_UniqueList)
    files: dict[str, None] = field(default_factory=dict)
    commands: dict[str, None] = field(default_factory=dict)
    refs: dict[str, None] = field(default_factory=dict)
    urls: dict[str, None] = field(default_factory=dict)
    numbers: dict[str, None] = field(default_factory=dict)
    errors: list[str] = field(default_factory=_UniqueList)
    unverified: list[str] = field(default_factory=_UniqueList)
    carried: list[str] = field(default_factory=_UniqueList)
    last_request: str = ""


def _carried_summary(text: str) -> str | None:
    """The body of a branch or compaction summary that reached the model as a user message.

    Such a message is context handed down from earlier work, not a request: it must not become
    the goal or the open item of the new summary. Its body is flattened to one line so that
    its own headings cannot be mistaken for sections of ours.
    """
    for prefix, suffix in (
        (BRANCH_SUMMARY_PREFIX, BRANCH_SUMMARY_SUFFIX),
        (COMPACTION_SUMMARY_PREFIX, COMPACTION_SUMMARY_SUFFIX),
    ):
        if text.startswith(prefix):
            body = text[len(prefix) :]
            body = body[: -len(suffix)] if body.endswith(suffix) else body
            return " ".join(body.split())
    return None


def _full(target: dict[str, None]) -> bool:
    return len(target) >= _MAX_REFS


def _collect_refs(text: str, facts: _Facts) -> None:
    if _full(facts.refs) and _full(facts.files) and _full(facts.urls):
        return
    if "://" in text:
        for url in _URL_RE.findall(text):
            _add_unique(facts.urls, url.rstrip(".,;:"))
    if not _full(facts.refs):
        for span in _CODE_RE.findall(text):
            _add_unique(facts.refs, span)
    stripped = _URL_RE.sub(" ", text) if "://" in text else text
    if not _full(facts.files):
        for path in _PATH_RE.findall(stripped):
            if "/" in path or "." in path:
                _add_unique(facts.files, path.rstrip(".,;:"))
    if not _full(facts.refs):
        for ident in _ID_RE.findall(stripped):
            _add_unique(facts.refs, ident)


def _collect_numbers(text: str, facts: _Facts) -> None:
    """Numbers that carry information (three or more digits, or a decimal)."""
    if _full(facts.numbers):
        return
    scrubbed = _PATH_RE.sub(" ", _URL_RE.sub(" ", text) if "://" in text else text)
    for m in _NUMBER_RE.finditer(scrubbed):
        value = m.group(0).rstrip(",")
        digits = value.replace(",", "").replace("_", "")
        if "." in digits or len(digits) >= 3:
            _add_unique(facts.numbers, value)


def _extract(parts: list[_Part]) -> _Facts:
    facts = _Facts()
    pending_calls: list[_Call] = []
    last_label = ""
    for part in parts:
        text = part.text
        if part.label == "User":
            carried = _carried_summary(text)
            if carried is not None:
                if carried:
                    _add_unique(facts.carried, _clip(carried, 600))
                _collect_refs(carried, facts)
                _collect_numbers(carried, facts)
                last_label = part.label
                continue
            ran = _RAN_RE.match(text)
            if ran:
                # A shell command the user ran directly: a command and maybe an error, no goal.
                _add_unique(facts.commands, _clip(ran.group(1), 300))
                error = _error_line(text[ran.end() :], False)
                if error:
                    _add_unique(facts.errors, _clip(error, 300))
                _collect_refs(text, facts)
                last_label = part.label
                continue
            _collect_numbers(text, facts)
            request = _clip(text, 400)
            if utf16_len(request) >= 12 or _PATH_RE.search(request) or _URL_RE.search(request):
                _add_unique(facts.goals, request)
            facts.last_request = request
            for s in _sentences(text):
                if _CONSTRAINT_RE.search(s):
                    _add_unique(facts.constraints, _clip(s, 300))
                elif _DECISION_RE.search(s):
                    _add_unique(facts.decisions, f"**User decision**: {_clip(s, 300)}")
            _collect_refs(text, facts)
        elif part.label == "Assistant":
            for s in _sentences(text):
                if _HEDGE_RE.search(s):
                    _add_unique(facts.unverified, _clip(s, 300))
                elif _BLOCK_RE.search(s):
                    _add_unique(facts.blocked, _clip(s, 300))
                elif _DONE_RE.search(s):
                    _add_unique(facts.done, f"[x] {_clip(s, 300)}")
                elif _PLAN_RE.search(s):
                    _add_unique(facts.decisions, f"**Assistant plan**: {_clip(s, 300)}")
                if _NEXT_RE.search(s):
                    _add_unique(facts.next_steps, _clip(s, 300))
            _collect_refs(text, facts)
            _collect_numbers(text, facts)
        elif part.label == "Assistant tool calls":
            calls = _parse_calls(text)
            for call in calls:
                if call.args is not None:
                    for key in ("path", "file_path", "filePath"):
                        value = call.args.get(key)
                        if isinstance(value, str) and value:
                            _add_unique(facts.files, value)
                    for key in ("command", "cmd"):
                        value = call.args.get(key)
                        if isinstance(value, str) and value:
                            _add_unique(facts.commands, _clip(value, 300))
                    value = call.args.get("url")
                    if isinstance(value, str) and value:
                        _add_unique(facts.urls, value)
                    value = call.args.get("id")
                    if isinstance(value, str) and value:
                        _add_unique(facts.refs, value)
                else:
                    _collect_refs(call.raw, facts)
            # Calls left without a result stay "done" (their results may simply be truncated).
            for call in pending_calls:
                _add_unique(facts.done, f"[x] {_call_label(call)}")
            pending_calls = list(calls)
        elif part.label == "Tool result":
            call = pending_calls.pop(0) if pending_calls else None  # type: ignore[assignment]
            error = _error_line(text, call is not None and call.name == "read")
            if error:
                err = _clip(error, 300)
                _add_unique(facts.errors, err)
                label = _call_label(call) if call else "a tool call"
                _add_unique(facts.blocked, f"{label} failed: {err}")
            elif call is not None:
                _add_unique(facts.done, f"[x] {_call_label(call)}")
            _collect_refs(text[:2000], facts)
            _collect_numbers(text[:2000], facts)
        last_label = part.label
    for call in pending_calls:
        _add_unique(facts.in_progress, f"[ ] {_call_label(call)} (no result seen)")
    if facts.last_request:
        if last_label == "Assistant":
            _add_unique(facts.done, f"[x] Answered: {_clip(facts.last_request, 200)}")
        else:
            _add_unique(facts.in_progress, f"[ ] {_clip(facts.last_request, 300)}")
    return facts


# ---------------------------------------------------------------------------------------------
# Embedded: previous summaries

_SECTION_ALIASES = {
    "goal": "goal",
    "original request": "goal",
    "constraints & preferences": "constraints",
    "done": "done",
    "progress so far": "done",
    "in progress": "in_progress",
    "blocked": "blocked",
    "key decisions": "decisions",
    "next steps": "next_steps",
    "critical context": "context",
    "context needed to continue": "context",
}


_REF_ITEM_RE = re.compile(r"(?:\*\*Reference\*\*: )?(?:File|Command|URL|Ref|Numbers): ")


def _parse_previous(summary: str) -> dict[str, list[str]]:
    """Items of an earlier summary by section, so an update can keep all of them."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    in_tags = False
    for raw in summary.split("\n"):
        line = raw.strip()
        if line in ("<read-files>", "<modified-files>"):
            in_tags = True
            continue
        if line in ("</read-files>", "</modified-files>"):
            in_tags = False
            continue
        if in_tags:
            sections.setdefault("files", []).append(_Ref(f"File: `{line}`"))
            continue
        heading = re.match(r"#{2,3}\s+(.*)", line)
        if heading:
            current = _SECTION_ALIASES.get(heading.group(1).strip().lower())
            continue
        if (
            not line
            or line.startswith("```")
            or line
            in ("---", "**Turn Context (split turn):**", "No prior history.", "(none)", "- (none)")
        ):
            continue
        if line.startswith("## Progress"):
            continue
        item = re.sub(r"^(?:[-*]|\d+\.)\s+", "", line)
        if _REF_ITEM_RE.match(item):
            item = _Ref(item)
        sections.setdefault(current or "context", []).append(item)
    return sections


# ---------------------------------------------------------------------------------------------
# Embedded: rendering within the output limit


@dataclass
class _Section:
    heading: str
    items: list[str]
    style: str = "-"  # "-" bullets, "1." numbered, "text" plain lines
    empty: str = "(none)"
    keep: int = 1  # items never dropped when shrinking
    priority: int = 1  # higher survives longer
    clip: bool = True
    drop_from_end: bool = False  # the first items matter most (next steps, references)


def _lines(sec: _Section, item_limit: int | None) -> list[str]:
    limit = item_limit if sec.clip else None
    items = [(_clip(i, limit) if limit and not isinstance(i, _Ref) else i) for i in sec.items]
    if not items and sec.style != "none":
        items = [sec.empty]
    out = [sec.heading] if sec.heading else []
    for n, item in enumerate(items, 1):
        if sec.style == "1.":
            out.append(f"{n}. {item}")
        elif sec.style in ("text", "none"):
            out.append(item)
        else:
            out.append(f"- {item}")
    out.append("")
    return out


def _render(sections: list[_Section], item_limit: int | None) -> str:
    return "\n".join(line for sec in sections for line in _lines(sec, item_limit)).rstrip("\n")


def _fit(sections: list[_Section], max_chars: int | None) -> str:
    text = _render(sections, None)
    if not max_chars or utf16_len(text) <= max_chars:
        return text
    for limit in (400, 240, 160, 100):
        text = _render(sections, limit)
        if utf16_len(text) <= max_chars:
            return text
    # Drop items from the least important, then longest, sections (oldest first, except for
    # the next steps, where the first ones matter most). The length is kept incrementally;
    # the text is rendered again once at the end.
    total = utf16_len(text)
    while total > max_chars:
        candidates = [s for s in sections if len(s.items) > s.keep]
        if not candidates:
            break
        victim = min(candidates, key=lambda s: (s.priority, -len(s.items)))
        before = (
            sum(utf16_len(line) + 1 for line in _lines(victim, 100)) if victim.style == "1." else 0
        )
        index = len(victim.items) - 1 if victim.drop_from_end else 0
        removed = victim.items.pop(index)
        if victim.style == "1.":
            total -= before - sum(utf16_len(line) + 1 for line in _lines(victim, 100))
        else:
            shown = removed if not victim.clip or isinstance(removed, _Ref) else _clip(removed, 100)
            total -= utf16_len(shown) + (1 if victim.style in ("text", "none") else 3)
            if not victim.items and victim.style != "none":
                total += utf16_len(victim.empty) + 3
    text = _render(sections, 100)
    for limit in (80, 60, 40, 30, 20):
        if utf16_len(text) <= max_chars:
            break
        text = _render(sections, limit)
    if utf16_len(text) > max_chars:
        text = utf16_slice(text, 0, max(0, max_chars - 1)).rstrip() + "…"
    return text


def _merge(previous: list[str], new: list[str]) -> list[str]:
    return [item for item in dict.fromkeys([*previous, *new]) if item]


class EmbeddedSummarizer:
    """Offline, deterministic summarizer that extracts the checkpoint from the messages.

    It is no model: it reads the serialized conversation back out of the request and lists
    the user's goals and constraints, what was done and what failed, decisions, next steps and
    - verbatim - every file path, command, URL, id and error line it finds, under the headings
    the request asks for. References are what a later turn most needs and what a prose summary
    most often loses, so they are the last thing dropped when the output limit is tight.
    """

    api = "embedded"
    provider = "embedded"
    model = "embedded-summarizer"

    # A model stops at its own output limit; with no cap in the request and no model limit
    # (the default since Pi 1.6.0), the embedded summarizer stops here so a summary stays much
    # smaller than the context it replaces.
    DEFAULT_MAX_TOKENS = 13107

    def __init__(
        self, clock: Callable[[], float] | None = None, default_max_tokens: int | None = None
    ) -> None:
        self._clock = clock
        self._default_max_tokens = (
            self.DEFAULT_MAX_TOKENS if default_max_tokens is None else default_max_tokens
        )

    def summarize_text(self, request: SummaryRequest) -> str:
        prompt = _parse_prompt(request.prompt_text, request.kind if request.kind else None)
        facts = _extract(_split_parts(prompt.conversation))
        cap = request.max_tokens
        if cap is None and request.model:
            # No cap in the request (Pi 1.6.0): the model's own output limit applies, as at a provider.
            cap = request.model.get("maxTokens")
        if cap is None or (isinstance(cap, (int, float)) and cap <= 0):
            cap = self._default_max_tokens
        limit = cap * 4 if isinstance(cap, int) and not isinstance(cap, bool) and cap > 0 else None
        if prompt.kind == KIND_TURN_PREFIX:
            sections = self._prefix_sections(facts)
        else:
            prev = _parse_previous(prompt.previous_summary) if prompt.previous_summary else {}
            sections = self._history_sections(
                facts, prev, prompt.focus, branch=prompt.kind == KIND_BRANCH
            )
        return _fit(sections, limit)

    def complete(self, request: SummaryRequest) -> dict[str, Any]:
        text = self.summarize_text(request)
        now = self._clock() if self._clock is not None else time.time() * 1000
        return {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "api": self.api,
            "provider": self.provider,
            "model": self.model,
            "usage": zero_usage(),
            "stopReason": "stop",
            "timestamp": int(now),
        }

    @staticmethod
    def _reference_items(facts: _Facts) -> list[str]:
        """One item per reference, most important kinds first (the last are dropped first)."""
        items: list[str] = []
        items.extend(_Ref(f"File: `{f}`") for f in facts.files)
        items.extend(_Ref(f"Command: `{c}`") for c in facts.commands)
        items.extend(_Ref(f"URL: {u}") for u in facts.urls)
        items.extend(f"Error seen: {err}" for err in facts.errors)
        items.extend(f"Unverified: {s}" for s in facts.unverified)
        items.extend(_Ref(f"Ref: `{r}`") for r in facts.refs)
        numbers = list(facts.numbers)
        for i in range(0, len(numbers), 12):
            items.append(_Ref("Numbers: " + ", ".join(numbers[i : i + 12])))
        return items

    def _history_sections(
        self, facts: _Facts, prev: dict[str, list[str]], focus: str | None, *, branch: bool
    ) -> list[_Section]:
        p = prev.get
        next_steps = list(facts.next_steps[-3:])
        if facts.in_progress:
            next_steps.append("Continue: " + re.sub(r"^\[ \] ", "", facts.in_progress[-1]))
        for s in facts.unverified[:2]:
            next_steps.append(f"Verify: {_clip(s, 200)}")
        context = [f"Carried over from an earlier summary: {c}" for c in facts.carried]
        context.extend(self._reference_items(facts))
        if focus:
            context.insert(0, f"Requested focus: {focus}")
        done = _merge([d if d.startswith("[x]") else f"[x] {d}" for d in p("done", [])], facts.done)
        in_progress = (
            _merge(p("in_progress", []), facts.in_progress)
            if not facts.goals
            else facts.in_progress
        )
        if prev and facts.goals:
            # Earlier open items that the new messages did not close stay visible.
            in_progress = _merge(
                [i for i in p("in_progress", []) if i.replace("[ ] ", "[x] ") not in done],
                facts.in_progress,
            )
        sections = [
            _Section("## Goal", _merge(p("goal", []), facts.goals), style="-", keep=1, priority=3),
            _Section(
                "## Constraints & Preferences",
                _merge(p("constraints", []), facts.constraints),
                priority=3,
            ),
            _Section("## Progress", [], style="none", keep=0),
            _Section("### Done", done, empty="[x] (nothing completed yet)", priority=2),
            _Section("### In Progress", in_progress, empty="[ ] (none)", priority=2),
            _Section("### Blocked", _merge(p("blocked", []), facts.blocked), priority=2),
            _Section(
                "## Key Decisions",
                _merge(p("decisions", []), facts.decisions),
                empty="(none)",
                priority=1,
            ),
            _Section(
                "## Next Steps",
                _merge(p("next_steps", []), next_steps) or ["Continue with the latest request."],
                style="1.",
                priority=1,
                drop_from_end=True,
            ),
        ]
        if branch:
            # The branch format has no critical-context section; references go with the
            # decisions, one item each, so none is cut in half.
            sections[6].priority = 3
            for item in context:
                sections[6].items.append(
                    _Ref(f"**Reference**: {item}")
                    if isinstance(item, _Ref)
                    else f"**Note**: {item}"
                )
        else:
            sections.append(
                _Section(
                    "## Critical Context",
                    # New references first: under a tight limit the oldest context goes first.
                    _merge(context, p("context", []) + p("files", [])),
                    keep=4,
                    priority=4,
                    drop_from_end=True,
                )
            )
        return sections

    def _prefix_sections(self, facts: _Facts) -> list[_Section]:
        request = facts.goals[0] if facts.goals else "(no user request in this part)"
        progress = (
            facts.done
            + [f"Blocked: {b}" for b in facts.blocked]
            + [f"Decision: {d}" for d in facts.decisions]
        )
        progress += [i for i in facts.in_progress if "(no result seen)" in i]
        return [
            _Section("## Original Request", [request], style="text", keep=1, priority=5),
            _Section("## Progress So Far", progress, priority=2),
            _Section(
                "## Context Needed to Continue",
                self._reference_items(facts),
                keep=3,
                priority=4,
                drop_from_end=True,
            ),
        ]
