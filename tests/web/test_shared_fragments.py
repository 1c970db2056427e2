"""Page fragments rendered once per session version for every reader.

A shared fragment must be the bytes a fresh render gives this reader, hold nothing of the
reader who happened to build it (CSRF token, cursor, an editor's controls), and go stale at
once when the session gains an entry or a finding's status changes.
"""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.template.loader import render_to_string
from django.urls import reverse

from explorer import items, queries, services
from explorer.models import SecretFinding
from tests.secrets.seeded import build_session

pytestmark = pytest.mark.django_db

TOKEN = re.compile(r'name="csrfmiddlewaretoken" value="[^"]+"|"X-CSRFToken": "[^"]+"')
ROWS = re.compile(r'<li id="e-.*</li>', re.S)  # from the first row to the last


def _rows(body: str) -> str:
    """The transcript rows of a page or htmx page, tokens made alike."""
    found = ROWS.search(body.split('<ol class="transcript"', 1)[-1])
    assert found, body[:400]
    rows = found.group(0)
    for sentinel in ('<li class="t-more', '<li class="t-tail'):
        rows = rows.split(sentinel, 1)[0]
    return TOKEN.sub('name="csrfmiddlewaretoken" value="T"', rows)


def _tokens(body: str) -> set[str]:
    return set(re.findall(r'name="csrfmiddlewaretoken" value="([^"]+)"', body))


def _transcript(session, query: str = "") -> str:
    return reverse("explorer:transcript", args=[session.pk]) + (f"?{query}" if query else "")


def _fresh_rows(session, rmap, start, end, reader: items.Reader) -> str:
    """Each item rendered for this reader, nothing kept: what the shared rows must equal."""
    built = items.window_items(session, rmap, start, end, target=None, leaf_q=None)
    ctx = {"session": session, "editable": reader.editable, "cursor_entry": reader.cursor_entry,
           "move_url": reader.move_url, "csrf_token": reader.csrf_token}  # fmt: skip
    return "".join(render_to_string(items.TRANSCRIPT_ROW, {**ctx, "it": it}) for it in built)


@pytest.mark.parametrize("editable", [False, True])
@pytest.mark.parametrize("cursor", [None, "c3d4e5f6", "d4e5f6a7"])
def test_shared_rows_are_the_bytes_of_a_fresh_render(make_session, editable, cursor):
    session = make_session()
    rmap = queries.route_map(session, queries.default_leaf_id(session))
    n = len(rmap.ids)
    move = reverse("explorer:transcript_cursor", args=[session.pk])
    builder = items.Reader(editable, "a1b2c3d4", "tokenOfTheBuilder", move)
    reader = items.Reader(editable, cursor, "tokenOfTheReader", move)
    cache.clear()
    items.window_html(session, rmap, 0, n, target=None, leaf_q=None, reader=builder)
    shared = items.window_html(session, rmap, 0, n, target=None, leaf_q=None, reader=reader)
    assert str(shared) == _fresh_rows(session, rmap, 0, n, reader)
    assert "tokenOfTheBuilder" not in shared
    assert "tokenOfTheReader" in shared


def test_a_cached_page_is_the_page_rendered_afresh(make_session, editor_client):
    session = make_session()
    url = _transcript(session)
    cache.clear()
    first = editor_client.get(url).content.decode()
    second = editor_client.get(url).content.decode()  # from the kept rows
    assert TOKEN.sub("T", first) == TOKEN.sub("T", second)
    assert "Undo" in second and "your cursor" in second


def test_a_viewer_never_gets_an_editors_controls_and_back(
    make_session, editor_client, viewer_client
):
    session = make_session()
    url = _transcript(session)
    for first, second in ((editor_client, viewer_client), (viewer_client, editor_client)):
        cache.clear()
        first.get(url)
        body = second.get(url).content.decode()
        undo = f'action="/sessions/{session.pk}/undo/"'
        assert (undo in body) is (second is editor_client)
        assert ("Hidden from the model" in body) and ("move my cursor here" in body)


def _row_of(body: str, entry_id: str) -> str:
    return body.split(f'data-entry="{entry_id}"', 1)[1].split("</li>", 1)[0]


def test_each_reader_gets_their_own_cursor_row(make_session, viewer_client, django_user_model):
    from explorer.permissions import set_role

    session = make_session()
    moved = django_user_model.objects.create_user(username="mo", password="pw-mo")
    set_role(moved, "viewer")
    services.move_cursor(session, moved, "d4e5f6a7")
    services.move_cursor(session, viewer_client.user, "b2c3d4e5")
    from django.test import Client

    mover = Client()
    mover.force_login(moved)
    url = _transcript(session, "leaf=1b2c3d4e")  # the same route (and window) for both
    for first, second in ((mover, viewer_client), (viewer_client, mover)):
        cache.clear()
        first.get(url)
        body = second.get(url).content.decode()
        own, other = ("d4e5f6a7", "b2c3d4e5") if second is mover else ("b2c3d4e5", "d4e5f6a7")
        assert "your cursor" in _row_of(body, own)
        assert "your cursor" not in _row_of(body, other)
        assert "move my cursor here" in _row_of(body, other)


def test_two_readers_pages_carry_their_own_csrf_tokens(
    make_session, viewer_user, csrf_client_factory, django_user_model
):
    from explorer.permissions import set_role

    session = make_session()
    other = django_user_model.objects.create_user(username="olga", password="pw-olga")
    set_role(other, "viewer")
    a, b = csrf_client_factory(viewer_user), csrf_client_factory(other)
    url = _transcript(session)
    body_a = a.get(url).content.decode()
    body_b = b.get(url).content.decode()  # the rows kept for a's page
    assert _rows(body_a) == _rows(body_b)
    token_a, token_b = _tokens(_rows_raw(body_a)), _tokens(_rows_raw(body_b))
    assert len(token_a) == 1 and len(token_b) == 1
    move = reverse("explorer:transcript_cursor", args=[session.pk])
    # Each reader's rows carry a token good for that reader's own session alone.
    (ta,), (tb,) = token_a, token_b
    assert b.post(move, {"target": "a1b2c3d4", "csrfmiddlewaretoken": ta}).status_code == 403
    assert a.post(move, {"target": "a1b2c3d4", "csrfmiddlewaretoken": ta}).status_code == 302
    assert b.post(move, {"target": "b2c3d4e5", "csrfmiddlewaretoken": tb}).status_code == 302


def _rows_raw(body: str) -> str:
    found = ROWS.search(body.split('<ol class="transcript"', 1)[-1])
    assert found
    return found.group(0)


def test_an_append_makes_the_rows_stale_at_once(make_session, viewer_client, editor_user):
    session = make_session()
    url = _transcript(session)
    assert "freshly appended" not in viewer_client.get(url).content.decode()
    services.rename_session(session, editor_user, "freshly appended name")
    assert "freshly appended" in viewer_client.get(url).content.decode()


def test_a_false_positive_makes_the_rows_stale_at_once(make_session, viewer_client, editor_client):
    data, _, secrets = build_session()
    session = make_session(data)
    key = secrets["aws-access-key"]
    url = _transcript(session, "entry=00000001")
    assert key not in viewer_client.get(url).content.decode()
    finding = SecretFinding.objects.filter(session=session, kind="aws-access-key").first()
    status_url = reverse("explorer:finding_status", args=[session.pk, finding.pk])
    assert editor_client.post(status_url, {"status": "false_positive"}).status_code == 302
    assert key in viewer_client.get(url).content.decode()
    assert editor_client.post(status_url, {"status": "rotated"}).status_code == 302
    assert key not in viewer_client.get(url).content.decode()


def test_a_review_comment_shows_on_the_kept_rows_at_once(make_session, viewer_client, editor_user):
    session = make_session()
    url = _transcript(session)
    assert "💬" not in viewer_client.get(url).content.decode()
    services.add_comment(session, editor_user, "d4e5f6a7", "look here")
    assert "💬 1" in viewer_client.get(url).content.decode()


def test_the_htmx_page_and_the_full_page_agree(make_session, viewer_client, tmp_path):
    from benchmarks.gen_session import generate_session

    path = tmp_path / "long.jsonl"
    generate_session(str(path), entries=400, branch_points=2, seed=3)
    session = make_session(path.read_bytes())
    leaf = queries.cursor_id(session, viewer_client.user)
    rmap = queries.route_map(session, leaf)
    n = len(rmap.ids)
    assert n > 61
    page = viewer_client.get(_transcript(session)).content.decode()  # the last 60 entries
    cache.clear()  # the htmx page renders its rows afresh
    part = viewer_client.get(
        _transcript(session, f"after={rmap.ids[n - 61]}"), HTTP_HX_REQUEST="true"
    ).content.decode()
    assert "<html" not in part
    assert _rows(page) == _rows(part)
    assert _rows(page).count('<li id="e-') == 60


# --- the other shared fragments: the Tree tab's text tree panel, the Compactions detail, the
# raw vs projected rows of a viewer -----------------------------------------------------------

SECTIONS = {
    "tree-panel": re.compile(r'<section id="tree-panel".*?</section>', re.S),
    "compaction-detail": re.compile(r'<section id="compaction-detail".*?\n</section>', re.S),
    "align-table": re.compile(r'<table class="align-table".*?</table>', re.S),
    "timeline-panel": re.compile(r'<section id="timeline-panel".*?\n</section>', re.S),
    "search-results": re.compile(r'<section id="search-results".*?</section>', re.S),
}


def _section(body: str, name: str) -> str:
    found = SECTIONS[name].search(body)
    assert found, (name, body[:300])
    return TOKEN.sub("T", found.group(0))


def _page_and_partial(client, url: str, partial_query: str, section: str) -> None:
    """The page drawn afresh, the page from the kept fragment and its htmx partial (kept and
    afresh) show the very same section."""
    cache.clear()
    fresh = client.get(url).content.decode()
    kept = client.get(url).content.decode()
    assert TOKEN.sub("T", fresh) == TOKEN.sub("T", kept)
    sep = "&" if "?" in url else "?"
    part = client.get(url + sep + partial_query, HTTP_HX_REQUEST="true").content.decode()
    cache.clear()
    part_fresh = client.get(url + sep + partial_query, HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in part
    assert _section(part, section) == _section(kept, section) == _section(part_fresh, section)


def test_the_tree_panel_is_kept_and_agrees_with_its_partial(make_session, viewer_client):
    session = make_session()
    url = reverse("explorer:session_detail", args=[session.pk])
    _page_and_partial(viewer_client, url, "partial=tree-panel", "tree-panel")
    body = viewer_client.get(url + "?filter=user").content.decode()  # the filter is named
    assert 'class="chip on" data-filter="user"' in body


def test_the_tree_panel_goes_stale_at_once(make_session, viewer_client, editor_user):
    session = make_session()
    url = reverse("explorer:session_detail", args=[session.pk])
    assert "newly named" not in _section(viewer_client.get(url).content.decode(), "tree-panel")
    services.set_label(session, editor_user, "b2c3d4e5", "newly named")
    assert "newly named" in _section(viewer_client.get(url).content.decode(), "tree-panel")


def test_the_live_tab_shows_the_kept_tree_panel(make_session, viewer_client):
    session = make_session()
    tree = reverse("explorer:session_detail", args=[session.pk])
    live = reverse("explorer:live", args=[session.pk])
    cache.clear()
    from_tree = _section(viewer_client.get(tree).content.decode(), "tree-panel")
    assert _section(viewer_client.get(live).content.decode(), "tree-panel") == from_tree


@pytest.mark.pi_fixtures
def test_the_compaction_detail_is_kept_and_agrees_with_its_partial(make_session, viewer_client):
    from tests.conftest import PI_FIXTURES

    session = make_session((PI_FIXTURES / "before-compaction.jsonl").read_bytes())
    url = reverse("explorer:compactions", args=[session.pk])
    body = viewer_client.get(url).content.decode()
    chosen = re.findall(r'href="\?c=([0-9a-f]+)', body)
    assert len(chosen) == 2
    _page_and_partial(viewer_client, url, f"c={chosen[-1]}", "compaction-detail")  # the newest
    _page_and_partial(viewer_client, url + f"?c={chosen[0]}", "x=1", "compaction-detail")
    first = _section(
        viewer_client.get(url + f"?c={chosen[0]}").content.decode(), "compaction-detail"
    )
    second = _section(
        viewer_client.get(url + f"?c={chosen[1]}").content.decode(), "compaction-detail"
    )
    assert chosen[0] in first and chosen[1] in second and first != second


def test_the_viewers_rows_are_kept_and_an_editors_are_their_own(
    make_session, viewer_client, editor_client
):
    session = make_session()
    url = reverse("explorer:context", args=[session.pk])
    _page_and_partial(viewer_client, url, "window=200000", "align-table")
    for first, second in ((editor_client, viewer_client), (viewer_client, editor_client)):
        cache.clear()
        first.get(url)
        body = second.get(url).content.decode()
        table = SECTIONS["align-table"].search(body).group(0)
        assert ("Undo (restore)" in table) is (second is editor_client)
        assert ("csrfmiddlewaretoken" in table) is (second is editor_client)


def test_a_false_positive_makes_the_kept_rows_stale_at_once(
    make_session, viewer_client, editor_client
):
    data, _, secrets = build_session()
    session = make_session(data)
    key = secrets["aws-access-key"]
    url = reverse("explorer:context", args=[session.pk]) + "?limit=1000"
    assert key not in _section(viewer_client.get(url).content.decode(), "align-table")
    finding = SecretFinding.objects.filter(session=session, kind="aws-access-key").first()
    status_url = reverse("explorer:finding_status", args=[session.pk, finding.pk])
    assert editor_client.post(status_url, {"status": "false_positive"}).status_code == 302
    assert key in _section(viewer_client.get(url).content.decode(), "align-table")


def test_the_timeline_is_kept_and_agrees_with_its_partial(make_session, viewer_client):
    session = make_session()
    url = reverse("explorer:timeline", args=[session.pk])
    _page_and_partial(viewer_client, url, "x=1", "timeline-panel")
    body = viewer_client.get(url).content.decode()
    assert "<svg" in _section(body, "timeline-panel")
    other = viewer_client.get(url + "?leaf=e5f6a7b8").content.decode()  # another route
    assert _section(other, "timeline-panel") != _section(body, "timeline-panel")


def test_search_results_are_kept_per_query_and_agree_with_their_partial(
    make_session, viewer_client, editor_user
):
    session = make_session()
    url = reverse("explorer:session_search", args=[session.pk]) + "?q=hello"
    _page_and_partial(viewer_client, url, "type=message", "search-results")
    _page_and_partial(viewer_client, url, "x=1", "search-results")
    first = _section(viewer_client.get(url).content.decode(), "search-results")
    assert "<strong>2</strong> hits" in first and "again" not in first
    other = viewer_client.get(url.replace("hello", "route")).content.decode()
    assert "e5f6a7b8" in _section(other, "search-results")  # "Another route"
    services.set_label(session, editor_user, "b2c3d4e5", "hello again")  # an append
    grown = _section(viewer_client.get(url).content.decode(), "search-results")
    assert "<mark>hello</mark> again" in grown and "<strong>3</strong> hits" in grown


PANEL = re.compile(r'<div id="entry-panel".*\n</div>\n', re.S)


def _panel(body: str) -> str:
    body = body.split("</aside>", 1)[0]  # on the tree page, the panel is the aside's
    found = PANEL.search(body[body.index('<div id="entry-panel"') :])
    assert found, body[:300]
    return found.group(0)


@pytest.mark.parametrize("who", ["viewer", "editor"])
def test_the_entry_panel_is_kept_and_agrees_with_its_partial(
    make_session, viewer_client, editor_client, who
):
    client = viewer_client if who == "viewer" else editor_client
    session = make_session()
    entry = reverse("explorer:entry", args=[session.pk]) + "?id=d4e5f6a7"
    tree = reverse("explorer:session_detail", args=[session.pk]) + "?entry=d4e5f6a7"
    cache.clear()
    fresh = client.get(entry, HTTP_HX_REQUEST="true").content.decode()
    kept = client.get(entry, HTTP_HX_REQUEST="true").content.decode()
    page = client.get(tree).content.decode()
    assert TOKEN.sub("T", fresh) == TOKEN.sub("T", kept) == TOKEN.sub("T", _panel(page))
    assert ("Label…" in kept) is (who == "editor")  # an editor's controls, for editors alone
    assert len(_tokens(kept)) == 1  # the reader's own token, in every form of the panel


def test_an_entry_panel_never_carries_another_readers_controls_or_token(
    make_session, viewer_client, editor_client
):
    session = make_session()
    url = reverse("explorer:entry", args=[session.pk]) + "?id=d4e5f6a7"
    for first, second in ((editor_client, viewer_client), (viewer_client, editor_client)):
        cache.clear()
        built = first.get(url).content.decode()
        body = second.get(url).content.decode()
        assert ("Label…" in _panel(body)) is (second is editor_client)
        assert not (_tokens(_panel(built)) & _tokens(_panel(body)))
    assert viewer_client.get(url + "&format=json").json()["entry_id"] == "d4e5f6a7"


def test_a_viewers_context_panel_is_kept_per_leaf_and_window(make_session, viewer_client):
    session = make_session()
    url = reverse("explorer:context", args=[session.pk])
    cache.clear()
    default = viewer_client.get(url).content.decode()
    other = viewer_client.get(url + "?leaf=e5f6a7b8").content.decode()
    small = viewer_client.get(url + "?window=32000").content.decode()
    assert "e5f6a7b8 (shown)" in other and "e5f6a7b8 (shown)" not in default
    assert 'name="window" value="32000"' in small and 'name="window" value="32000"' not in default
    assert TOKEN.sub("T", viewer_client.get(url).content.decode()) == TOKEN.sub("T", default)
    bad = viewer_client.get(url + "?window=5")  # refused: drawn afresh, with its message
    assert bad.status_code == 400 and 'id="ctx-errors"' in bad.content.decode()
