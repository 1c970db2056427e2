"""The single-file HTML export: every route once, the Transcript's figures and marks,
secrets masked, hostile text inert, a strict CSP naming the one inline script."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser

import orjson
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


def inert(text: str) -> str:
    assert "<" not in text and ">" not in text and "&" not in text
    return text


def blocks(body: str) -> tuple[list[dict], dict]:
    """The entries (every chunk's rows, in order) and the routes the file carries."""
    chunks = re.findall(
        r'<script type="application/json" class="x-rows">(.*?)</script>', body, re.S
    )
    entries = [row for chunk in chunks for row in json.loads(inert(chunk))]
    m = re.search(r'<script type="application/json" id="export-routes">(.*?)</script>', body, re.S)
    assert m, "export-routes"
    return entries, json.loads(inert(m.group(1)))


def images(body: str) -> dict[str, str]:
    found = re.findall(
        r'<script type="application/json" class="x-img" data-k="([0-9a-f]+)">(.*?)</script>',
        body,
        re.S,
    )
    return {k: json.loads(inert(v)) for k, v in found}


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
    # the JSON blocks (rows, routes) and the export's own script, nothing else
    assert body.count("<script") == body.count('<script type="application/json"') + 1
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


# --- readability: a session with what used to push the page wide and long ---------------

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
LONG_WORD = "x" * 700
WIDE_CODE = "const wide = [" + ", ".join(str(i) for i in range(200)) + "];"


def wide_session_bytes() -> bytes:
    """Long unbreakable text, a wide code block, a 200-line tool output with a very long
    line, thinking, and one image shown twice."""
    usage = {"input": 1000, "output": 50, "cacheRead": 200, "cacheWrite": 30, "totalTokens": 1280,
             "cost": {"input": 0.003, "output": 0.001, "cacheRead": 0.0001, "cacheWrite": 0.0002, "total": 0.0043}}  # fmt: skip
    output = "\n".join(f"line {i}" if i != 5 else "y" * 900 for i in range(200))

    def msg(eid, parent, message, ts):
        return {"type": "message", "id": eid, "parentId": parent,
                "timestamp": f"2025-03-04T05:06:{ts:02d}.000Z", "message": {**message, "timestamp": 1741064767000 + ts}}  # fmt: skip

    def assistant(content):
        return {"role": "assistant", "content": content, "api": "anthropic-messages", "provider": "anthropic",
                "model": "claude-sonnet-4-5", "usage": usage, "stopReason": "stop"}  # fmt: skip

    lines = [
        {"type": "session", "version": 3, "id": "0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a99",
         "timestamp": "2025-03-04T05:06:07.089Z", "cwd": "/home/ana/wide"},
        msg("u1000001", None, {"role": "user", "content": f"please look at {LONG_WORD} and the rest"}, 1),
        msg("a1000001", "u1000001", assistant([
            {"type": "thinking", "thinking": "Thinking about the wide code first."},
            {"type": "text", "text": f"Here:\n\n```js\n{WIDE_CODE}\n```\n"},
            {"type": "toolCall", "id": "call_1", "name": "bash", "arguments": {"command": "seq 1 200"}}]), 2),
        msg("t1000001", "a1000001", {"role": "toolResult", "toolCallId": "call_1", "toolName": "bash",
                                     "content": [{"type": "text", "text": output}], "isError": False}, 3),
        msg("u1000002", "t1000001", {"role": "user", "content": [
            {"type": "text", "text": "look at this screenshot"},
            {"type": "image", "data": PNG, "mimeType": "image/png"}]}, 4),
        msg("a1000002", "u1000002", assistant([
            {"type": "toolCall", "id": "call_2", "name": "read", "arguments": {"path": "shot.png"}}]), 5),
        msg("t1000002", "a1000002", {"role": "toolResult", "toolCallId": "call_2", "toolName": "read",
                                     "content": [{"type": "image", "data": PNG, "mimeType": "image/png"}],
                                     "isError": False}, 6),
        msg("a1000003", "t1000002", assistant([{"type": "text", "text": "Done: the needle is here."}]), 7),
    ]  # fmt: skip
    return b"".join(json.dumps(line).encode() + b"\n" for line in lines)


def test_an_image_shown_twice_is_carried_once(make_session, viewer_client):
    session = make_session(wide_session_bytes())
    _, body = export(viewer_client, session)
    found = images(body)
    assert list(found.values()) == [f"data:image/png;base64,{PNG}"]
    assert body.count(PNG) == 1
    entries, _ = blocks(body)
    key = next(iter(found))
    users = [e for e in entries if f'data-img="{key}"' in e["h"]]
    assert {e["id"] for e in users} == {"u1000002", "a1000002"}  # the result shows with its call


def test_long_outputs_fold_and_tool_calls_say_what_they_do(make_session, viewer_client):
    session = make_session(wide_session_bytes())
    _, body = export(viewer_client, session)
    entries, _ = blocks(body)
    call = next(e["h"] for e in entries if e["id"] == "a1000001")
    assert '<code class="t-hint">seq 1 200</code>' in call
    fold = re.search(r'<div class="x-fold is-folded"><pre class="output"><span>(.*?)</span>'
                     r'<span class="x-rest">(.*?)</span></pre>', call, re.S)  # fmt: skip
    assert fold, call
    head, rest = fold.groups()
    assert head.startswith("line 0\nline 1") and head.count("\n") <= export_html.FOLD_LINES
    assert "line 199" in rest and "line 199" not in head
    assert "Show all 200 lines" in call
    short = next(e["h"] for e in entries if e["id"] == "a1000003")
    assert "x-fold" not in short


def test_rows_carry_what_the_totals_add_up(make_session, viewer_client):
    session = make_session(wide_session_bytes())
    _, body = export(viewer_client, session)
    entries, _ = blocks(body)
    assistants = [e for e in entries if e["ro"] == "assistant"]
    assert len(assistants) == 3
    assert all(
        e["u"] == [1000, 50, 200, 30] and e["c"] == pytest.approx(0.0043) for e in assistants
    )
    assert [e.get("tc", 0) for e in assistants] == [1, 1, 0]
    assert next(e for e in entries if e["id"] == "a1000002").get("ot") == 1  # only a call
    assert {e["mo"] for e in assistants} == {"anthropic/claude-sonnet-4-5"}
    assert all("u" not in e for e in entries if e["ro"] != "assistant")


def test_the_expected_size_is_offered_and_near_the_file(make_session, viewer_client):
    session = make_session(wide_session_bytes())
    page = viewer_client.get(f"/sessions/{session.pk}/transcript/").content.decode()
    assert f'hx-get="/sessions/{session.pk}/export-size/' in page
    sizes = viewer_client.get(f"/sessions/{session.pk}/export-size/", {"format": "json"}).json()
    _, route = export(viewer_client, session)
    _, tree = export(viewer_client, session, scope="tree")
    assert 0.7 < sizes["route_bytes"] / len(route.encode()) < 1.4, sizes
    assert 0.7 < sizes["tree_bytes"] / len(tree.encode()) < 1.4, sizes
    assert sizes["route_entries"] == 7
    html = viewer_client.get(f"/sessions/{session.pk}/export-size/").content.decode()
    assert "this route: 7 entries, about" in html and "kB" in html


def test_the_expected_size_says_when_the_tree_would_be_refused(
    make_session, viewer_client, monkeypatch
):
    session = make_session()
    monkeypatch.setattr(export_html, "MAX_ENTRIES", 3)
    sizes = viewer_client.get(f"/sessions/{session.pk}/export-size/", {"format": "json"}).json()
    assert sizes["tree_bytes"] is None and sizes["route_bytes"] > 0
    html = viewer_client.get(f"/sessions/{session.pk}/export-size/").content.decode()
    assert "the whole tree is too large for one HTML file (8 entries)" in html


@pytest.mark.pi_fixtures
def test_the_expected_size_of_a_real_pi_file_is_within_a_fifth(make_session, viewer_client):
    from tests.conftest import PI_FIXTURES

    session = make_session((PI_FIXTURES / "large-session.jsonl").read_bytes())
    sizes = viewer_client.get(f"/sessions/{session.pk}/export-size/", {"format": "json"}).json()
    _, route = export(viewer_client, session)
    assert 0.8 < sizes["route_bytes"] / len(route.encode()) < 1.25, sizes


def test_script_json_matches_the_escaping_it_replaced():
    samples = ["", "plain", "a<b>c&d", "</script><!--", "ünïcødé ✓ \u2028", "\\u003c", "x" * 5000]
    for text in samples:
        value = {"t": text, "n": [1, 2.5, None, True]}
        old = orjson.dumps(value).decode()
        old = old.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        assert export_html.script_json(value) == old
        assert json.loads(export_html.script_json(value)) == value


@pytest.mark.django_db(transaction=True)
async def test_under_asgi_the_response_is_an_async_stream(make_session, viewer_user):
    """Django collects a sync iterator whole under ASGI; the export hands it an async one
    (the first byte under a real daphne: tests/live/test_export_streaming.py)."""
    from asgiref.sync import sync_to_async
    from django.test import AsyncClient

    session = await sync_to_async(make_session)()
    client = AsyncClient()
    await client.aforce_login(viewer_user)
    r = await client.get(reverse("explorer:export_html", args=[session.pk]), {"scope": "tree"})
    assert r.status_code == 200 and r.streaming and r.is_async
    pieces = [piece async for piece in r.streaming_content]
    assert len(pieces) >= 2 and b"</html>" not in pieces[0]  # the head is sent alone
    body = b"".join(pieces).decode()
    entries, _ = blocks(body)
    assert len(entries) == 8 and body.rstrip().endswith("</html>")
