"""Review comments: threads and replies on entries, sanitised markdown, masked secrets,
resolving, approved / flagged statuses, the roles and CSRF; never in the session file."""

from __future__ import annotations

import pytest
from django.urls import reverse

from explorer import queries
from explorer.models import EntryReview, ReviewComment
from tests.secrets.seeded import make_secrets

pytestmark = pytest.mark.django_db

ENTRY = "d4e5f6a7"


def add(client, session, body: str, *, entry: str = ENTRY, parent: int | None = None):
    data = {"body": body, "entry": entry}
    if parent:
        data["parent"] = str(parent)
    return client.post(reverse("explorer:comment_add", args=[session.pk]), data)


def test_viewers_comment_and_reply_in_one_thread(make_session, viewer_client, editor_client):
    session = make_session()
    before = session.entry_count
    assert add(viewer_client, session, "Is this **right**?").status_code == 302
    root = ReviewComment.objects.get()
    assert add(editor_client, session, "Yes.", parent=root.pk).status_code == 302
    reply = ReviewComment.objects.get(parent=root)
    # a reply to a reply joins the same thread (one level deep)
    add(viewer_client, session, "Thanks", parent=reply.pk)
    assert ReviewComment.objects.filter(parent=root).count() == 2
    threads = queries.review_threads(session)
    assert len(threads) == 1 and [r["text"] for r in threads[0]["replies"]] == ["Yes.", "Thanks"]
    page = viewer_client.get(reverse("explorer:review", args=[session.pk])).content.decode()
    assert "<strong>right</strong>" in page and "Review (1)" in page
    # site data only: the session file is unchanged
    session.refresh_from_db()
    assert session.entry_count == before
    transcript = viewer_client.get(f"/sessions/{session.pk}/transcript/").content.decode()
    assert "t-comments" in transcript and "💬 3" in transcript


def test_markdown_is_sanitised_and_secrets_masked(make_session, viewer_client):
    session = make_session()
    token = make_secrets()["github-token"]
    add(
        viewer_client,
        session,
        f"<script>alert(1)</script> <img src=x onerror=alert(2)> key {token}",
    )
    body = viewer_client.get(reverse("explorer:review", args=[session.pk])).content.decode()
    panel = body.split('id="review-panel"', 1)[1]
    assert "<script>alert(1)" not in panel and "<img" not in panel  # shown as text, inert
    assert "&lt;script&gt;alert(1)" in panel
    assert token not in body and "[REDACTED:github-token]" in body
    data = viewer_client.get(
        reverse("explorer:review", args=[session.pk]), {"format": "json"}
    ).json()
    assert token not in str(data) and data["counts"]["open"] == 1
    assert ReviewComment.objects.get().body.endswith(token)  # stored as typed


def test_only_the_author_or_an_admin_edits_or_deletes(
    make_session, viewer_client, editor_client, admin_client
):
    session = make_session()
    add(viewer_client, session, "first")
    c = ReviewComment.objects.get()
    url = reverse("explorer:comment_edit", args=[session.pk, c.pk])
    assert editor_client.post(url, {"body": "hijack"}).status_code == 403
    assert viewer_client.post(url, {"body": "second"}).status_code == 302
    c.refresh_from_db()
    assert c.body == "second" and c.edited is not None
    assert viewer_client.post(url, {"body": ""}).status_code == 400
    assert admin_client.post(url, {"delete": "1"}).status_code == 302
    assert not ReviewComment.objects.exists()


def test_resolving_a_thread_and_the_open_list(make_session, viewer_client, editor_client, client):
    session = make_session()
    add(editor_client, session, "editor thread")
    root = ReviewComment.objects.get()
    url = reverse("explorer:thread_resolve", args=[session.pk, root.pk])
    assert viewer_client.post(url).status_code == 403  # not the author, not an editor
    assert editor_client.post(url).status_code == 302
    root.refresh_from_db()
    assert root.resolved_at is not None and root.resolved_by.username == "eddie"
    assert queries.review_counts(session)["open"] == 0
    review = reverse("explorer:review", args=[session.pk])
    assert "editor thread" not in viewer_client.get(review).content.decode()
    assert "editor thread" in viewer_client.get(review, {"state": "resolved"}).content.decode()
    assert editor_client.post(url, {"reopen": "1"}).status_code == 302
    assert queries.review_counts(session)["open"] == 1
    assert client.get(review).status_code == 302  # anonymous: to the login page


def test_approved_and_flagged_statuses(make_session, viewer_client, editor_client):
    session = make_session()
    url = reverse("explorer:entry_status", args=[session.pk])
    assert viewer_client.post(url, {"entry": ENTRY, "status": "approved"}).status_code == 302
    editor_client.post(url, {"entry": ENTRY, "status": "flagged"})
    review = EntryReview.objects.get()
    assert review.status == "flagged" and review.by.username == "eddie"
    panel = viewer_client.get(
        reverse("explorer:review_entry", args=[session.pk]), {"entry": ENTRY},
        HTTP_HX_REQUEST="true",
    ).content.decode()  # fmt: skip
    assert "flagged" in panel and "by eddie" in panel
    assert viewer_client.post(url, {"entry": "nope", "status": "approved"}).status_code == 400
    assert viewer_client.post(url, {"entry": ENTRY, "status": "evil"}).status_code == 400
    viewer_client.post(url, {"entry": ENTRY, "status": ""})
    assert not EntryReview.objects.exists()


def test_csrf_is_required_and_unknown_targets_are_refused(
    make_session, csrf_client_factory, viewer_user, viewer_client, small_session_bytes
):
    session = make_session()
    strict = csrf_client_factory(viewer_user)
    assert add(strict, session, "no token").status_code == 403
    assert not ReviewComment.objects.exists()
    add(viewer_client, session, "on nothing", entry="missing")
    assert not ReviewComment.objects.exists()
    other = make_session(small_session_bytes.replace(b"0195f3a2-7c41", b"0195f3a2-7c42"))
    assert other.pk != session.pk
    add(viewer_client, session, "mine")
    c = ReviewComment.objects.get()
    url = reverse("explorer:comment_edit", args=[other.pk, c.pk])
    assert viewer_client.post(url, {"body": "x"}).status_code == 404  # not this session's


def test_the_entry_panel_loads_the_review_section(make_session, viewer_client):
    session = make_session()
    panel = viewer_client.get(f"/sessions/{session.pk}/entry/", {"id": ENTRY}).content.decode()
    assert reverse("explorer:review_entry", args=[session.pk]) in panel


def test_the_review_tab_shows_every_entrys_status(make_session, viewer_client, editor_client):
    """Approved and flagged entries are listed on the Review tab, threads or not, and a
    thread's header says its entry's status (the tab once showed neither)."""
    session = make_session()
    url = reverse("explorer:entry_status", args=[session.pk])
    editor_client.post(url, {"entry": "b2c3d4e5", "status": "approved"})
    editor_client.post(url, {"entry": ENTRY, "status": "flagged"})
    add(viewer_client, session, "Why this answer?")
    page = viewer_client.get(reverse("explorer:review", args=[session.pk])).content.decode()
    listed = page.split('id="review-statuses"')[1].split("</section>")[0]
    assert "1 approved · 1 flagged" in listed
    assert '<span class="tag tag-approved">approved</span> <a class="mono"' in listed
    assert "#b2c3d4e5" in listed and f"#{ENTRY}" in listed and "by eddie" in listed
    thread = page.split('class="review-thread')[1].split("</header>")[0]
    assert ">entry flagged</span>" in thread
    data = viewer_client.get(
        reverse("explorer:review", args=[session.pk]), {"format": "json"}
    ).json()
    assert data["status_counts"] == {"approved": 1, "flagged": 1}
    assert set(data["statuses"]) == {"b2c3d4e5", ENTRY}
