"""One entry's estimated tokens are one figure: the entry panel, its Transcript row and its
raw column on Raw vs projected all call ``describe.tokens_of`` on the entry's messages.

The entry panel once summed the engine's per-message estimates its own way (leaving NaN out
by hand); it gave the same numbers, but a second computation of a figure is free to drift.
"""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from benchmarks.gen_session import generate_session
from explorer import queries

pytestmark = pytest.mark.django_db


def test_entry_panel_transcript_and_raw_column_agree(viewer_client, make_session, tmp_path):
    src = generate_session(tmp_path / "gen.jsonl", entries=400, branch_points=2, seed=6)
    session = make_session(src.read_bytes())
    leaf = queries.default_leaf_id(session)
    transcript = viewer_client.get(
        reverse("explorer:transcript", args=[session.pk]), {"leaf": leaf}
    ).content.decode()
    rows = {
        html.unescape(m.group(1)): int(m.group(2))
        for m in re.finditer(
            # within one row: a tool result drawn with its call has no figures of its own
            r'<li id="e-[^"]*" data-entry="([^"]+)"(?:(?!<li id="e-).)*?<span class="t-figures[^>]*>~(\d+) tok',
            transcript,
            re.S,
        )
    }
    context = viewer_client.get(
        reverse("explorer:context", args=[session.pk]), {"format": "json", "leaf": leaf}
    ).json()
    raw = {r["id"]: r["raw_tokens"] for r in context["rows"] if r["kind"] != "compaction"}
    shared = sorted(set(rows) & set(raw))
    assert len(shared) > 20  # messages of every role, tool calls and results among them
    for entry_id in shared[:80]:
        panel = viewer_client.get(
            reverse("explorer:entry", args=[session.pk]), {"id": entry_id, "format": "json"}
        ).json()
        assert panel["token_estimate"] == rows[entry_id] == raw[entry_id], entry_id
