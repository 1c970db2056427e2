"""Archived branches: an editor sets aside an abandoned subtree with a reason (site data,
the file untouched), pages hide it unless asked, and a second download leaves it out."""

from __future__ import annotations

import json

import pytest

from explorer import services
from explorer.models import ArchivedBranch
from explorer.session.diagnostics import validate_bytes
from tests.conftest import SMALL_SESSION

pytestmark = pytest.mark.django_db

SIDE = "e5f6a7b8"  # the small session's abandoned branch (a sibling of the main route)
MAIN = "b2c3d4e5"  # the first entry of the route the session's own leaf is on


def _archive(client, session, target=SIDE, reason="dead end"):
    return client.post(f"/sessions/{session.pk}/archive/", {"target": target, "reason": reason})


def test_an_editor_archives_and_unarchives_a_branch(make_session, editor_client, editor_user):
    session = make_session()
    answer = _archive(editor_client, session)
    assert answer.status_code == 302
    row = ArchivedBranch.objects.get(session=session)
    assert (row.entry_id, row.reason, row.archived_by) == (SIDE, "dead end", editor_user)
    assert row.archived_at is not None
    panel = editor_client.get(f"/sessions/{session.pk}/?entry={SIDE}&archived=show").content
    assert b"Archived branch</strong> starts here: dead end" in panel
    assert b"Unarchive</button>" in panel
    answer = editor_client.post(f"/sessions/{session.pk}/unarchive/", {"target": SIDE})
    assert answer.status_code == 302
    assert not ArchivedBranch.objects.exists()
    panel = editor_client.get(f"/sessions/{session.pk}/?entry={SIDE}").content
    assert b"Archived branch</strong>" not in panel and b"Archive branch" in panel
    # Both are in the audit list: who, what, why.
    from explorer.models import AuditEvent

    events = list(AuditEvent.objects.order_by("pk").values_list("action", "target", "reason"))
    assert events == [("archive", SIDE, "dead end"), ("unarchive", SIDE, "")]
    assert all(e.user == editor_user for e in AuditEvent.objects.all())


def test_what_cannot_be_archived_is_refused_with_a_reason(make_session, editor_client):
    session = make_session()
    # The route to the session's own leaf offers no form (and a post is refused).
    assert (
        b"Archive branch" not in editor_client.get(f"/sessions/{session.pk}/?entry={MAIN}").content
    )
    answer = editor_client.post(
        f"/sessions/{session.pk}/archive/?format=json",
        {"target": MAIN, "reason": "no"},
        HTTP_ACCEPT="application/json",
    )
    assert answer.status_code == 400 and "current leaf" in answer.json()["message"]
    answer = _archive(editor_client, session, reason="   ")
    assert answer.status_code == 302
    assert not ArchivedBranch.objects.exists()
    follow = editor_client.get(answer["Location"]).content
    assert b"Say why the branch is archived" in follow
    _archive(editor_client, session, target="nope")
    _archive(editor_client, session)
    again = _archive(editor_client, session, reason="twice")
    assert "archived already" in editor_client.get(again["Location"]).content.decode()
    assert list(ArchivedBranch.objects.values_list("entry_id", "reason")) == [(SIDE, "dead end")]


def test_a_viewer_cannot_archive_and_writes_need_post_and_csrf(
    make_session, viewer_client, editor_user, csrf_client_factory
):
    session = make_session()
    assert _archive(viewer_client, session).status_code == 403
    assert (
        b"Archive branch" not in viewer_client.get(f"/sessions/{session.pk}/?entry={SIDE}").content
    )
    services.archive_branch(session, editor_user, SIDE, "dead end")
    unarchive = viewer_client.post(f"/sessions/{session.pk}/unarchive/", {"target": SIDE})
    assert unarchive.status_code == 403
    strict = csrf_client_factory(editor_user)
    assert strict.post(f"/sessions/{session.pk}/unarchive/", {"target": SIDE}).status_code == 403
    assert strict.get(f"/sessions/{session.pk}/archive/").status_code == 405
    assert ArchivedBranch.objects.count() == 1


def _rows(page: bytes) -> str:
    text = page.decode()
    return text[text.index('id="text-tree"') : text.index("</ul>", text.index('id="text-tree"'))]


def test_the_tree_and_graph_hide_an_archived_branch_until_shown(
    make_session, viewer_client, editor_user
):
    session = make_session()
    url = f"/sessions/{session.pk}/"
    before = viewer_client.get(url).content
    assert f'data-id="{SIDE}"'.encode() in before and b"archived \xc2\xb7" not in before
    services.archive_branch(session, editor_user, SIDE, "dead end")
    page = viewer_client.get(url)
    assert f'data-id="{SIDE}"' not in _rows(page.content)
    assert page.content.count("1 archived · show".encode()) == 2  # tree and graph heads
    svg = viewer_client.get(f"/sessions/{session.pk}/graph.svg").content.decode()
    assert svg.count("ge&#45;leaf") == 1 and f"entry={SIDE}" not in svg
    shown = viewer_client.get(f"{url}?archived=show").content
    rows = _rows(shown)
    assert f'data-id="{SIDE}"' in rows and 'class="tag tag-archived">archived<' in rows
    assert "1 archived · hide".encode() in shown
    svg = viewer_client.get(f"/sessions/{session.pk}/graph.svg?archived=show").content.decode()
    assert "ge&#45;archived ge&#45;leaf" in svg and f"entry={SIDE}" in svg
    # Unarchived: back as before, with no toggle.
    services.unarchive_branch(session, editor_user, SIDE)
    again = viewer_client.get(url).content
    assert f'data-id="{SIDE}"' in _rows(again) and b"archived \xc2\xb7" not in again


def test_the_tree_json_lists_every_node_and_says_which_branches_are_archived(
    make_session, viewer_client, editor_user
):
    session = make_session()
    services.archive_branch(session, editor_user, SIDE, "dead end")
    tree = viewer_client.get(f"/sessions/{session.pk}/?format=json").json()
    assert len(tree["nodes"]) == session.entry_count
    [listed] = tree["archived"]
    assert listed["entry_id"] == SIDE and listed["reason"] == "dead end"
    assert listed["archived_by"] == editor_user.username and listed["in_effect"] is True


# The small session, plus an entry under the abandoned branch, a label on that branch
# written on the main route, and the main route carrying on below the label.
WITH_LABEL = (
    SMALL_SESSION
    + b'{"type":"message","id":"cc33dd44","parentId":"e5f6a7b8","timestamp":"2025-03-04T05:11:00.000Z","message":{"role":"user","content":"try again","timestamp":1741065060000}}\n'
    + b'{"type":"label","id":"aa11bb22","parentId":"1b2c3d4e","timestamp":"2025-03-04T05:12:00.000Z","targetId":"e5f6a7b8","label":"side attempt"}\n'
    + b'{"type":"message","id":"bb22cc33","parentId":"aa11bb22","timestamp":"2025-03-04T05:13:00.000Z","message":{"role":"user","content":"carry on","timestamp":1741065180000}}\n'
)


def test_the_download_without_archived_branches_is_a_valid_session_that_imports_again(
    make_session, admin_client, editor_client, editor_user, admin_user
):
    session = make_session(WITH_LABEL)
    url = f"/sessions/{session.pk}/export.jsonl"
    assert b"".join(admin_client.get(url).streaming_content) == WITH_LABEL
    assert (
        b"Export without archived branches"
        not in admin_client.get(f"/sessions/{session.pk}/").content
    )
    services.archive_branch(session, editor_user, SIDE, "dead end")
    # The export stays byte-identical; the second download is offered beside it.
    assert b"".join(admin_client.get(url).streaming_content) == WITH_LABEL
    assert (
        b"Export without archived branches" in admin_client.get(f"/sessions/{session.pk}/").content
    )
    answer = admin_client.get(url + "?archived=without")
    assert "without-archived-" in answer["Content-Disposition"]
    data = b"".join(answer.streaming_content)
    report = validate_bytes(data)
    assert report.ok and not report.problems, [str(p.to_json()) for p in report.problems]
    lines = data.decode().splitlines()
    ids = [json.loads(line).get("id") for line in lines]
    assert SIDE not in ids and "cc33dd44" not in ids  # the archived branch
    assert "aa11bb22" not in ids  # its label would dangle
    assert json.loads(lines[-1])["parentId"] == "1b2c3d4e"  # hung from the label's parent
    kept = [line for line in WITH_LABEL.decode().splitlines() if json.loads(line)["id"] in ids]
    assert lines[:-1] == kept[:-1]  # every other line as stored
    # Secrets masked for a non-admin: still valid.
    masked = b"".join(editor_client.get(url + "?archived=without").streaming_content)
    assert validate_bytes(masked).ok
    # Re-imported (the original removed: a session id is stored once).
    services.delete_session(session, admin_user)
    again = make_session(data)
    assert again.entry_count == session.entry_count - 3
    page = admin_client.get(f"/sessions/{again.pk}/")
    assert page.status_code == 200 and b'data-id="bb22cc33"' in page.content


def test_switchers_pickers_and_search_leave_archived_branches_out_until_shown(
    make_session, viewer_client, editor_user
):
    session = make_session()
    base = f"/sessions/{session.pk}"
    # Before: the transcript's switcher offers both routes; the picker lists the side leaf.
    page = viewer_client.get(f"{base}/transcript/").content.decode()
    assert 'class="t-sw-pos">1/2<' in page and "archived · show" not in page
    assert f'<option value="{SIDE}">' in viewer_client.get(f"{base}/compare/").content.decode()
    assert SIDE in viewer_client.get(f"{base}/search/?q=another").content.decode()
    services.archive_branch(session, editor_user, SIDE, "dead end")
    # Transcript: one route left in the switcher, "1 archived · show" opens the archived one.
    page = viewer_client.get(f"{base}/transcript/").content.decode()
    assert 'class="t-sw-pos">1/1<' in page and "1 archived · show</a>" in page
    assert f"via={SIDE}" in page
    side = viewer_client.get(f"{base}/transcript/?via={SIDE}").content.decode()
    assert 'class="tag tag-archived">archived<' in side
    # Compare: the archived leaf left out of the picker, listed (marked) when shown.
    compare = viewer_client.get(f"{base}/compare/").content.decode()
    assert f'<option value="{SIDE}">' not in compare and "1 archived · show" in compare
    compare = viewer_client.get(f"{base}/compare/?archived=show").content.decode()
    assert f'<option value="{SIDE}">' in compare and "(archived)</option>" in compare
    assert f'<option value="{SIDE}">' not in viewer_client.get(f"{base}/context/").content.decode()
    # Search, in the session and across sessions: the hit left out, counted, shown marked.
    for url in (f"{base}/search/?q=another", "/search/?q=another"):
        hidden = viewer_client.get(url).content.decode()
        assert f"?entry={SIDE}" not in hidden and "1 archived · show" in hidden, url
        shown = viewer_client.get(url + "&archived=show").content.decode()
        assert f"?entry={SIDE}" in shown and 'class="tag tag-archived">archived<' in shown, url
    answer = viewer_client.get("/search/?q=another&format=json").json()
    assert answer["total"] == 0


def test_totals_leave_archived_branches_out_and_say_so(make_session, viewer_client, editor_user):
    session = make_session(WITH_LABEL)  # 11 entries, 2 leaves; the side branch: 2 and 1
    header = viewer_client.get(f"/sessions/{session.pk}/").content.decode()
    assert "<dt>Entries</dt><dd>11</dd>" in header and "<dt>Leaves</dt><dd>2</dd>" in header
    services.archive_branch(session, editor_user, SIDE, "dead end")
    header = viewer_client.get(f"/sessions/{session.pk}/transcript/").content.decode()
    assert "<dt>Entries</dt><dd>9 <span" in header and "+2 archived" in header
    assert "<dt>Leaves</dt><dd>1 <span" in header
    listing = viewer_client.get("/").content.decode()
    assert 'data-label="Entries">9 <span' in listing and 'data-label="Leaves">1</td>' in listing


def test_labels_and_unfolded_chains_stop_at_an_archived_branch(
    make_session, viewer_client, editor_user
):
    session = make_session(WITH_LABEL)
    base = f"/sessions/{session.pk}"
    assert "⚑ side attempt" in viewer_client.get(f"{base}/").content.decode()
    # Archived mid-chain: unfolding the chain from above lists the entries before it only.
    services.archive_branch(session, editor_user, "cc33dd44", "second try dropped")
    chain = viewer_client.get(f"{base}/tree/chain/?first={SIDE}").content.decode()
    assert f'data-id="{SIDE}"' in chain and 'data-id="cc33dd44"' not in chain
    services.archive_branch(session, editor_user, SIDE, "dead end")
    page = viewer_client.get(f"{base}/").content.decode()
    assert "⚑ side attempt" not in page and "1 archived · show" in page  # one inside the other
    # Inside a shown archived branch, its chains unfold whole.
    chain = viewer_client.get(f"{base}/tree/chain/?first=cc33dd44").content.decode()
    assert 'data-id="cc33dd44"' in chain


def _hidden_by_every_row(session, asked: list[str]) -> tuple[list[str], list[str], int, int]:
    """What the archives hide, worked out from every entry row (the whole tree's children):
    the reference the segment reading must equal."""
    from explorer import queries
    from explorer.archives import subtree_ids
    from explorer.models import Entry

    children: dict[str | None, list[str]] = {}
    for eid, parent in Entry.objects.filter(session=session).values_list("entry_id", "parent_id"):
        children.setdefault(parent, []).append(eid)
    tip = queries.default_leaf_id(session)
    roots, ids, below = [], set(), set()
    for eid in asked:
        under = subtree_ids(children, eid)
        if tip in under:
            continue
        roots.append(eid)
        ids |= under
        below |= under - {eid}
    leaves = sum(1 for i in ids if not children.get(i))
    return roots, sorted(ids), leaves, sum(1 for r in roots if r not in below)


def test_what_the_archives_hide_is_read_from_the_segments_as_from_every_row(make_session, tmp_path):
    """Nested archives, one whose subtree holds the session's own leaf (not in effect),
    roots in the middle of a chain and at branch points: the segments give what a walk of
    every entry's children gives."""
    import random

    from benchmarks.gen_session import generate_session
    from explorer import archives, queries
    from explorer.models import Entry

    path = generate_session(tmp_path / "s.jsonl", entries=900, branch_points=40, seed=3)
    session = make_session(path.read_bytes())
    ids = list(Entry.objects.filter(session=session).values_list("entry_id", flat=True))
    route = [e.entry_id for e in queries.light_path(session, queries.default_leaf_id(session))]
    rng = random.Random(5)
    for n in (1, 3, 8):
        asked = sorted({*rng.sample(ids, n), route[len(route) // 2]})
        expected = _hidden_by_every_row(session, asked)
        assert expected[0] and expected[1]  # something is hidden, the route's entry is not
        assert archives._hidden_by_segments(session, asked) == expected
