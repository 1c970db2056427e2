"""A compaction's "tokens after" on the Compactions tab is the engine's figure.

The context right after a compaction is what Raw vs projected (and ``pisession context``)
shows with the compaction as the leaf: the summary, then the kept entries as the model sees
them. The Compactions tab once added up the kept entries' raw messages itself, so a kept
entry a context edit had hidden, or an older compaction lying inert in the kept range,
still counted: "after ≈ 493" on the tab against 143 on Raw vs projected.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from . import crafted

pytestmark = pytest.mark.django_db

HEADER = crafted.header("7a0c1e22-0d4b-4b1e-9c55-2f6a8d3e4b12")
USAGE = crafted.usage(50000, cost=0.25)


def _message(eid: str, parent: str | None, role: str, text: str, n: int) -> dict:
    return crafted.message(eid, parent, role, text, n, usage=USAGE)


def _compaction(eid: str, parent: str, kept: str, n: int) -> dict:
    return crafted.compaction(eid, parent, kept, n, summary="summary " * 40, tokens_before=999)


# c1 keeps u2 a2, but the edit e1 before it hid u2 (800 words the model no longer sees).
HIDDEN_KEPT = [
    _message("u1", None, "user", "hello " * 100, 1),
    _message("a1", "u1", "assistant", "ok " * 100, 2),
    _message("u2", "a1", "user", "second " * 200, 3),
    _message("a2", "u2", "assistant", "fine " * 50, 4),
    crafted.context_edit("e1", "a2", "u2", 5),
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


@pytest.mark.parametrize("entries", [HIDDEN_KEPT, INERT_KEPT], ids=["hidden-kept", "inert-kept"])
def test_tokens_after_a_compaction_are_the_context_at_it(viewer_client, tmp_path, entries):
    data = crafted.session_bytes(HEADER, entries)
    session = crafted.imported(data, "after.jsonl")
    comp = entries[-1]["id"]
    engine = crafted.engine_tokens(data, tmp_path, leaf=comp)  # `pisession context --leaf`

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
