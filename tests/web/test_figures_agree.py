"""Every token figure of raw vs projected agrees: page, htmx partial, JSON and ``pisession``.

Generated sessions (compactions, context edits, branches) are imported, one more context edit
is appended through the app, and for every leaf the four answers are compared.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from benchmarks.gen_session import generate_session
from explorer import files, queries, services


def _figure(html: str, name: str) -> int:
    m = re.search(rf'id="{name}">(\d+)<', html)
    assert m, f"{name} not on the page"
    return int(m.group(1))


def _pisession_tokens(path: Path) -> dict[str, int]:
    out = subprocess.run(
        [sys.executable, "-m", "explorer.session", "context", str(path), "--all-leaves", "--json"],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    records = [json.loads(line) for line in out.splitlines() if line.strip()]
    return {r["leafId"]: int(r["tokens"]) for r in records}


@pytest.fixture
def generated(make_session, editor_user, tmp_path):
    """Seed 6 gives four compactions, two context edits and six branch points."""
    src = generate_session(tmp_path / "gen.jsonl", entries=1500, branch_points=6, seed=6)
    session = make_session(src.read_bytes())
    # One more edit through the app, on the default leaf's route: it hides the last user
    # message, so the usage before it is no longer trusted.
    light = queries.light_path(session, queries.default_leaf_id(session))
    target = next(e.entry_id for e in reversed(light) if e.type == "message")
    services.add_context_edit(session, editor_user, target, None, leaf_id=light[-1].entry_id)
    session.refresh_from_db()
    exported = tmp_path / "exported.jsonl"
    exported.write_bytes(files.export_bytes(session))
    return session, exported


def test_page_partial_json_and_pisession_give_the_same_tokens(viewer_client, generated):
    session, exported = generated
    expected = _pisession_tokens(exported)
    assert len(expected) >= 7  # six branch points and the edit's new leaf
    url = reverse("explorer:context", args=[session.pk])
    bases = set()
    for leaf, tokens in expected.items():
        page = viewer_client.get(url, {"leaf": leaf}).content.decode()
        partial = viewer_client.get(
            url, {"leaf": leaf}, headers={"HX-Request": "true"}
        ).content.decode()
        data = viewer_client.get(url, {"leaf": leaf, "format": "json", "limit": 1000}).json()
        assert data["row_count"] == len(data["rows"])  # one window holds every row
        assert data["leaf_id"] == leaf
        assert data["projected_tokens"] == tokens, leaf
        assert _figure(page, "projected-estimate") == tokens
        assert _figure(partial, "projected-estimate") == tokens
        for name, key in (("raw-estimate", "raw_tokens"), ("projected-sum", "projected_sum")):
            assert _figure(page, name) == data[key] == _figure(partial, name)
        # The columns add up to the totals, the difference breakdown to the difference count.
        rows = data["rows"]
        assert sum(r["raw_tokens"] for r in rows) == data["raw_tokens"]
        assert sum(r["projected_tokens"] for r in rows) == data["projected_sum"]
        differing = [r for r in rows if r["status"] != "same"]
        assert data["differences"] == len(differing) == _figure(page, "differences")
        assert sum(d["count"] for d in data["difference_counts"]) == len(differing)
        # The estimate is the provider usage plus what follows it, or the plain sum.
        if data["projected_basis"] == "usage":
            assert (
                data["projected_tokens"] == data["projected_reported"] + data["projected_trailing"]
            )
        bases.add(data["projected_basis"])
    # The appended edit makes one leaf re-estimate from the messages; others use usage.
    assert bases == {"usage", "estimate"}


def test_nonsense_window_and_reserve_are_refused_with_a_message(viewer_client, make_session):
    session = make_session()
    url = reverse("explorer:context", args=[session.pk])
    for params, words in (
        ({"reserve": "999999999"}, "between 0 and 10,000,000"),
        ({"window": "7"}, "between 1,000 and 10,000,000"),
        ({"window": "32000", "reserve": "40000"}, "must be smaller than the context window"),
        ({"window": "lots"}, "whole number"),
    ):
        r = viewer_client.get(url, params)
        assert r.status_code == 400
        assert words in r.content.decode()
        j = viewer_client.get(url, {**params, "format": "json"})
        assert j.status_code == 400 and any(words in m for m in j.json()["errors"])
        assert j.json()["threshold"] > 0
    ok = viewer_client.get(url, {"window": "32000", "reserve": "1000", "format": "json"}).json()
    assert ok["errors"] == [] and ok["window"] == 32000 and ok["threshold"] == 31000


def test_the_page_offers_a_leaf_picker_that_names_every_leaf(viewer_client, make_session):
    session = make_session()
    r = viewer_client.get(reverse("explorer:context", args=[session.pk]))
    html = r.content.decode()
    picker = re.search(r'<select name="leaf">(.*?)</select>', html, re.S)
    assert picker
    from explorer.models import Entry

    leaves = Entry.objects.filter(session=session, child_count=0).values_list("entry_id", flat=True)
    for leaf in leaves:
        assert f'value="{leaf}"' in picker.group(1)
