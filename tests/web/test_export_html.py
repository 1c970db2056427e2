"""The single-file HTML export: every route once, the Transcript's figures and marks,
secrets masked, hostile text inert, a strict CSP naming the one inline script."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from explorer import export_html, queries, services
from explorer.models import Entry, ReviewComment
from explorer.session import jsonfmt
from tests.secrets.seeded import build_session, make_secrets
from tests.web.test_secrets_pages import assert_no_secret

pytestmark = pytest.mark.django_db


def export(client, session, **query) -> tuple[int, str]:
    r = client.get(reverse("explorer:export_html", args=[session.pk]), query)
    body = b"".join(r.streaming_content).decode() if r.streaming else r.content.decode()
    return r.status_code, body


def blocks(body: str) -> tuple[list[dict], dict]:
    def block(name: str) -> str:
        m = re.search(rf'<script type="application/json" id="{name}">(.*?)</script>', body, re.S)
        assert m, name
        assert "<" not in m.group(1) and ">" not in m.group(1) and "&" not in m.group(1)
        return m.group(1)

    return json.loads(block("export-entries")), json.loads(block("export-routes"))


@pytest.fixture
def compacted(make_session, editor_user):
    session = make_session()
    services.append_via_manager(
        session, editor_user, "1b2c3d4e",
        lambda m: m.append_compaction("the summary text", "d4e5f6a7", 5000, None, False, None),
    )  # fmt: skip
    return session


def test_the_whole_tree_carries_every_entry_once_and_every_route(compacted, viewer_client):
    status, body = export(viewer_client, compacted, scope="tree")
    assert status == 200
    entries, meta = blocks(body)
    stored = set(Entry.objects.filter(session=compacted).values_list("entry_id", flat=True))
    ids = [e["id"] for e in entries]
    assert len(ids) == len(set(ids)) and set(ids) == stored
    leaves = set(
        Entry.objects.filter(session=compacted, child_count=0).values_list("entry_id", flat=True)
    )
    assert {entries[r["leaf"]]["id"] for r in meta["routes"]} == leaves
    # each route walks the parent links back to the root, as the route query does
    for r in meta["routes"]:
        walk, i = [], r["leaf"]
        while i >= 0:
            walk.append(entries[i]["id"])
            i = entries[i]["p"]
        assert walk[::-1] == [
            e.entry_id for e in queries.light_path(compacted, entries[r["leaf"]]["id"])
        ]
    # the branch point offers its sibling routes, each opening the newest leaf under it
    branch = next(e for e in entries if e["id"] == "e5f6a7b8")
    assert len(branch["sib"]) == 2 and branch["nl"] in leaves
    for e in entries:
        if "sib" in e:  # the switcher opens the route the Transcript's switcher opens
            assert e["nl"] == queries.newest_leaf_under(compacted, e["id"])


def test_figures_marks_and_cards_are_the_transcripts(compacted, viewer_client):
    _, body = export(viewer_client, compacted, scope="tree")
    entries, meta = blocks(body)
    page = viewer_client.get(f"/sessions/{compacted.pk}/transcript/").content.decode()
    assert "$0.0042" in page and "$0.0042" in body  # cost from the same describe functions
    assert "instead of 3 entries" in body and "the summary text" in body
    by_id = {e["id"]: k for k, e in enumerate(entries)}
    cursor_route = next(r for r in meta["routes"] if entries[r["leaf"]]["k"] == "compaction")
    rmap = queries.route_map(compacted, entries[cursor_route["leaf"]]["id"])
    hidden = by_id["c3d4e5f6"]
    assert cursor_route["edits"][str(hidden)][0] == rmap.edits["c3d4e5f6"][0] == "hidden"
    kinds = {run[2] for run in cursor_route["marks"]}
    assert kinds == {"replaced", "kept"}
    tokens = re.findall(r"~(\d+) tok", page)
    assert tokens and all(f"~{t} tok" in body for t in tokens)


def test_a_route_export_holds_only_that_route(compacted, viewer_client):
    leaf = "e5f6a7b8"
    leaf = queries.newest_leaf_under(compacted, leaf)
    status, body = export(viewer_client, compacted, leaf=leaf)
    entries, meta = blocks(body)
    assert status == 200 and len(meta["routes"]) == 1
    assert [e["id"] for e in entries] == [e.entry_id for e in queries.light_path(compacted, leaf)]
    assert "d4e5f6a7" not in [e["id"] for e in entries]


def test_the_csp_allows_exactly_the_inline_script(compacted, viewer_client):
    _, body = export(viewer_client, compacted, scope="tree")
    scripts = re.findall(r"<script>(.*?)</script>", body, re.S)
    assert len(scripts) == 1
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', body).group(1)
    csp = csp.replace("&#x27;", "'")
    assert f"script-src 'sha256-{digest}'" in csp
    assert "default-src 'none'" in csp and "img-src data:" in csp
    # nothing in the file points at a server
    assert not re.search(r'\s(?:src|href)="(?:https?:)?//', body)
    assert "<link" not in body and "@import" not in body and "url(" not in body


def test_no_secret_of_any_kind_is_in_the_export(make_session, viewer_client, admin_client):
    data, _, secrets = build_session()
    session = make_session(data)
    for client in (viewer_client, admin_client):  # masked for every role
        for query in ({"scope": "tree"}, {}):
            status, body = export(client, session, **query)
            assert status == 200
            assert "[REDACTED:" in body
            assert_no_secret(body, secrets, f"the HTML export {query}")
            assert_no_secret(json.dumps(blocks(body)), secrets, "the decoded data")


class Attributes(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, list]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, attrs))


HOSTILE = (
    "hi </script><script>alert(1)</script> <img src=x onerror=alert(2)> "
    '<a href="javascript:alert(3)">x</a> <!-- <iframe src=//evil.example>'
)


def test_hostile_text_stays_inert(make_session, viewer_client, editor_user):
    session = make_session()
    services.append_message(
        session, editor_user, {"role": "user", "content": [{"type": "text", "text": HOSTILE}],
                               "timestamp": 1741064767000}
    )  # fmt: skip
    _, body = export(viewer_client, session, scope="tree")
    assert body.count("<script") == 3  # two JSON blocks and the export's own script
    assert "alert(1)</script>" not in body and "evil.example>" not in body
    entries, _ = blocks(body)
    card = next(e["h"] for e in entries if "hi " in e["h"])
    parser = Attributes()
    parser.feed(card)
    for tag, attrs in parser.tags:
        assert tag not in ("script", "iframe", "object", "embed", "link", "style"), tag
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name)
            assert "javascript:" not in (value or ""), (tag, name)
            if tag == "img" and name == "src":
                assert (value or "").startswith("data:"), value
    assert "alert(1)" in jsonfmt.dumps(entries)  # shown as text, not dropped


def test_the_frame_offers_the_export_menu_and_large_trees_are_refused(
    compacted, viewer_client, monkeypatch
):
    page = viewer_client.get(f"/sessions/{compacted.pk}/transcript/").content.decode()
    assert f"/sessions/{compacted.pk}/export.html?leaf=" in page
    assert f"/sessions/{compacted.pk}/export.html?scope=tree" in page
    monkeypatch.setattr(export_html, "MAX_ENTRIES", 3)
    status, body = export(viewer_client, compacted, scope="tree")
    assert status == 413 and "Export one route" in body
    assert export(viewer_client, compacted)[0] == 200  # one route is still exported


def test_anonymous_users_get_no_export(client, compacted):
    r = client.get(reverse("explorer:export_html", args=[compacted.pk]))
    assert r.status_code in (302, 403)


def test_review_comments_are_in_the_export_only_when_asked(compacted, viewer_client, viewer_user):
    token = make_secrets()
    author = viewer_user
    root = services.add_comment(compacted, author, "d4e5f6a7", f"**check** {token['npm-token']}")
    services.add_comment(compacted, author, "", "a reply <script>x()</script>", parent=root)
    services.set_entry_review(compacted, author, "d4e5f6a7", "flagged")
    assert ReviewComment.objects.count() == 2
    _, plain_export = export(viewer_client, compacted, scope="tree")
    assert "check" not in plain_export and "Review thread" not in plain_export
    _, body = export(viewer_client, compacted, scope="tree", comments="1")
    entries, _ = blocks(body)
    card = next(e["h"] for e in entries if e["id"] == "d4e5f6a7")
    assert "<strong>check</strong>" in card and "a reply" in card and "flagged" in card
    assert "[REDACTED:npm-token]" in card and token["npm-token"] not in body
    assert "<script>x()" not in card


def test_the_embedded_json_is_inert_and_keeps_lone_surrogates():
    data = {"t": "</script><!-- & \ud800 \u2028"}
    text = export_html.script_json(data)
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text)["t"].startswith("</script><!-- & ")
    assert export_html.script_json({"t": "plain"}) == '{"t":"plain"}'
