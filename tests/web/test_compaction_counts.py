"""How many entries a compaction replaced is one figure on every page.

A later compaction's stretch (from the previous compaction's first kept entry up to its
own) holds that previous compaction entry; the Compactions list, its detail, its JSON, the
Transcript's compaction card and its "replaced entries" list must count the same entries
(`analysis.compactions.replaced_indices`). The list once counted the earlier compaction too.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from explorer import services

from . import crafted

pytestmark = pytest.mark.django_db

HEADER = crafted.header("7a0c1e22-0d4b-4b1e-9c55-2f6a8d3e4b10", cwd="/home/ana/proj")


def _message(eid: str, parent: str | None, role: str, text: str, n: int) -> dict:
    return crafted.message(eid, parent, role, text, n, usage=crafted.usage(100 * n))


def _compaction(eid: str, parent: str, kept: str, n: int) -> dict:
    return crafted.compaction(eid, parent, kept, n, summary=f"Summary {eid}", tokens_before=5000 + n)  # fmt: skip


def _session():
    # route: u1 a1 u2 a2 c1(keeps u2) u3 a3 c2(keeps u3) u4
    # c1 replaces u1 a1; c2's stretch is u2 a2 c1: it replaces u2 a2 (c1 is carried forward)
    entries = [
        _message("u1", None, "user", "first question", 1),
        _message("a1", "u1", "assistant", "first answer", 2),
        _message("u2", "a1", "user", "second question", 3),
        _message("a2", "u2", "assistant", "second answer", 4),
        _compaction("c1", "a2", "u2", 5),
        _message("u3", "c1", "user", "third question", 6),
        _message("a3", "u3", "assistant", "third answer", 7),
        _compaction("c2", "a3", "u3", 8),
        _message("u4", "c2", "user", "fourth question", 9),
    ]
    return crafted.imported(crafted.session_bytes(HEADER, entries), "counts.jsonl")


EXPECTED = {"c1": (2, 2), "c2": (2, 2)}  # id -> (replaced, kept)


def test_every_page_counts_the_same_replaced_entries(viewer_client):
    session = _session()
    url = reverse("explorer:compactions", args=[session.pk])
    listed = viewer_client.get(url, {"format": "json"}).json()["compactions"]
    assert {c["id"]: (c["replaced_count"], c["kept_count"]) for c in listed} == EXPECTED
    for cid, (replaced, _kept) in EXPECTED.items():
        detail = viewer_client.get(url, {"format": "json", "c": cid}).json()["detail"]
        assert [e["id"] for e in detail["replaced"]] == (
            ["u1", "a1"] if cid == "c1" else ["u2", "a2"]
        )
        assert detail["hidden_before"] == 0
        assert detail["item"]["replaced_count"] == replaced == len(detail["replaced"])
        page = viewer_client.get(url, {"c": cid}).content.decode()
        assert f"{replaced} replaced · 2 kept" in page
        shown = viewer_client.get(
            reverse("explorer:transcript", args=[session.pk]),
            {"replaced": cid},
            HTTP_HX_REQUEST="true",  # the card's toggle asks for the list alone
        )
        rows = re.findall(r'href="[^"]*#e-([^"]+)"', shown.content.decode())
        assert rows == [e["id"] for e in detail["replaced"]]
    transcript = viewer_client.get(reverse("explorer:transcript", args=[session.pk]))
    text = re.sub(r"\s+", " ", transcript.content.decode())
    assert text.count("the model sees this summary instead of 2 entries") == 2
    assert "Show the 2 replaced entries" in text
    assert "instead of 3 entries" not in text


def _detail_section(page: str) -> str:
    return re.search(r'<section id="compaction-detail".*?</section>', page, re.S).group(0)


def test_the_detail_is_the_same_after_an_append_below_the_compaction(viewer_client):
    """An append below a compaction leaves its detail as it was: it depends only on what
    lies above the compaction (read afresh per request, nothing kept)."""
    session = _session()
    url = reverse("explorer:compactions", args=[session.pk])
    before = _detail_section(viewer_client.get(url).content.decode())
    assert 'Compaction <span class="mono">c2</span>' in before
    message = {"role": "user", "content": "fifth question", "timestamp": 1741064800000}
    services.append_message(session, None, message, leaf_id="u4")
    session.refresh_from_db()
    assert _detail_section(viewer_client.get(url).content.decode()) == before


def test_the_transcript_marks_the_entries_the_compactions_tab_counts(viewer_client):
    """Each row's mark ("summarized by" / "kept tail of") names the entries the list counts:
    the newest compaction's mark wins where two ranges meet (c2 replaced what c1 kept)."""
    session = _session()
    listed = viewer_client.get(
        reverse("explorer:compactions", args=[session.pk]), {"format": "json"}
    ).json()["compactions"]
    page = viewer_client.get(reverse("explorer:transcript", args=[session.pk])).content.decode()
    marks = dict(
        re.findall(
            r'data-entry="([^"]+)"(?:(?!<li id="e-).)*?<div class="t-mark small">([^<]*)<a',
            page,
            re.S,
        )
    )
    words = {k: " ".join(v.split()) for k, v in marks.items()}
    assert words == {
        "u1": "summarized by compaction",
        "a1": "summarized by compaction",
        "u2": "summarized by compaction",
        "a2": "summarized by compaction",
        "u3": "kept tail of compaction",
        "a3": "kept tail of compaction",
    }
    newest = listed[-1]
    assert sum(w == "kept tail of compaction" for w in words.values()) == newest["kept_count"]
    assert sum(k in ("u2", "a2") for k in words) == newest["replaced_count"]
