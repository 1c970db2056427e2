"""A compaction's "tokens after" on the Compactions tab is the engine's figure.

The context right after a compaction is what Raw vs projected (and ``pisession context``)
shows with the compaction as the leaf: the summary, then the kept entries as the model sees
them. The Compactions tab once added up the kept entries' raw messages itself, so a kept
entry a context edit had hidden, or an older compaction lying inert in the kept range,
still counted: "after ≈ 493" on the tab against 143 on Raw vs projected.
"""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from explorer import services
from explorer.session import SessionManager
from explorer.session.context import projection_from_path
from explorer.session.tokens import estimate_projected_context_tokens

pytestmark = pytest.mark.django_db

HEADER = {
    "type": "session",
    "version": 3,
    "id": "7a0c1e22-0d4b-4b1e-9c55-2f6a8d3e4b12",
    "timestamp": "2025-03-04T05:06:07.089Z",
    "cwd": "/p",
}
COST = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0.25}
USAGE = {"input": 50000, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 50005, "cost": COST}  # fmt: skip


def _message(eid: str, parent: str | None, role: str, text: str, n: int) -> dict:
    message: dict = {"role": role, "content": text, "timestamp": 1741064768000 + n}
    if role == "assistant":
        message["content"] = [{"type": "text", "text": text}]
        message.update(api="anthropic-messages", provider="anthropic", model="m", stopReason="stop", usage=USAGE)  # fmt: skip
    return {"type": "message", "id": eid, "parentId": parent, "timestamp": f"2025-03-04T05:07:{n:02d}.000Z", "message": message}  # fmt: skip


def _compaction(eid: str, parent: str, kept: str, n: int) -> dict:
    return {"type": "compaction", "id": eid, "parentId": parent, "timestamp": f"2025-03-04T05:07:{n:02d}.000Z", "summary": "summary " * 40, "firstKeptEntryId": kept, "tokensBefore": 999}  # fmt: skip


# c1 keeps u2 a2, but the edit e1 before it hid u2 (800 words the model no longer sees).
HIDDEN_KEPT = [
    _message("u1", None, "user", "hello " * 100, 1),
    _message("a1", "u1", "assistant", "ok " * 100, 2),
    _message("u2", "a1", "user", "second " * 200, 3),
    _message("a2", "u2", "assistant", "fine " * 50, 4),
    {
        "type": "context_edit",
        "id": "e1",
        "parentId": "a2",
        "timestamp": "2025-03-04T05:07:05.000Z",
        "targetId": "u2",
        "replacement": None,
    },  # fmt: skip
    _compaction("c1", "e1", "u2", 6),
]
# c2 keeps from a1 on, which holds the older compaction c0: inert, its summary is not sent.
INERT_KEPT = [
    _message("u1", None, "user", "hello " * 100, 1),
    _message("a1", "u1", "assistant", "ok " * 100, 2),
    _compaction("c0", "a1", "a1", 3),
    _message("u2", "c0", "user", "second " * 20, 4),
    _message("a2", "u2", "assistant", "fine " * 10, 5),
    _compaction("c2", "a2", "a1", 6),
]


def _engine(path_file, leaf: str) -> int:
    """The figure ``pisession context --leaf`` prints for the compaction."""
    manager = SessionManager.open(str(path_file))
    manager.branch(leaf)
    branch = manager.get_branch()
    return int(estimate_projected_context_tokens(projection_from_path(branch), branch))


@pytest.mark.parametrize("entries", [HIDDEN_KEPT, INERT_KEPT], ids=["hidden-kept", "inert-kept"])
def test_tokens_after_a_compaction_are_the_context_at_it(viewer_client, tmp_path, entries):
    data = "".join(json.dumps(e) + "\n" for e in [HEADER, *entries]).encode()
    result = services.import_bytes(data, source_path="after.jsonl", user=None)
    assert result.ok, [str(p) for p in result.problems]
    session = result.session
    comp = entries[-1]["id"]
    path_file = tmp_path / "after.jsonl"
    path_file.write_bytes(data)
    engine = _engine(path_file, comp)

    context = viewer_client.get(
        reverse("explorer:context", args=[session.pk]), {"format": "json", "leaf": comp}
    ).json()
    assert context["projected_tokens"] == engine

    url = reverse("explorer:compactions", args=[session.pk])
    listed = viewer_client.get(url, {"format": "json"}).json()
    assert listed["detail"]["item"]["id"] == comp
    assert listed["detail"]["tokens_after"] == engine
    page = viewer_client.get(url).content.decode()
    shown = re.search(r"after ≈ (\d+)", page)
    assert shown and int(shown.group(1)) == engine
