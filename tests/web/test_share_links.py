"""Share links across roles and anonymous readers: create, read, expire, revoke, a guessed
token, the guessing limit, a secret never shown, no write reachable from a share page, and
the shell commands."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from explorer import shares
from explorer.models import Entry, ShareLink, ShareView
from tests.secrets.seeded import build_session
from tests.web.test_secrets_pages import assert_no_secret

pytestmark = pytest.mark.django_db

SESSION_TABS = ("", "transcript/", "context/", "compactions/", "compare/", "timeline/")
SESSION_TABS += ("search/?q=hello", "integrity/")
ROUTE_TABS = ("transcript/", "context/", "compactions/", "timeline/")


@pytest.fixture(autouse=True)
def _fresh_guess_counts():
    cache.clear()  # the guessing counter lives in the cache, per address
    yield
    cache.clear()


def _share_url(editor_client, session, **form) -> str:
    """Create a link through the editors' page and return the URL it showed once."""
    form = {"scope": "session", "expires": "7d", **form}
    page = editor_client.post(reverse("explorer:session_shares", args=[session.pk]), form)
    assert page.status_code == 200, page.content[:500]
    m = re.search(r'value="(http://testserver/share/[^"]+)"', page.content.decode())
    assert m, "the new link is shown on the answer"
    return m.group(1).removeprefix("http://testserver")


def _tab(url: str, pk: int, tab: str) -> str:
    return f"{url}sessions/{pk}/{tab}"


def _assert_reader_page(response) -> str:
    assert response.status_code == 200, response.content[:300]
    assert response["Referrer-Policy"] == "no-referrer"
    assert "noindex" in response["X-Robots-Tag"]
    body = response.content.decode()
    if response["Content-Type"].startswith("text/html"):
        assert "default-src 'self'" in response["Content-Security-Policy"]
        # No write is reachable: no form that posts, no CSRF token, no edit or export control.
        assert 'method="post"' not in body.lower()
        assert "csrfmiddlewaretoken" not in body and "X-CSRFToken" not in body
        assert "Export JSONL" not in body and "Undo</button>" not in body
        assert "raw-json" not in body and "Log out" not in body
    assert "csrftoken" not in response.cookies
    return body


def test_only_editors_create_and_the_token_is_kept_as_a_hash(
    make_session, viewer_client, editor_client, client
):
    session = make_session()
    shares_url = reverse("explorer:session_shares", args=[session.pk])
    assert viewer_client.post(shares_url, {"scope": "session"}).status_code == 403
    assert viewer_client.get(shares_url).status_code == 403
    assert client.post(shares_url, {"scope": "session"}).status_code == 302  # to the login
    assert not ShareLink.objects.exists()
    detail = reverse("explorer:session_detail", args=[session.pk])
    assert b"Share\xe2\x80\xa6" not in viewer_client.get(detail).content
    assert "Share…".encode() in editor_client.get(detail).content
    url = _share_url(editor_client, session)
    token = url.split("/")[2]
    assert len(token) >= 43  # 32 random bytes: 256 bits
    link = ShareLink.objects.get()
    assert link.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in str(ShareLink.objects.values().get())
    assert link.created_by.username == "eddie" and not link.leaf_id
    assert timedelta(days=6, hours=23) < link.expires - timezone.now() <= timedelta(days=7)
    # Listed on the session's page (never with the token again) and on the admin page.
    listed = editor_client.get(shares_url).content.decode()
    assert "whole session" in listed and token not in listed and "eddie" in listed


def test_an_anonymous_reader_reads_every_tab_of_a_session_link(make_session, editor_client):
    session = make_session()
    url = _share_url(editor_client, session)
    reader = Client()
    opened = reader.get(url)
    assert opened.status_code == 302 and opened["Location"].startswith(url)
    assert opened["Referrer-Policy"] == "no-referrer"
    body = _assert_reader_page(reader.get(opened["Location"]))
    assert "The file says hello world." in body and "Shared read-only session" in body
    assert f'href="{url}sessions/{session.pk}/compactions/' in body  # tabs stay in the share
    assert f'"/sessions/{session.pk}/' not in body  # no link leaves it for a login page
    assert ">Live<" not in body and ">Review<" not in body
    for tab in SESSION_TABS:
        _assert_reader_page(reader.get(_tab(url, session.pk, tab)))
    panel = reader.get(_tab(url, session.pk, "entry/"), {"id": "c3d4e5f6"}, HTTP_HX_REQUEST="true")
    _assert_reader_page(panel)
    _assert_reader_page(reader.get(_tab(url, session.pk, "graph.svg")))
    # What a viewer has besides the tabs is not shared: the live tab, the file, reviews.
    for other in ("live/", "export.jsonl", "branch.jsonl", "review/", "secrets/", "shares/"):
        assert reader.get(_tab(url, session.pk, other)).status_code == 404, other
    assert (
        reader.get(_tab(url, session.pk, "entry/"), {"id": "c3d4e5f6", "raw": "1"}).status_code
        == 200
    )
    assert reader.get(_tab(url, session.pk, "transcript/"), {"format": "json"})[
        "Content-Type"
    ].startswith("text/html")
    other = make_session(
        b'{"type":"session","version":3,"id":"other-1","timestamp":"2025-03-04T05:06:07.089Z","cwd":"/x"}\n'
    )
    assert reader.get(_tab(url, other.pk, "transcript/")).status_code == 404
    link = ShareLink.objects.get()
    assert link.views >= len(SESSION_TABS) and link.last_viewed is not None
    assert ShareView.objects.filter(link=link).count() >= len(SESSION_TABS) + 2
    assert ShareView.objects.filter(path__contains="graph.svg").exists()


def test_a_route_link_shows_that_route_only(make_session, editor_client):
    session = make_session()
    url = _share_url(editor_client, session, scope="route", leaf="d4e5f6a7")
    assert ShareLink.objects.get().leaf_id == "d4e5f6a7"
    reader = Client()
    for tab in ROUTE_TABS:
        body = _assert_reader_page(reader.get(_tab(url, session.pk, tab)))
        assert "Another route." not in body, tab  # the sibling branch's text
    body = _assert_reader_page(reader.get(_tab(url, session.pk, "transcript/")))
    assert "hello world" in body and "route to" in body
    context = reader.get(_tab(url, session.pk, "context/")).content.decode()
    assert "e5f6a7b8" not in context  # the leaf picker offers the one route
    # A query naming the other branch is pinned back to the route; its entry is refused.
    pinned = reader.get(_tab(url, session.pk, "transcript/"), {"leaf": "e5f6a7b8"})
    assert "Another route." not in pinned.content.decode()
    assert reader.get(_tab(url, session.pk, "entry/"), {"id": "e5f6a7b8"}).status_code == 404
    assert reader.get(_tab(url, session.pk, "entry/"), {"id": "c3d4e5f6"}).status_code == 200
    for tab in ("", "compare/", "search/?q=route", "integrity/", "tree/chain/"):
        assert reader.get(_tab(url, session.pk, tab)).status_code == 404, tab


def test_a_route_link_does_not_show_the_branch_a_summary_left(db):
    from tests.web.test_summary_diffs import _session

    session = _session()
    route = shares.create(session, leaf_id="u5")
    whole = shares.create(session)
    reader = Client()
    for new, shown in ((route, False), (whole, True)):
        page = reader.get(_tab(new.path, session.pk, "compactions/"), {"leaf": "u5", "b": "b1"})
        body = _assert_reader_page(page)
        assert ("Summarised route" in body) is shown
        assert ("lib/tokenize.py calls split_lines" in body) is shown  # the left branch


def test_expired_and_revoked_links_answer_410_at_once(make_session, editor_client, admin_client):
    session = make_session()
    url = _share_url(editor_client, session)
    reader = Client()
    assert reader.get(_tab(url, session.pk, "transcript/")).status_code == 200
    link = ShareLink.objects.get()
    ShareLink.objects.filter(pk=link.pk).update(expires=timezone.now() - timedelta(seconds=1))
    gone = reader.get(_tab(url, session.pk, "transcript/"))
    assert gone.status_code == 410 and b"expired" in gone.content
    assert b"<script" not in gone.content and gone["Referrer-Policy"] == "no-referrer"
    url2 = _share_url(editor_client, session)
    link2 = ShareLink.objects.exclude(pk=link.pk).get()
    assert reader.get(url2).status_code == 302
    revoke = reverse("explorer:share_revoke", args=[session.pk, link2.pk])
    assert Client().post(revoke).status_code == 302  # to the login: nothing revoked
    assert reader.get(url2).status_code == 302
    assert editor_client.post(revoke).status_code == 302
    gone = reader.get(_tab(url2, session.pk, "timeline/"))
    assert gone.status_code == 410 and b"revoked" in gone.content
    assert reader.get(url2).status_code == 410
    # The admin page lists both with creator, scope, dates, views and state.
    page = admin_client.get(reverse("explorer:shares")).content.decode()
    assert page.count("eddie") == 2 and "revoked" in page and "expired" in page
    assert editor_client.get(reverse("explorer:shares")).status_code == 403


def test_a_guessed_token_is_refused_and_guessing_is_limited(make_session, editor_client):
    session = make_session()
    url = _share_url(editor_client, session)
    guesser = Client(REMOTE_ADDR="10.9.8.7")
    other = Client(REMOTE_ADDR="10.9.8.6")
    with override_settings(SESSIONS_SHARE_GUESS_LIMIT=3):
        for n in range(3):
            guess = guesser.get(f"/share/{'A' * 43}{n}/sessions/{session.pk}/transcript/")
            assert guess.status_code == 404 and guess["X-Robots-Tag"].startswith("noindex")
        blocked = guesser.get(url)  # even the right token, from that address, waits
        assert blocked.status_code == 429 and blocked["Retry-After"]
        assert other.get(url).status_code == 302  # another address is not held up
    assert ShareView.objects.filter(address="10.9.8.7").count() == 0


def test_no_write_is_reachable_from_a_share_page(make_session, editor_client):
    session = make_session()
    url = _share_url(editor_client, session, with_reviews="1")
    reader = Client(enforce_csrf_checks=True)
    before = Entry.objects.filter(session=session).count()
    for tab in ("transcript/", "review/", "entry/?id=c3d4e5f6"):
        _assert_reader_page(reader.get(_tab(url, session.pk, tab)))
        # Refused by the CSRF check, and without it (a lax client) by the method.
        assert reader.post(_tab(url, session.pk, tab), {"target": "a"}).status_code == 403
        assert Client().post(_tab(url, session.pk, tab), {"target": "a"}).status_code == 405
    for name in ("edit", "label", "rename", "navigate", "transcript_cursor", "comment_add"):
        posted = reader.post(reverse(f"explorer:{name}", args=[session.pk]), {"target": "a1b2c3d4"})
        assert posted.status_code in (302, 403), name  # a login, or CSRF: never a write
    assert Client().post(url).status_code == 405
    assert Entry.objects.filter(session=session).count() == before


def test_review_threads_only_when_the_link_carries_them(make_session, editor_client):
    session = make_session()
    posted = editor_client.post(
        reverse("explorer:comment_add", args=[session.pk]),
        {"entry": "d4e5f6a7", "body": "A reviewer's note"},
    )
    assert posted.status_code in (200, 302)
    plain = _share_url(editor_client, session)
    with_threads = _share_url(editor_client, session, with_reviews="1")
    reader = Client()
    body = _assert_reader_page(reader.get(_tab(plain, session.pk, "transcript/")))
    assert "t-comments" not in body and ">Review" not in body
    assert reader.get(_tab(plain, session.pk, "review/")).status_code == 404
    assert (
        reader.get(_tab(plain, session.pk, "review/entry/"), {"entry": "d4e5f6a7"}).status_code
        == 404
    )
    body = _assert_reader_page(reader.get(_tab(with_threads, session.pk, "transcript/")))
    assert "t-comments" in body and ">Review (1)<" in body
    review = _assert_reader_page(reader.get(_tab(with_threads, session.pk, "review/")))
    assert "A reviewer&#x27;s note" in review or "A reviewer's note" in review


def test_a_secret_is_never_shown_through_a_link(make_session, editor_client):
    data, _seeds, secrets = build_session()
    session = make_session(data)
    url = _share_url(editor_client, session, with_reviews="1")
    reader = Client()
    ids = list(Entry.objects.filter(session=session).values_list("entry_id", flat=True))
    for tab in (*SESSION_TABS, "review/", "graph.svg", "search/?q=REDACTED"):
        body = reader.get(_tab(url, session.pk, tab)).content.decode()
        assert_no_secret(body, secrets, tab)
    for eid in ids:
        for extra in ({}, {"raw": "1"}, {"full": "1"}):
            got = reader.get(_tab(url, session.pk, "entry/"), {"id": eid, **extra})
            assert_no_secret(got.content.decode(), secrets, f"entry {eid} {extra}")


def test_the_expiry_is_capped_by_the_setting(make_session, editor_client):
    session = make_session()
    shares_url = reverse("explorer:session_shares", args=[session.pk])
    with override_settings(SESSIONS_SHARE_MAX_DAYS=3):
        refused = editor_client.post(shares_url, {"scope": "session", "expires": "4d"})
        assert refused.status_code == 400 and b"at most 3 days" in refused.content
        bad = editor_client.post(shares_url, {"scope": "session", "expires": "soon"})
        assert bad.status_code == 400 and b"not like 7d" in bad.content
        assert (
            editor_client.post(shares_url, {"scope": "session", "expires": "12h"}).status_code
            == 200
        )
    assert ShareLink.objects.count() == 1
    nowhere = editor_client.post(shares_url, {"scope": "route", "leaf": "nope"})
    assert nowhere.status_code == 400 and b"no entry" in nowhere.content


def test_the_shell_creates_lists_and_revokes(make_session):
    session = make_session()
    out = StringIO()
    call_command("share", "create", session.session_id, "--leaf", "d4e5f6a7", "--json", stdout=out)
    made = json.loads(out.getvalue())
    assert made["scope"] == "route" and made["leaf"] == "d4e5f6a7"
    assert made["url"].startswith("http://127.0.0.1:8000/share/")
    token = made["url"].rstrip("/").rsplit("/", 1)[1]
    assert Client().get(f"/share/{token}/").status_code == 302
    out = StringIO()
    call_command("share", "create", session.session_id, "--expires", "2h", stdout=out)
    assert out.getvalue().strip().startswith("http://127.0.0.1:8000/share/")
    out = StringIO()
    call_command("share", "list", "--json", stdout=out)
    listed = json.loads(out.getvalue())
    assert [r["id"] for r in listed] == sorted((r["id"] for r in listed), reverse=True)
    assert {r["state"] for r in listed} == {"active"} and "url" not in listed[0]
    call_command("share", "revoke", str(made["id"]), stdout=StringIO())
    assert Client().get(f"/share/{token}/").status_code == 410
    out = StringIO()
    call_command("share", "list", stdout=out)
    assert "revoked" in out.getvalue()
    with pytest.raises(CommandError, match="at most"):
        call_command("share", "create", session.session_id, "--expires", "400d")
    with pytest.raises(CommandError, match="No session"):
        call_command("share", "create", "no-such-session")
    with pytest.raises(CommandError, match="No share link"):
        call_command("share", "revoke", "99999")


def test_parse_expiry():
    assert shares.parse_expiry(None) == timedelta(days=7)
    assert shares.parse_expiry("30m") == timedelta(minutes=30)
    with pytest.raises(shares.ShareError):
        shares.parse_expiry("0d")
