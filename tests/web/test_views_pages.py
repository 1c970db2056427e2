"""Every explorer page renders as a full page and as its htmx partial."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import reverse

from explorer import queries
from explorer.models import Entry
from tests.conftest import PI_FIXTURES

PAGES = [
    ("explorer:session_detail", {}, "tree-and-graph"),
    ("explorer:entry", {"id": "b2c3d4e5"}, "entry-panel"),
    ("explorer:context", {}, "context-panel"),
    ("explorer:compactions", {}, "compaction-detail"),
    ("explorer:compare", {"a": "d4e5f6a7", "b": "e5f6a7b8"}, "compare-result"),
    ("explorer:timeline", {}, "timeline-panel"),
    ("explorer:session_search", {"q": "hello"}, "search-results"),
    ("explorer:integrity", {}, "integrity-panel"),
]


@pytest.fixture
def session(make_session):
    return make_session()


@pytest.mark.parametrize(("name", "params", "partial_id"), PAGES)
def test_it_renders_full_page(viewer_client, session, name, params, partial_id):
    r = viewer_client.get(reverse(name, args=[session.pk]), params)
    assert r.status_code == 200, r.content[:2000]
    html = r.content.decode()
    assert "<html" in html
    assert f'id="{partial_id}"' in html
    assert "Demo of a small session" in html


@pytest.mark.parametrize(("name", "params", "partial_id"), PAGES)
def test_it_renders_htmx_partial(viewer_client, session, name, params, partial_id):
    r = viewer_client.get(reverse(name, args=[session.pk]), params, headers={"HX-Request": "true"})
    assert r.status_code == 200
    html = r.content.decode()
    assert "<html" not in html
    assert f'id="{partial_id}"' in html


FORMS = [
    ("explorer:edit", {"target": "d4e5f6a7", "mode": "replace"}, "edit-form"),
    ("explorer:label", {"target": "d4e5f6a7"}, "label-form"),
    ("explorer:rename", {}, "rename-form"),
    ("explorer:navigate", {"target": "e5f6a7b8"}, "navigate-form"),
    ("explorer:compact", {}, "compact-form"),
]


@pytest.mark.parametrize(("name", "params", "partial_id"), FORMS)
def test_it_renders_action_forms_as_page_and_partial(
    editor_client, session, name, params, partial_id
):
    url = reverse(name, args=[session.pk])
    full = editor_client.get(url, params)
    assert full.status_code == 200
    assert "<html" in full.content.decode() and f'id="{partial_id}"' in full.content.decode()
    part = editor_client.get(url, params, headers={"HX-Request": "true"})
    assert part.status_code == 200
    assert "<html" not in part.content.decode() and f'id="{partial_id}"' in part.content.decode()


def test_it_serves_the_graph_as_svg(viewer_client, session):
    r = viewer_client.get(reverse("explorer:graph_svg", args=[session.pk]))
    assert r.status_code == 200
    assert r["Content-Type"] == "image/svg+xml; charset=utf-8"
    assert r.content.decode().lstrip().startswith("<svg")
    assert "default-src 'none'" in r["Content-Security-Policy"]


def test_it_unfolds_a_chain_on_request(viewer_client, session):
    r = viewer_client.get(reverse("explorer:tree_chain", args=[session.pk]), {"first": "b2c3d4e5"})
    html = r.content.decode()
    assert r.status_code == 200
    assert 'data-id="b2c3d4e5"' in html and 'data-id="c3d4e5f6"' in html


def test_permalinks_to_leaf_and_entry(viewer_client, session):
    r = viewer_client.get(
        reverse("explorer:session_detail", args=[session.pk]),
        {"leaf": "e5f6a7b8", "entry": "a1b2c3d4"},
    )
    html = r.content.decode()
    assert 'data-entry-id="a1b2c3d4"' in html  # the entry opens in the side panel
    ctx = viewer_client.get(
        reverse("explorer:context", args=[session.pk]), {"leaf": "e5f6a7b8"}
    ).content.decode()
    assert "Another route." in ctx and "The file says hello world." not in ctx


def test_unknown_entries_and_sessions_are_404(viewer_client, session):
    assert (
        viewer_client.get(reverse("explorer:entry", args=[session.pk]), {"id": "nope"}).status_code
        == 404
    )
    assert (
        viewer_client.get(reverse("explorer:session_detail", args=[session.pk + 999])).status_code
        == 404
    )


def test_entry_raw_json_loads_on_demand(viewer_client, session):
    url = reverse("explorer:entry", args=[session.pk])
    lazy = viewer_client.get(
        url, {"id": "b2c3d4e5"}, headers={"HX-Request": "true"}
    ).content.decode()
    assert "&quot;toolCall&quot;" not in lazy.split("raw-body")[1]
    raw = viewer_client.get(
        url, {"id": "b2c3d4e5", "raw": "1"}, headers={"HX-Request": "true"}
    ).content.decode()
    assert "&quot;toolCall&quot;" in raw and "<html" not in raw


def test_tool_calls_are_paired_with_results(viewer_client, session):
    html = viewer_client.get(
        reverse("explorer:entry", args=[session.pk]), {"id": "b2c3d4e5"}
    ).content.decode()
    assert "result in" in html and "c3d4e5f6" in html and "hello world" in html
    back = viewer_client.get(
        reverse("explorer:entry", args=[session.pk]), {"id": "c3d4e5f6"}
    ).content.decode()
    assert "Result of" in back and "b2c3d4e5" in back


def test_search_answers_as_a_narrow_retrieval_tool(viewer_client, session):
    r = viewer_client.get(reverse("explorer:search"), {"q": "hello world", "format": "json"})
    data = r.json()
    assert r.status_code == 200 and data["query"] == "hello world"
    hit = next(h for h in data["results"] if h["entry_id"] == "c3d4e5f6")
    assert hit["session"] == session.session_id and "hello world" in hit["snippet"]
    assert hit["url"].endswith(f"/sessions/{session.pk}/entry/?id=c3d4e5f6&raw=1")
    scoped = viewer_client.get(
        reverse("explorer:session_search", args=[session.pk]), {"q": "hello", "format": "json"}
    ).json()
    assert {h["entry_id"] for h in scoped["results"]} >= {"c3d4e5f6", "d4e5f6a7"}


# --- a long linear session: user turns and a paged, unfolded route ------------------------

LARGE = PI_FIXTURES / "large-session.jsonl"


def _route_of_large(session) -> tuple[list[str], set[str]]:
    """The imported fixture's entries in file order (it is one linear route), and its user
    messages (read from the parsed lines, not through the pages under test)."""
    ids, users = [], set()
    for eid, raw in (
        Entry.objects.filter(session=session).order_by("position").values_list("entry_id", "raw")
    ):
        d = json.loads(raw)
        ids.append(eid)
        if d.get("type") == "message" and d["message"].get("role") == "user":
            users.add(eid)
    assert len(ids) > 1000 and len(users) > 50  # the fixture is what these tests assume
    return ids, users


def _always_shown(ids: list[str], users: set[str]) -> set[str]:
    """The rows drawn outside any page: user turns, both ends, and a lone entry between
    two of them (folding one entry would save nothing)."""
    kept = users | {ids[0], ids[-1]}
    lone = {ids[i] for i in range(1, len(ids) - 1) if ids[i - 1] in kept and ids[i + 1] in kept}
    return kept | lone


def _tree_rows(html: str) -> list[tuple[str, str, str]]:
    """(kind, id, role) of every text-tree row, in order."""
    tree = (
        html.split('id="text-tree"', 1)[1].split("</ul>", 1)[0]
        if 'id="text-tree"' in html
        else html
    )
    return re.findall(r'<li [^>]*data-id="([^"]*)" data-kind="(\w+)" data-role="(\w+)"', tree)


@pytest.fixture
def large(make_session):
    return make_session(LARGE.read_bytes())


@pytest.mark.pi_fixtures
def test_a_linear_session_shows_its_user_turns_and_the_route_near_the_cursor(viewer_client, large):
    route, users = _route_of_large(large)
    html = viewer_client.get(reverse("explorer:session_detail", args=[large.pk])).content.decode()
    rows = _tree_rows(html)
    entry_ids = [eid for eid, kind, _ in rows if kind == "entry"]
    user_rows = {eid for eid, kind, role in rows if role == "user"}
    # User messages are rows (every one near the cursor, spread turns before it), in route
    # order; the rest are counted on the folded rows that hold them, so none goes unsaid.
    assert user_rows <= users and users & set(route[-200:]) <= user_rows
    tree = html.split('id="text-tree"', 1)[1].split("</ul>", 1)[0]
    folded = sum(int(n) for n in re.findall(r"· (\d+) user msgs? folded", tree))
    assert len(user_rows) + folded == len(users)
    assert len(user_rows - set(route[-200:])) >= queries.TREE_BUDGET // 8  # turns still read
    assert entry_ids == [e for e in route if e in set(entry_ids)]
    # The last page of the route (ending at the cursor) is unfolded entry by entry...
    assert route[-200:] == entry_ids[-200:]
    assert len(entry_ids) < 200 + len(users) + 5
    # ...and the folded stretch it cuts through offers the rest as "show N earlier".
    pages = [r for r in rows if r[1] == "page"]
    assert len(pages) == 1 and pages[0][0] == route[-200]
    m = re.search(
        r'<a class="tr-page-link" href="([^"]+)" hx-get="([^"]+)"[^>]*>↑ show (\d+) earlier', html
    )
    assert m is not None
    assert "before=" + route[-200] in m.group(1) and "before=" + route[-200] in m.group(2)
    # The graph reads as turns too, within the Tree tab's budget.
    nodes = int(re.search(r"Graph <span[^>]*>(\d+) nodes", html).group(1))
    assert 2 * queries.TREE_BUDGET // 5 < nodes <= queries.TREE_BUDGET * 1.3
    svg = viewer_client.get(reverse("explorer:graph_svg", args=[large.pk])).content.decode()
    assert svg.count("ge&#45;entry") >= len(user_rows - set(route[-200:]))


@pytest.mark.pi_fixtures
def test_show_earlier_loads_the_previous_page_of_the_route(viewer_client, large):
    route, _ = _route_of_large(large)
    html = viewer_client.get(reverse("explorer:session_detail", args=[large.pk])).content.decode()
    m = re.search(r'hx-get="([^"]+)"[^>]*>↑ show (\d+) earlier', html)
    shown = int(m.group(2))
    part = viewer_client.get(m.group(1).replace("&amp;", "&"), headers={"HX-Request": "true"})
    assert part.status_code == 200 and "<html" not in part.content.decode()
    rows = _tree_rows(part.content.decode())
    anchor = route.index(route[-200])
    assert [eid for eid, kind, _ in rows if kind == "entry"] == route[anchor - shown : anchor]


@pytest.mark.pi_fixtures
def test_route_pages_chain_across_many_pages(viewer_client, large):
    """A stretch longer than a page is loaded 200 at a time, each page offering the next."""
    route, _ = _route_of_large(large)
    url = reverse("explorer:tree_chain", args=[large.pk])
    first = viewer_client.get(
        url, {"before": route[700], "stop": route[1], "n": 699}, headers={"HX-Request": "true"}
    ).content.decode()
    rows = _tree_rows(first)
    assert rows[0][1] == "page" and rows[0][0] == route[500]  # 499 left: "show 200 earlier"
    assert "n=499" in first.replace("&amp;", "&")
    assert [eid for eid, kind, _ in rows[1:]] == route[500:700]
    later = viewer_client.get(
        url, {"after": route[10], "stop": route[300], "n": 290}, headers={"HX-Request": "true"}
    ).content.decode()
    rows = _tree_rows(later)
    assert [eid for eid, kind, _ in rows[:-1]] == route[11:211]
    assert rows[-1][1] == "page" and rows[-1][0] == route[210]
    last = viewer_client.get(
        url, {"after": route[210], "stop": route[300], "n": 90}, headers={"HX-Request": "true"}
    ).content.decode()
    assert [eid for eid, kind, _ in _tree_rows(last)] == route[211:301]  # ends at `stop`


@pytest.mark.pi_fixtures
def test_paging_links_work_without_script(viewer_client, large):
    route, _ = _route_of_large(large)
    # The user turns the folded graph draws on their own (the rest fold into chains).
    users = {
        i.entry_id
        for i in queries.folded_tree(large, cursor=route[-1]).graph.items
        if i.kind == "entry" and i.node is not None and i.node.role == "user"
    }
    detail = reverse("explorer:session_detail", args=[large.pk])
    # An anchor whose page starts and ends inside folded stretches (not at a user turn).
    k = next(
        k
        for k in range(600, 900)
        if not users & {route[k - 201], route[k - 200], route[k - 1], route[k]}
    )
    page = viewer_client.get(detail, {"before": route[k]}).content.decode()
    ids = {eid for eid, kind, _ in _tree_rows(page) if kind == "entry"}
    # Exactly the 200 entries before the anchor, besides the turns and ends always shown.
    assert ids == set(route[k - 200 : k]) | _always_shown(route, users)
    assert "↓ show" in page and "↑ show" in page  # both directions continue from here
    after = viewer_client.get(detail, {"after": route[99]}).content.decode()
    ids = {eid for eid, kind, _ in _tree_rows(after) if kind == "entry"}
    assert ids == set(route[100:300]) | _always_shown(route, users)
    centred = viewer_client.get(detail, {"entry": route[300]}).content.decode()
    rows = _tree_rows(centred)
    assert {eid for eid, kind, _ in rows if kind == "entry"} >= set(route[200:400])
    assert re.search(rf'class="tr tr-entry[^"]* selected" data-id="{route[300]}"', centred)


def test_compare_route_inputs_are_styled_text_fields(viewer_client, session):
    # The stylesheet styles input[type=text]: an input without a type is left unstyled.
    html = viewer_client.get(reverse("explorer:compare", args=[session.pk])).content.decode()
    for name in ("a", "b"):
        tag = re.search(rf'<input[^>]*name="{name}"[^>]*>', html).group(0)
        assert 'type="text"' in tag


def test_compare_says_when_route_a_matches_nothing(viewer_client, session):
    r = viewer_client.get(
        reverse("explorer:compare", args=[session.pk]), {"a": "no-such-leaf", "b": "e5f6a7b8"}
    )
    assert r.status_code == 200
    assert "No entry or label matches route A" in r.content.decode()


@pytest.mark.parametrize("scoped", [True, False])
def test_search_without_a_query_says_what_it_searches(viewer_client, session, scoped):
    url = (
        reverse("explorer:session_search", args=[session.pk])
        if scoped
        else reverse("explorer:search")
    )
    html = viewer_client.get(url).content.decode()
    results = re.search(r'<section id="search-results".*?</section>', html, re.S).group(0)
    assert 'class="empty-state"' in results and "summaries and labels" in results


def test_global_search_counts_its_results(viewer_client, session):
    html = viewer_client.get(reverse("explorer:search"), {"q": "hello"}).content.decode()
    assert re.search(r"<strong>\d+</strong> hits? in <strong>\d+</strong> sessions?\b", html)


def test_the_own_summary_box_of_navigate_has_an_accessible_name(editor_client, session):
    html = editor_client.get(
        reverse("explorer:navigate", args=[session.pk]), {"target": "e5f6a7b8"}
    ).content.decode()
    tag = re.search(r'<textarea[^>]*name="summary_text"[^>]*>', html).group(0)
    assert 'aria-label="' in tag


def test_a_permalink_to_a_missing_entry_says_so(viewer_client, make_session):
    session = make_session()
    url = reverse("explorer:session_detail", args=[session.pk])
    html = viewer_client.get(url, {"entry": "nope1234"}).content.decode()
    assert "This session has no entry &#x27;nope1234&#x27;" in html
    html = viewer_client.get(url, {"leaf": "nope5678"}).content.decode()
    assert "This session has no entry &#x27;nope5678&#x27;; showing your cursor" in html
    # An htmx fragment carries no notice (it would surface on a later page instead).
    viewer_client.get(url, {"leaf": "nope9"}, HTTP_HX_REQUEST="true")
    assert "nope9" not in viewer_client.get(url).content.decode()


def test_the_entry_panel_shows_the_newer_message_fields(viewer_client, make_session):
    """Pi 1.6.0's optional fields read in words; an absent duration shows nothing."""
    from explorer.session import jsonfmt

    header = {
        "type": "session",
        "version": 3,
        "id": "s-fields",
        "timestamp": "2026-11-20T10:00:00.000Z",
        "cwd": "/w",
    }
    timed = {
        "type": "message", "id": "a1", "parentId": None, "timestamp": "2026-11-20T10:00:01.000Z",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}],
                    "provider": "azure-openai-responses", "model": "gpt-x", "responseModel": "gpt-x-2",
                    "durationMs": 1234, "stopReason": "stop", "timestamp": 1},
    }  # fmt: skip
    untimed = {
        "type": "message", "id": "a2", "parentId": "a1", "timestamp": "2026-11-20T10:00:02.000Z",
        "message": {"role": "toolResult", "toolCallId": "c", "toolName": "read",
                    "content": [{"type": "text", "text": "x"}], "isError": False, "timestamp": 2},
    }  # fmt: skip
    data = b"".join(jsonfmt.dumps(x).encode() + b"\n" for x in (header, timed, untimed))
    session = make_session(data)
    url = reverse("explorer:entry", args=[session.pk])
    page = viewer_client.get(url, {"id": "a1"}).content.decode()
    assert "took 1.2 s" in page and "gpt-x-2" in page
    other = viewer_client.get(url, {"id": "a2"}).content.decode()
    assert "took" not in other


def test_the_labelled_filter_lists_every_label_of_the_session(viewer_client, make_session):
    """Labels on rows the tree does not draw are listed too (from the session, not the rows)."""
    session = make_session()
    page = viewer_client.get(
        reverse("explorer:session_detail", args=[session.pk]), {"filter": "labelled"}
    ).content.decode()
    assert "Every label in this session (1)" in page
    assert 'id="all-labels" open' in page and "⚑ start" in page and "?entry=a1b2c3d4" in page
    other = viewer_client.get(reverse("explorer:session_detail", args=[session.pk])).content
    assert b'id="all-labels" open' not in other
