"""Text that is not valid Unicode (lone UTF-16 surrogates, NUL) in every field a page shows
or indexes: imported as Pi accepts it, exported byte-identical, rendered with a visible
replacement character, never a 500."""

from __future__ import annotations

import pytest
from django.urls import reverse

from explorer import files
from tests.live.conftest import ws_connect  # noqa: F401 - the socket fixture

S = "\\ud83d"  # a lone high surrogate, as JSON.stringify writes it
L = "\\udc00"  # a lone low surrogate
N = "\\u0000"  # NUL


def _line(text: str) -> bytes:
    return text.encode() + b"\n"


def corpus_bytes() -> bytes:
    """A session whose every shown or indexed field holds a surrogate or a NUL."""
    usage = (
        '"usage":{"input":5,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":7,'
        '"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}'
    )
    lines = [
        f'{{"type":"session","version":3,"id":"hdr{S}{N}x","timestamp":"2025-03-04T05:06:07.089Z{S}",'
        f'"cwd":"/home/{S}ana{N}","parentSession":"/p{L}"}}',
        f'{{"type":"message","id":"u{S}1","parentId":null,"timestamp":"2025-03-04T05:06:08.000Z{L}",'
        f'"message":{{"role":"user{S}","content":"hi {S} there {N} end","timestamp":1}}}}',
        f'{{"type":"message","id":"u1","parentId":"u{S}1","timestamp":"2025-03-04T05:06:08.500Z",'
        f'"message":{{"role":"user","content":"hi {S} there {N} end","timestamp":1}}}}',
        f'{{"type":"message","id":"a{N}1","parentId":"u1","timestamp":"2025-03-04T05:06:09.000Z",'
        f'"message":{{"role":"assistant","content":[{{"type":"thinking","thinking":"t{S}"}},'
        f'{{"type":"text","text":"x{L}y{N}"}},{{"type":"toolCall","id":"c{S}","name":"read{N}",'
        f'"arguments":{{"path":"p{S}"}}}}],"api":"a","provider":"p{S}","model":"m{N}",{usage},'
        f'"stopReason":"toolUse","timestamp":2}}}}',
        f'{{"type":"message","id":"t1","parentId":"a{N}1","timestamp":"2025-03-04T05:06:10.000Z",'
        f'"message":{{"role":"toolResult","toolCallId":"c{S}","toolName":"read{N}",'
        f'"content":[{{"type":"text","text":"out{S}{N}"}}],"isError":false,"timestamp":3}}}}',
        f'{{"type":"custom_message","id":"cm1","parentId":"t1","timestamp":"2025-03-04T05:06:10.500Z",'
        f'"customType":"ext{S}{N}","content":"custom {L}","display":true}}',
        f'{{"type":"label","id":"l1","parentId":"cm1","timestamp":"2025-03-04T05:06:11.000Z",'
        f'"targetId":"u{S}1","label":"lab{S}{N}"}}',
        f'{{"type":"context_edit","id":"e1","parentId":"l1","timestamp":"2025-03-04T05:06:11.500Z",'
        f'"targetId":"a{N}1","replacement":null}}',
        f'{{"type":"compaction","id":"c9","parentId":"e1","timestamp":"2025-03-04T05:06:12.000Z",'
        f'"summary":"sum {S} {N}","firstKeptEntryId":"t1","tokensBefore":10}}',
        f'{{"type":"session_info","id":"s1","parentId":"c9","timestamp":"2025-03-04T05:06:13.000Z",'
        f'"name":"name {S}{N}"}}',
    ]
    return b"".join(_line(x) for x in lines)


@pytest.fixture
def corpus(make_session):
    return make_session(corpus_bytes())


def test_it_exports_the_corpus_byte_identical(corpus):
    assert files.export_bytes(corpus) == corpus_bytes()


SESSION_PAGES = [
    ("explorer:session_detail", {}),
    # Links carry the visible form (a browser cannot send a lone surrogate).
    ("explorer:session_detail", {"entry": "u\ufffd1"}),
    ("explorer:graph_svg", {}),
    ("explorer:tree_chain", {"id": "u1"}),
    ("explorer:entry", {"id": "u\ufffd1"}),
    ("explorer:entry", {"id": "a\x001", "full": "1"}),
    ("explorer:entry", {"id": "t1", "raw": "1"}),
    ("explorer:context", {}),
    ("explorer:compactions", {}),
    ("explorer:compare", {"a": "s1", "b": "u1"}),
    ("explorer:timeline", {}),
    ("explorer:session_search", {"q": "hi"}),
    ("explorer:session_search", {"q": "hi", "format": "json"}),
    ("explorer:integrity", {}),
    ("explorer:live", {}),
    ("explorer:problems", {}),
    ("explorer:session_stats", {}),
    ("explorer:export", {}),
    ("explorer:branch_download", {}),
    ("explorer:export_html", {"scope": "tree"}),
    ("explorer:export_size", {"format": "json"}),
]


SHOWS_TEXT = {
    "explorer:session_detail",
    "explorer:graph_svg",
    "explorer:entry",
    "explorer:context",
    "explorer:compactions",
    "explorer:session_search",
    "explorer:live",
}


@pytest.mark.parametrize(("name", "params"), SESSION_PAGES)
def test_it_renders_every_session_page(viewer_client, corpus, name, params):
    r = viewer_client.get(reverse(name, args=[corpus.pk]), params)
    assert r.status_code == 200, r.content[:500]
    body = b"".join(r.streaming_content) if r.streaming else r.content
    if name in ("explorer:export", "explorer:branch_download"):
        assert b"\\ud83d" in body  # a file keeps Pi's escapes
        return
    text = body.decode("utf-8")  # strict: the page is valid UTF-8
    assert "\x00" not in text
    if params.get("format") == "json":
        assert "\\ud83d" not in text and "\\u0000" not in text
    if name in SHOWS_TEXT:
        assert "\ufffd" in text


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("explorer:session_list", {}),
        ("explorer:session_list", {"q": "hi"}),
        ("explorer:search", {"q": "hi"}),
        ("explorer:search", {"q": "hi", "format": "json"}),
        ("explorer:search", {"q": "\ufffd"}),
    ],
)
def test_it_renders_every_global_page(viewer_client, corpus, name, params):
    r = viewer_client.get(reverse(name), params)
    assert r.status_code == 200, r.content[:500]
    text = r.content.decode("utf-8")
    assert "\\ud83d" not in text and "\\u0000" not in text and "\x00" not in text
    assert "\ufffd" in text
    if params.get("format") == "json":
        assert r.json()["results"][0]["snippet"] == "hi \ufffd there \ufffd end"


def test_it_opens_an_entry_by_the_id_its_link_carries(viewer_client, corpus):
    """The link of an entry whose id holds a surrogate leads to that entry and its child."""
    page = viewer_client.get(
        reverse("explorer:entry", args=[corpus.pk]), {"id": "u\ufffd1"}
    ).content.decode()
    assert "hi \ufffd there \ufffd end" in page
    assert "?entry=u1" in page  # its child, routed through the surrogate parent


def test_it_stores_the_visible_form_in_the_columns(corpus):
    corpus.refresh_from_db()
    assert corpus.session_id == "hdr\ufffd\ufffdx"
    assert corpus.name == "name \ufffd\ufffd"
    assert corpus.cwd == "/home/\ufffdana\ufffd"
    row = corpus.entries.get(entry_id="u\ud83d1")  # a lookup by the parsed id finds it
    assert row.entry_id == "u\ufffd1"
    assert row.role == "user\ufffd"
    assert corpus.entries.get(entry_id="u1").parent_id == "u\ufffd1"
    assert corpus.entries.get(entry_id="cm1").custom_type == "ext\ufffd\ufffd"
    assert corpus.entries.get(entry_id="a\x001").entry_id == "a\ufffd1"


def test_it_refuses_ids_that_differ_only_in_invalid_unicode(db):
    data = corpus_bytes() + _line(
        f'{{"type":"message","id":"u{L}1","parentId":null,"timestamp":"2025-03-04T05:07:00.000Z",'
        '"message":{"role":"user","content":"x","timestamp":1}}'
    )
    result = files.import_bytes(data)
    assert not result.ok
    [problem] = [p for p in result.problems if p.severity == "error"]
    assert (problem.line, problem.code) == (11, "duplicate-id")


@pytest.mark.parametrize("where", ["id", "parentId", "targetId", "header"])
def test_it_refuses_ids_longer_than_a_column_with_their_line(db, where):
    long = "x" * 201
    header = (
        '{"type":"session","version":3,"id":"%s","timestamp":"2025-03-04T05:06:07.089Z","cwd":"/"}'
    )
    lines = [header % (long if where == "header" else "h1")]
    entry = {"id": "e1", "parentId": None, "targetId": "e0"}
    if where != "header":
        entry[where] = long
    target = f',"targetId":"{entry["targetId"]}"'
    parent = "null" if entry["parentId"] is None else f'"{entry["parentId"]}"'
    lines.append(
        f'{{"type":"label","id":"{entry["id"]}","parentId":{parent},'
        f'"timestamp":"2025-03-04T05:06:08.000Z"{target},"label":"l"}}'
    )
    result = files.import_bytes(b"".join(_line(x) for x in lines))
    assert not result.ok
    errors = [p for p in result.problems if p.severity == "error"]
    assert [(p.line, p.code) for p in errors] == [(1 if where == "header" else 2, "id-too-long")]
    assert "201 characters" in errors[0].message


def test_it_keeps_an_id_of_exactly_the_column_width(make_session, viewer_client):
    long = "y" * 200
    data = (
        b'{"type":"session","version":3,"id":"h200","timestamp":"2025-03-04T05:06:07.089Z","cwd":"/"}\n'
        + f'{{"type":"message","id":"{long}","parentId":null,"timestamp":"2025-03-04T05:06:08.000Z",'
        '"message":{"role":"user","content":"long id","timestamp":1}}\n'.encode()
        + f'{{"type":"message","id":"child","parentId":"{long}","timestamp":"2025-03-04T05:06:09.000Z",'
        '"message":{"role":"user","content":"child","timestamp":1}}\n'.encode()
    )
    session = make_session(data)
    assert session.entries.get(entry_id="child").depth == 1
    r = viewer_client.get(reverse("explorer:entry", args=[session.pk]), {"id": long})
    assert r.status_code == 200 and "long id" in r.content.decode()


@pytest.mark.django_db(transaction=True)
async def test_it_streams_the_corpus_over_the_socket_in_both_formats(ws_connect, viewer_user):  # noqa: F811
    import json

    from channels.db import database_sync_to_async

    from explorer import services
    from tests.live.conftest import close_all

    result = await database_sync_to_async(services.import_bytes)(corpus_bytes())
    pk = result.session.pk
    html_comm, ok, _ = await ws_connect(f"/ws/sessions/{pk}/", user=viewer_user)
    json_comm, ok2, _ = await ws_connect(f"/ws/sessions/{pk}/?format=json", user=viewer_user)
    assert ok and ok2
    try:
        for comm in (html_comm, json_comm):
            await comm.send_to(text_data=json.dumps({"type": "resume", "after": 0}))
        frame = await html_comm.receive_from(timeout=5)
        assert "hi \ufffd there \ufffd end" in frame
        entries = json.loads(await json_comm.receive_from(timeout=5))["entries"]
        assert "u\ufffd1" in [e["id"] for e in entries]
        assert "a\ufffd1" in [e["id"] for e in entries]
    finally:
        await close_all([html_comm, json_comm])
