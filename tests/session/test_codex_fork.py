"""pi_form.fork_branch: a Codex fork's own entries as a branch of its parent's tree."""

from __future__ import annotations

import json

from explorer.session.formats import load_foreign_bytes
from explorer.session.formats.pi_form import fork_branch

PARENT = "019a2000-0000-7000-8000-00000000aaaa"
FORK = "019a2000-0000-7000-8000-00000000bbbb"


def _line(kind: str, payload: dict, second: int) -> bytes:
    record = {"timestamp": f"2026-10-12T10:00:{second:02d}.000Z", "type": kind, "payload": payload}
    return json.dumps(record).encode() + b"\n"


def _msg(role: str, text: str) -> dict:
    kind = "input_text" if role == "user" else "output_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def _meta(thread: str, second: int, **extra) -> bytes:
    return _line("session_meta", {"id": thread, "cwd": "/w", **extra}, second)


ITEMS = [
    _msg("user", "first"),
    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "think"}]},
    _msg("assistant", "one"),
    _msg("user", "second"),
    _msg("assistant", "two"),
]


def _parent() -> bytes:
    return _meta(PARENT, 0) + b"".join(
        _line("response_item", p, i + 1) for i, p in enumerate(ITEMS)
    )


def test_a_full_replay_hangs_the_forks_turn_where_its_copy_ends() -> None:
    """A fork that copied its parent's items up to "one" (new timestamps) and then had its own
    turn: the turn hangs from the parent's "one", named after the fork."""
    fork = (
        _meta(FORK, 30, forked_from_id=PARENT)
        + _meta(PARENT, 31)
        + b"".join(_line("response_item", p, 32 + i) for i, p in enumerate(ITEMS[:3]))
        + _line("response_item", _msg("user", "fork turn"), 40)
    )
    parent = load_foreign_bytes(_parent())
    branch = fork_branch(parent, load_foreign_bytes(fork))
    assert branch is not None
    assert [(e["id"], e["parentId"]) for e in branch] == [(f"{FORK}:L6", "L4")]
    assert branch[0]["message"]["content"][0]["text"] == "fork turn"


def test_a_replay_of_messages_only_skips_the_parents_reasoning() -> None:
    fork = (
        _meta(FORK, 30, forked_from_id=PARENT)
        + _line("response_item", ITEMS[0], 31)
        + _line("response_item", ITEMS[2], 32)
        + _line("response_item", _msg("user", "fork turn"), 33)
    )
    branch = fork_branch(load_foreign_bytes(_parent()), load_foreign_bytes(fork))
    assert branch is not None
    assert [(e["id"], e["parentId"]) for e in branch] == [(f"{FORK}:L4", "L4")]


def test_a_fork_sharing_nothing_with_the_parent_is_not_joined() -> None:
    fork = _meta(FORK, 30, forked_from_id=PARENT) + _line(
        "response_item", _msg("user", "unrelated"), 31
    )
    assert fork_branch(load_foreign_bytes(_parent()), load_foreign_bytes(fork)) is None
