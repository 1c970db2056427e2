"""A generated Pi session seeded with one fake secret of each kind in every kind of place.

The secrets are random (seeded) strings in each vendor's format, never real credentials.
`SEEDED` lists (kind, secret, line index, JSON pointer) so tests can check each one.
"""

from __future__ import annotations

import base64
import random
import string
from dataclasses import dataclass
from typing import Any

from explorer.session import jsonfmt

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits


@dataclass(frozen=True)
class Seed:
    kind: str
    secret: str
    line: int  # index in the file's lines (0 is the header)
    path: str  # JSON pointer of the string inside that line's entry


def make_secrets(seed: int = 14) -> dict[str, str]:
    """One fake secret per kind (values only; the surrounding text is added by the session)."""
    rnd = random.Random(seed)

    def r(n: int, alphabet: str = ALNUM) -> str:
        return "".join(rnd.choice(alphabet) for _ in range(n))

    body = "\n".join(r(64, ALNUM + "+/") for _ in range(6))
    return {
        "aws-access-key": "AKIA" + r(16, UPPER_DIGITS),
        "aws-secret-key": r(20, ALNUM) + "/" + r(19, ALNUM + "+"),
        "github-token": "ghp_" + r(36),
        "gitlab-token": "glpat-" + r(20, ALNUM + "_-"),
        "openai-api-key": "sk-proj-" + r(58, ALNUM) + "T3BlbkFJ" + r(58, ALNUM),
        "anthropic-api-key": "sk-ant-api03-" + r(93, ALNUM + "_-") + "AA",
        "slack-token": "xoxb-" + r(11, string.digits) + "-" + r(12, string.digits) + "-" + r(24),
        "slack-webhook": "https://hooks.slack.com/services/T"
        + r(8, UPPER_DIGITS)
        + "/B"
        + r(8, UPPER_DIGITS)
        + "/"
        + r(24),
        "stripe-key": "sk_live_" + r(24),
        "google-api-key": "AIza" + r(35, ALNUM + "_-"),
        "private-key": "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        + body
        + "\n-----END OPENSSH PRIVATE KEY-----",
        "jwt": "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkFuYSJ9."
        + r(43, ALNUM + "_-"),
        "url-credentials": r(16),
        "generic-secret": r(32, ALNUM),
        "bearer-token": r(40, ALNUM),
        "huggingface-token": "hf_" + r(34, string.ascii_letters),
        "npm-token": "npm_" + r(36),
        "basic-auth": base64.b64encode(f"deploy:{r(16)}".encode()).decode(),
    }


# A base64 blob standing in for image bytes: it deliberately contains token-like text, which
# must stay as it is because image data is never scanned.
IMAGE_DATA = "iVBORw0KGgo" + "AKIAABCDEFGHIJKLMNOP" + "ghp_" + "Q" * 36 + "AAAA"
# Provider signatures are opaque and must never change, even when they look like a key.
SIGNATURE = "EqQBCkYIBxgCKkB/" + "sk-ant-api03-" + "S" * 93 + "AA" + "=="


def _ts(n: int) -> str:
    return jsonfmt.iso_from_ms(1_741_064_767_000 + n * 1000)


def build_session(seed: int = 14) -> tuple[bytes, list[Seed], dict[str, str]]:
    """(file bytes, where each secret was put, the secrets)."""
    s = make_secrets(seed)
    lines: list[dict[str, Any]] = []
    seeds: list[Seed] = []
    counter = iter(range(1, 1000))

    def add(entry: dict[str, Any]) -> str:
        n = next(counter)
        eid = f"{n:08x}"
        parent = lines[-1]["id"] if len(lines) > 1 else None
        lines.append(
            {"type": entry.pop("type"), "id": eid, "parentId": parent, "timestamp": _ts(n), **entry}
        )
        return eid

    def put(kind: str, path: str) -> None:
        seeds.append(Seed(kind, s[kind], len(lines) - 1, path))

    lines.append(
        {
            "type": "session",
            "version": 3,
            "id": "0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a2b",
            "timestamp": _ts(0),
            "cwd": "/home/ana/proj",
        }
    )
    # user message, string content: AWS access key
    first = add(
        {
            "type": "message",
            "message": {
                "role": "user",
                "content": f"deploy with key {s['aws-access-key']} please",
                "timestamp": 1,
            },
        }
    )
    put("aws-access-key", "/message/content")
    # user message with text and image blocks: image alt text holds a Google API key
    add(
        {
            "type": "message",
            "message": {
                "role": "user",
                "content": [
                    {"type": "text", "text": "here is a screenshot of the console"},
                    {
                        "type": "image",
                        "data": IMAGE_DATA,
                        "mimeType": "image/png",
                        "alt": f"console showing {s['google-api-key']}",
                    },
                ],
                "timestamp": 2,
            },
        }
    )
    put("google-api-key", "/message/content/1/alt")
    # assistant: thinking (with a signature), text, and two tool calls
    usage = {
        "input": 10,
        "output": 5,
        "cacheRead": 0,
        "cacheWrite": 0,
        "totalTokens": 15,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
    }
    add(
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [
                    {
                        "type": "thinking",
                        "thinking": f"The user pasted {s['anthropic-api-key']} earlier.",
                        "thinkingSignature": SIGNATURE,
                    },
                    {
                        "type": "text",
                        "text": f"I will use the Slack webhook {s['slack-webhook']} to notify.",
                        "textSignature": SIGNATURE,
                    },
                    {
                        "type": "toolCall",
                        "id": "call_1",
                        "name": "bash",
                        "arguments": {
                            "command": f"curl -H 'Authorization: Bearer {s['bearer-token']}' https://api.example.com/v1"
                        },
                        "thoughtSignature": SIGNATURE,
                    },
                    {
                        "type": "toolCall",
                        "id": "call_2",
                        "name": "write",
                        "arguments": {
                            "path": ".env",
                            "env": {
                                "STRIPE_KEY": s["stripe-key"],
                                "API_SECRET": s["generic-secret"],
                            },
                        },
                    },
                ],
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "usage": usage,
                "stopReason": "toolUse",
                "timestamp": 3,
            },
        }
    )
    put("anthropic-api-key", "/message/content/0/thinking")
    put("slack-webhook", "/message/content/1/text")
    put("bearer-token", "/message/content/2/arguments/command")
    put("stripe-key", "/message/content/3/arguments/env/STRIPE_KEY")
    put("generic-secret", "/message/content/3/arguments/env/API_SECRET")
    # tool result: a file read that shows a private key and an AWS secret key
    add(
        {
            "type": "message",
            "message": {
                "role": "toolResult",
                "toolCallId": "call_1",
                "toolName": "bash",
                "content": [{"type": "text", "text": f"id_ed25519:\n{s['private-key']}\n"}],
                "details": {"stdout": f"aws_secret_access_key = {s['aws-secret-key']}\n"},
                "isError": False,
                "timestamp": 4,
            },
        }
    )
    put("private-key", "/message/content/0/text")
    put("aws-secret-key", "/message/details/stdout")
    # bash execution the user ran: credentials in a URL
    add(
        {
            "type": "message",
            "message": {
                "role": "bashExecution",
                "command": f"psql postgres://admin:{s['url-credentials']}@db.internal:5432/app",
                "output": f"> Authorization: Basic {s['basic-auth']}\npsql (16.4)",
                "exitCode": 0,
                "cancelled": False,
                "truncated": False,
                "timestamp": 5,
            },
        }
    )
    put("url-credentials", "/message/command")
    put("basic-auth", "/message/output")
    # label on the first entry holds a GitHub token
    add({"type": "label", "targetId": first, "label": f"leaked {s['github-token']}"})
    put("github-token", "/label")
    # session name holds a GitLab token
    add({"type": "session_info", "name": f"rotate {s['gitlab-token']}"})
    put("gitlab-token", "/name")
    # extension state: a Slack token deep in custom data
    add(
        {
            "type": "custom",
            "customType": "notes",
            "data": {"items": [{"note": f"bot token {s['slack-token']}"}]},
        }
    )
    put("slack-token", "/data/items/0/note")
    # custom message shown to the model: a JWT
    add(
        {
            "type": "custom_message",
            "customType": "session",
            "content": f"cookie={s['jwt']}",
            "display": True,
        }
    )
    put("jwt", "/content")
    # compaction summary: an OpenAI key
    add(
        {
            "type": "compaction",
            "summary": f"Set OPENAI key {s['openai-api-key']} in the CI settings.",
            "firstKeptEntryId": first,
            "tokensBefore": 1000,
        }
    )
    put("openai-api-key", "/summary")
    # branch summary: a Hugging Face token
    add(
        {
            "type": "branch_summary",
            "fromId": first,
            "summary": f"tried hf {s['huggingface-token']} there",
        }
    )
    put("huggingface-token", "/summary")
    # final assistant message: npm token in plain text
    add(
        {
            "type": "message",
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": f"Published with {s['npm-token']}."}],
                "api": "anthropic-messages",
                "provider": "anthropic",
                "model": "claude-sonnet-4-5",
                "usage": usage,
                "stopReason": "stop",
                "timestamp": 6,
            },
        }
    )
    put("npm-token", "/message/content/0/text")
    data = "".join(jsonfmt.dumps(line) + "\n" for line in lines).encode("utf-8")
    return data, seeds, s


_CONTEXT = {
    "aws-secret-key": "aws_secret_access_key = {}",
    "url-credentials": "postgres://app:{}@db.internal/app",
    "bearer-token": "Authorization: Bearer {}",
    "basic-auth": "Authorization: Basic {}",
    "generic-secret": 'API_TOKEN="{}"',
}


def in_context(kind: str, secret: str) -> str:
    """The secret as it appears in text: a few kinds are only secrets next to their name."""
    return _CONTEXT.get(kind, "{}").format(secret)
