"""Compactions lists what a compaction replaced and kept a window at a time, reads only that
window, and gives the engine's "tokens after" (the route figure stored at the compaction,
``pisession context --leaf <compaction>``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from django.core.cache import cache
from django.urls import reverse

from benchmarks.gen_session import generate_session
from explorer import files, queries
from explorer.session import jsonfmt

pytestmark = pytest.mark.django_db

STAMP = "2025-03-04T05:06:08.000Z"


def _long_compaction(
    count: int, kept_from: int, sid: str = "7a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
) -> bytes:
    """A linear session of ``count`` user messages, then a compaction keeping the messages
    from ``kept_from`` on, then one more message."""
    lines = [{"type": "session", "version": 3, "id": sid,
              "timestamp": STAMP, "cwd": "/w"}]  # fmt: skip
    parent = None
    for n in range(count):
        eid = f"m{n:06d}"
        lines.append({"type": "message", "id": eid, "parentId": parent, "timestamp": STAMP,
                      "message": {"role": "user", "content": f"step {n} in src/a{n}.py",
                                  "timestamp": 1741064768000}})  # fmt: skip
        parent = eid
    lines.append({"type": "compaction", "id": "comp0001", "parentId": parent, "timestamp": STAMP,
                  "summary": "worked on src/a1.py", "firstKeptEntryId": f"m{kept_from:06d}",
                  "tokensBefore": 1234})  # fmt: skip
    lines.append({"type": "message", "id": "tail0001", "parentId": "comp0001", "timestamp": STAMP,
                  "message": {"role": "user", "content": "after", "timestamp": 1741064768000}})  # fmt: skip
    return ("\n".join(json.dumps(e) for e in lines) + "\n").encode()


def _walk(client, url: str, key: str, link: str) -> tuple[list[str], int]:
    ids: list[str] = []
    pages = 0
    while url:
        detail = client.get(url).json()["detail"]
        assert len(detail[key]) <= 100
        ids = (
            [e["id"] for e in detail[key]] + ids
            if key == "replaced"
            else ids + [e["id"] for e in detail[key]]
        )
        url = detail[link]
        pages += 1
    return ids, pages


def test_json_windows_walk_every_replaced_and_kept_entry(make_session, viewer_client):
    session = make_session(_long_compaction(700, 400))
    url = reverse("explorer:compactions", args=[session.pk]) + "?format=json&limit=100"
    first = viewer_client.get(url).json()["detail"]
    assert (first["replaced_count"], first["kept_count"]) == (400, 300)
    replaced, pages = _walk(viewer_client, url, "replaced", "replaced_next")
    assert replaced == [f"m{n:06d}" for n in range(400)] and pages == 4
    kept, pages = _walk(viewer_client, url, "kept", "kept_next")
    assert kept == [f"m{n:06d}" for n in range(400, 700)] and pages == 3


def test_the_page_shows_windows_with_more_controls(make_session, viewer_client):
    session = make_session(_long_compaction(700, 400))
    url = reverse("explorer:compactions", args=[session.pk])
    body = viewer_client.get(url).content.decode()
    replaced = re.search(r'<ol class="replaced-list small">(.*?)</ol>', body, re.S).group(1)
    kept = re.search(r'<ol class="kept-list small">(.*?)</ol>', body, re.S).group(1)
    ids = lambda html: re.findall(r'\?entry=(m\d+)"', html)  # noqa: E731
    assert ids(replaced) == [f"m{n:06d}" for n in range(250, 400)]
    assert ids(kept) == [f"m{n:06d}" for n in range(400, 550)]
    # Real links (keyboard-reachable, working without scripts) saying how many are left.
    more = re.search(r'<a href="\?(rbefore=250[^"]*)" hx-get="[^"]*partial=replaced-rows', replaced)
    assert more is not None and "250 more earlier replaced entries" in replaced
    assert "150 more kept entries" in kept
    part = viewer_client.get(
        f"{url}?{more.group(1).replace('&amp;', '&')}&partial=replaced-rows",
        headers={"HX-Request": "true"},
    ).content.decode()
    assert ids(part) == [f"m{n:06d}" for n in range(100, 250)]
    assert "100 more earlier replaced entries" in part and "<section" not in part


def test_a_cold_request_parses_only_the_window(make_session, viewer_client, monkeypatch):
    """The lines parsed by a cold Compactions request do not grow with the compaction's
    replaced and kept ranges: the window, the newest replaced ones the check reads, the
    compaction."""
    real = jsonfmt.loads
    counts: list[int] = []
    parsed = [0]

    def counting(*args, **kwargs):
        parsed[0] += 1
        return real(*args, **kwargs)

    sids = ("1b2c3d4e-5f6a-4b7c-8d9e-0f1a2b3c4d5e", "2c3d4e5f-6a7b-4c8d-9e0f-1a2b3c4d5e6f")
    for (count, kept_from), sid in zip(((700, 400), (2800, 1600)), sids, strict=True):
        session = make_session(_long_compaction(count, kept_from, sid))
        url = reverse("explorer:compactions", args=[session.pk])
        parsed[0] = 0
        cache.clear()
        monkeypatch.setattr(jsonfmt, "loads", counting)
        assert viewer_client.get(url + "?format=json").status_code == 200
        monkeypatch.setattr(jsonfmt, "loads", real)
        counts.append(parsed[0])
    assert counts[0] == counts[1] < 400


def _engine_tokens(path, leaf: str) -> int:
    out = subprocess.run(
        [sys.executable, "-m", "explorer.session", "context", str(path), "--leaf", leaf, "--json"],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    return int(json.loads(out.splitlines()[0])["tokens"])


def test_tokens_after_is_the_engines_at_every_compaction(make_session, viewer_client, tmp_path):
    """Seed 6: compactions and context edits on several routes."""
    src = generate_session(tmp_path / "gen.jsonl", entries=1500, branch_points=6, seed=6)
    session = make_session(src.read_bytes())
    exported = tmp_path / "exported.jsonl"
    exported.write_bytes(files.export_bytes(session))
    url = reverse("explorer:compactions", args=[session.pk])
    seen = 0
    for leaf in [c["id"] for c in queries.leaf_choices(session)]:
        listed = viewer_client.get(url, {"format": "json", "leaf": leaf}).json()
        for item in listed["compactions"]:
            detail = viewer_client.get(
                url, {"format": "json", "c": item["id"], "leaf": leaf}
            ).json()["detail"]
            assert detail["tokens_after"] == _engine_tokens(exported, item["id"]), item["id"]
            seen += 1
    assert seen >= 2
