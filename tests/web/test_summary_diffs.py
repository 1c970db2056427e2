"""Summary diffs on the Compactions tab: each compaction's summary beside the previous one's
(word diff, the references the later one dropped), on a session with three compactions; a
branch summary beside the route it summarised, with the survival check."""

from __future__ import annotations

import pytest
from django.urls import reverse

from explorer.analysis.summary_diff import dropped_references, identifiers, word_diff

from . import crafted

pytestmark = pytest.mark.django_db

HEADER = crafted.header("5e1d7c3a-2b4f-4e6a-8d9c-1f2e3a4b5c6d", cwd="/home/ana/proj")
S1 = "Goal: fix the parser. Read src/parser.py and tests/test_parser.py; parse_config fails on 1024 byte lines."
S2 = "Goal: fix the parser. Changed src/parser.py; parse_config now streams. See https://example.org/issue/7."
S3 = "Goal: fix the parser. All done; ConfigLoader added in src/loader.py."


def _message(eid, parent, role, text, n):
    return crafted.message(eid, parent, role, text, n, usage=crafted.usage(100 * n))


def _session():
    # u1 a1 c1 u2 a2 c2 u3 a3 c3 u4, and a branch left at x2 (under a1) summarised by b1 under a3
    entries = [
        _message("u1", None, "user", "Fix the parser in src/parser.py", 1),
        _message("a1", "u1", "assistant", "Reading src/parser.py now", 2),
        crafted.compaction("c1", "a1", "a1", 3, summary=S1, tokens_before=5000),
        _message("u2", "c1", "user", "stream it", 4),
        _message("a2", "u2", "assistant", "parse_config streams now", 5),
        crafted.compaction("c2", "a2", "a2", 6, summary=S2, tokens_before=6000),
        _message("u3", "c2", "user", "add a loader", 7),
        _message("a3", "u3", "assistant", "ConfigLoader is in src/loader.py", 8),
        crafted.compaction("c3", "a3", "a3", 9, summary=S3, tokens_before=7000),
        _message("u4", "c3", "user", "thanks", 10),
        _message("x1", "a1", "user", "try the old tokenizer in lib/tokenize.py", 11),
        _message("x2", "x1", "assistant", "lib/tokenize.py calls split_lines 4096 times", 12),
        {"type": "branch_summary", "id": "b1", "parentId": "a3", "timestamp": crafted.at(13),
         "fromId": "x2", "summary": "Tried lib/tokenize.py; it was too slow."},
        _message("u5", "b1", "user", "go on", 14),
    ]  # fmt: skip
    return crafted.imported(crafted.session_bytes(HEADER, entries), "three.jsonl")


def test_word_diff_and_dropped_references():
    diff = word_diff("keep src/a.py and parse_config", "keep src/b.py and parse_config too")
    assert "".join(t for op, t in diff if op != "added") == "keep src/a.py and parse_config"
    assert "".join(t for op, t in diff if op != "removed") == "keep src/b.py and parse_config too"
    assert ("removed", "src/a.py") in diff and ("added", "src/b.py") in diff
    assert identifiers("use `run` and parse_config, fooBar, ConfigLoader; not plain words") == [
        "run", "parse_config", "fooBar", "ConfigLoader"
    ]  # fmt: skip
    report = dropped_references("src/a.py parse_config fooBar", "parse_config_v2 and fooBar")
    lost = {(i.kind, i.value) for i in report.items if not i.survived}
    assert lost == {("path", "src/a.py"), ("identifier", "parse_config")}


def test_each_compaction_beside_the_previous_summary(viewer_client):
    session = _session()
    url = reverse("explorer:compactions", args=[session.pk])
    listed = viewer_client.get(url, {"format": "json", "leaf": "u4"}).json()
    assert [c["id"] for c in listed["compactions"]] == ["c1", "c2", "c3"]
    first = viewer_client.get(url, {"format": "json", "leaf": "u4", "c": "c1"}).json()["detail"]
    assert first["previous"] is None  # nothing before the first
    second = viewer_client.get(url, {"format": "json", "leaf": "u4", "c": "c2"}).json()["detail"]
    prev = second["previous"]
    assert prev["id"] == "c1"
    old = "".join(d["text"] for d in prev["diff"] if d["op"] != "added")
    new = "".join(d["text"] for d in prev["diff"] if d["op"] != "removed")
    assert (old, new) == (S1, S2)
    dropped = {(d["kind"], d["value"]) for d in prev["dropped"]}
    assert dropped == {("path", "tests/test_parser.py"), ("number", "1024")}
    third = viewer_client.get(url, {"format": "json", "leaf": "u4", "c": "c3"}).json()["detail"]
    dropped = {(d["kind"], d["value"]) for d in third["previous"]["dropped"]}
    assert third["previous"]["id"] == "c2"
    assert {("path", "src/parser.py"), ("identifier", "parse_config")} <= dropped
    assert ("url", "https://example.org/issue/7") in dropped
    # The page draws the same: both summaries, struck and added words, the dropped list.
    page = viewer_client.get(url, {"leaf": "u4", "c": "c3"}).content.decode()
    assert "Against the previous summary" in page and '<del class="wd-del">' in page
    assert '<ins class="wd-ins">' in page and "<code>parse_config</code>" in page
    part = viewer_client.get(url, {"leaf": "u4", "c": "c1"}, HTTP_HX_REQUEST="true")
    assert "Against the previous summary" not in part.content.decode()


def test_a_branch_summary_beside_the_route_it_summarised(viewer_client):
    session = _session()
    url = reverse("explorer:compactions", args=[session.pk])
    data = viewer_client.get(url, {"format": "json", "leaf": "u5", "b": "b1"}).json()
    assert data["branch_summaries"] == ["b1"]
    branch = data["branch_summary"]
    assert branch["from_id"] == "x2" and branch["common_ancestor"] == "a1"
    assert [e["id"] for e in branch["summarised"]] == ["x1", "x2"]
    items = {(i["kind"], i["value"]): i["survived"] for i in branch["report"]["items"]}
    assert items[("path", "lib/tokenize.py")] is True
    assert items[("number", "4096")] is False
    page = viewer_client.get(url, {"leaf": "u5", "b": "b1"}).content.decode()
    assert "Summarised route" in page and "Reference survival check" in page
    assert "references found in the summarised route" in page
    assert viewer_client.get(url, {"leaf": "u4", "b": "b1"}).status_code == 404  # off route
    assert viewer_client.get(url, {"leaf": "u5", "b": "u5"}).status_code == 404


def test_word_diff_of_many_lines_gives_both_sides_back():
    """Lines are matched first, then words within the changed stretch: each side still
    reads back exactly, and a word changed inside a line is marked alone."""
    old = "".join(f"line {n} keeps src/f{n}.py\n" for n in range(300)) + "tail"
    new = old.replace("line 150 keeps src/f150.py", "line 150 keeps src/g150.py")
    new = new.replace("line 7 keeps", "line 7 now keeps") + "\nmore"
    diff = word_diff(old, new)
    assert "".join(t for op, t in diff if op != "added") == old
    assert "".join(t for op, t in diff if op != "removed") == new
    assert ("removed", "src/f150.py") in diff and ("added", "src/g150.py") in diff
    assert any(op == "added" and t.strip() == "now" for op, t in diff)
