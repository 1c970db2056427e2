"""Editing actions: plain posts and htmx, previews, undo, permissions, append-only history."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from explorer.models import Entry

# In the small session the cursor (last entry) is 1b2c3d4e; its path is
# a1b2c3d4 → b2c3d4e5 → c3d4e5f6 → d4e5f6a7 → f6a7b8c9 → 0a1b2c3d → 1b2c3d4e.


@pytest.fixture
def session(make_session):
    return make_session()


def _raws(session):
    return list(
        Entry.objects.filter(session=session).order_by("position").values_list("entry_id", "raw")
    )


def test_it_previews_a_hide_without_writing(editor_client, session):
    before = _raws(session)
    r = editor_client.get(
        reverse("explorer:edit", args=[session.pk]), {"target": "d4e5f6a7", "mode": "hide"}
    )
    assert r.status_code == 200
    html = r.content.decode()
    assert "Preview" in html and "→" in html
    assert _raws(session) == before


def test_it_hides_a_message_with_a_plain_post(editor_client, session):
    before = _raws(session)
    url = reverse("explorer:edit", args=[session.pk])
    r = editor_client.post(
        url, {"target": "d4e5f6a7", "mode": "hide", "reason": "noise", "confirm": "1"}
    )
    assert r.status_code == 302
    after = _raws(session)
    assert after[: len(before)] == before  # raw history unchanged
    new = Entry.objects.filter(session=session, type="context_edit").order_by("-position").first()
    assert new.target_id == "d4e5f6a7" and new.author is not None
    assert Entry.objects.filter(session=session, type="custom").exists()  # the reason
    page = editor_client.get(reverse("explorer:context", args=[session.pk])).content.decode()
    assert 'data-entry="d4e5f6a7" data-status="hidden"' in page


def test_it_replaces_content_via_htmx(editor_client, session):
    url = reverse("explorer:edit", args=[session.pk])
    r = editor_client.post(
        url,
        {"target": "a1b2c3d4", "mode": "replace", "content": "Read it", "confirm": "1"},
        headers={"HX-Request": "true"},
    )
    assert r.status_code == 200
    assert r.headers["HX-Redirect"].startswith(reverse("explorer:context", args=[session.pk]))
    page = editor_client.get(reverse("explorer:context", args=[session.pk])).content.decode()
    assert 'data-entry="a1b2c3d4" data-status="replaced"' in page


def test_it_undoes_an_edit_by_appending(editor_client, session):
    editor_client.post(
        reverse("explorer:edit", args=[session.pk]),
        {"target": "d4e5f6a7", "mode": "hide", "confirm": "1"},
    )
    count = Entry.objects.filter(session=session).count()
    r = editor_client.post(reverse("explorer:undo", args=[session.pk]), {"target": "d4e5f6a7"})
    assert r.status_code == 302
    assert Entry.objects.filter(session=session).count() == count + 1
    page = editor_client.get(reverse("explorer:context", args=[session.pk])).content.decode()
    assert 'data-entry="d4e5f6a7" data-status="hidden"' not in page
    # The model sees the original again: no difference left, so nothing more to undo.
    assert 'data-entry="d4e5f6a7" data-status="same"' in page
    assert "original content restored by context edit" in page
    row = page.split('data-entry="d4e5f6a7"')[1].split("</tr>")[0]
    assert "Undo (restore)" not in row and "Hide / replace" in row


def test_it_refuses_non_editable_targets(editor_client, session):
    r = editor_client.post(
        reverse("explorer:edit", args=[session.pk]),
        {"target": "f6a7b8c9", "mode": "hide", "confirm": "1"},
    )
    assert r.status_code == 400
    assert "does not contribute editable model content" in r.content.decode()


def test_it_sets_and_clears_labels(editor_client, session):
    url = reverse("explorer:label", args=[session.pk])
    assert editor_client.post(url, {"target": "d4e5f6a7", "label": "good"}).status_code == 302
    assert (
        "⚑ good"
        in editor_client.get(
            reverse("explorer:entry", args=[session.pk]), {"id": "d4e5f6a7"}
        ).content.decode()
    )
    assert editor_client.post(url, {"target": "d4e5f6a7", "clear": "1"}).status_code == 302
    assert (
        "⚑ good"
        not in editor_client.get(
            reverse("explorer:entry", args=[session.pk]), {"id": "d4e5f6a7"}
        ).content.decode()
    )


def test_it_renames(editor_client, session):
    r = editor_client.post(
        reverse("explorer:rename", args=[session.pk]), {"name": "Renamed\nsession"}
    )
    assert r.status_code == 302
    session.refresh_from_db()
    assert (
        "Renamed session"
        in editor_client.get(reverse("explorer:session_detail", args=[session.pk])).content.decode()
    )


def test_it_navigates_without_appending(editor_client, session):
    count = Entry.objects.filter(session=session).count()
    r = editor_client.post(reverse("explorer:navigate", args=[session.pk]), {"target": "e5f6a7b8"})
    assert r.status_code == 302
    assert Entry.objects.filter(session=session).count() == count
    page = editor_client.get(reverse("explorer:context", args=[session.pk])).content.decode()
    assert "Another route." in page


def test_it_navigates_with_a_branch_summary(editor_client, session):
    r = editor_client.post(
        reverse("explorer:navigate", args=[session.pk]),
        {"target": "e5f6a7b8", "summary": "custom", "summary_text": "We tried X."},
    )
    assert r.status_code == 302
    bs = Entry.objects.filter(session=session, type="branch_summary").get()
    assert bs.parent_id == "e5f6a7b8" and "We tried X." in bs.raw
    assert bs.data()["fromId"] == "1b2c3d4e"


def test_it_navigates_with_a_generated_branch_summary(editor_client, session):
    page = editor_client.get(
        reverse("explorer:navigate", args=[session.pk]), {"target": "e5f6a7b8"}
    ).content.decode()
    # The preview shows the request the summarizer gets (Pi 1.6.0: no output cap).
    assert "What the summarizer is sent" in page and "--- system prompt ---" in page
    assert "no maxTokens" in page
    r = editor_client.post(
        reverse("explorer:navigate", args=[session.pk]),
        {"target": "e5f6a7b8", "summary": "embedded"},
    )
    assert r.status_code == 302
    bs = Entry.objects.filter(session=session, type="branch_summary").get()
    assert bs.parent_id == "e5f6a7b8" and bs.data()["summary"]


def test_it_shows_the_compaction_dry_run(editor_client, session):
    r = editor_client.get(reverse("explorer:compact", args=[session.pk]))
    assert r.status_code == 200
    assert "Compact now" in r.content.decode()


ACTIONS = [
    ("explorer:edit", {"target": "d4e5f6a7", "mode": "hide", "confirm": "1"}),
    ("explorer:undo", {"target": "d4e5f6a7"}),
    ("explorer:label", {"target": "d4e5f6a7", "label": "x"}),
    ("explorer:rename", {"name": "x"}),
    ("explorer:navigate", {"target": "e5f6a7b8"}),
    ("explorer:compact", {}),
]


@pytest.mark.parametrize(("name", "data"), ACTIONS)
def test_viewers_cannot_act(viewer_client, session, name, data):
    count = Entry.objects.filter(session=session).count()
    r = viewer_client.post(reverse(name, args=[session.pk]), data)
    assert r.status_code == 403
    assert Entry.objects.filter(session=session).count() == count


@pytest.mark.parametrize(("name", "data"), ACTIONS)
def test_viewers_cannot_act_via_htmx(viewer_client, session, name, data):
    r = viewer_client.post(reverse(name, args=[session.pk]), data, headers={"HX-Request": "true"})
    assert r.status_code == 403


@pytest.mark.parametrize(("name", "data"), ACTIONS)
def test_users_without_role_see_nothing(norole_user, session, name, data):
    from django.test import Client

    c = Client()
    c.force_login(norole_user)
    assert c.post(reverse(name, args=[session.pk]), data).status_code in (403, 404)
    assert c.get(reverse("explorer:session_detail", args=[session.pk])).status_code in (403, 404)


@pytest.mark.parametrize(("name", "data"), ACTIONS)
def test_anonymous_is_sent_to_login(client, session, name, data):
    r = client.post(reverse(name, args=[session.pk]), data)
    assert r.status_code == 302 and "login" in r.headers["Location"]


def test_viewers_see_no_edit_controls(viewer_client, session):
    html = viewer_client.get(reverse("explorer:context", args=[session.pk])).content.decode()
    assert "Hide / replace" not in html
    assert "Undo (restore)" not in html


def test_compact_now_explains_a_too_small_session_and_offers_a_smaller_tail(editor_client, session):
    r = editor_client.get(reverse("explorer:compact", args=[session.pk]))
    html = r.content.decode()
    assert "Nothing to compact (session too small)" in html and "try a smaller value" in html
    assert 'name="keep_recent"' in html and 'value="20000"' in html


def test_compact_now_tail_input_accepts_any_whole_number(editor_client, session):
    # A browser refuses to submit a number input whose value is off its step: with step=500
    # the smaller tails the error message suggests (50, 100, ...) could not be submitted.
    html = editor_client.get(reverse("explorer:compact", args=[session.pk])).content.decode()
    tag = re.search(r'<input[^>]*name="keep_recent"[^>]*>', html).group(0)
    step = re.search(r'step="([^"]*)"', tag)
    assert step is None or step.group(1) in ("1", "any")


def _preview_token(html: str) -> str:
    import html as htmllib

    return htmllib.unescape(re.search(r'name="previewed" value="([^"]*)"', html).group(1))


def test_compact_now_with_a_chosen_tail_previews_then_applies(editor_client, session):
    url = reverse("explorer:compact", args=[session.pk])
    r = editor_client.get(url, {"keep_recent": "1", "preview": "1"})
    html = r.content.decode()
    assert r.status_code == 200
    assert "Summary preview" in html and "Original Request" in html  # split turn: prefix summary
    assert 'name="keep_recent" value="1"' in html
    # What the summarizer is sent, as Pi 1.6.0 sends it (the split turn's prefix request).
    assert "What the summarizer is sent" in html and "Turn prefix summarization" in html
    import html as htmllib

    shown = htmllib.unescape(
        re.search(
            r'<pre class="output summary-preview" id="summary-preview">(.*?)</pre>', html, re.S
        ).group(1)
    )
    before = _raws(session)
    r = editor_client.post(url, {"keep_recent": "1", "previewed": _preview_token(html)})
    assert r.status_code == 302
    after = _raws(session)
    assert after[: len(before)] == before  # history untouched, one entry appended
    assert len(after) == len(before) + 1
    compaction = Entry.objects.filter(session=session, type="compaction").get()
    assert compaction.data()["firstKeptEntryId"]
    assert compaction.data()["summary"] == shown  # exactly the previewed summary


def test_compact_now_applies_only_after_a_preview(editor_client, session):
    url = reverse("explorer:compact", args=[session.pk])
    page = editor_client.get(url, {"keep_recent": "1"}).content.decode()
    assert 'name="previewed"' not in page and 'id="compact-preview"' in page  # no Apply yet
    r = editor_client.post(url, {"keep_recent": "1"})
    assert r.status_code == 400 and "Preview the summary first" in r.content.decode()
    assert not Entry.objects.filter(session=session, type="compaction").exists()


def test_compact_now_refuses_a_preview_of_a_changed_session(editor_client, editor_user, session):
    from explorer import services

    url = reverse("explorer:compact", args=[session.pk])
    html = editor_client.get(url, {"keep_recent": "1", "preview": "1"}).content.decode()
    token = _preview_token(html)
    services.rename_session(session, editor_user, "renamed meanwhile")
    r = editor_client.post(url, {"keep_recent": "1", "previewed": token})
    assert r.status_code == 400 and "changed since the preview" in r.content.decode()
    tampered = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    r = editor_client.post(url, {"keep_recent": "1", "previewed": tampered})
    assert r.status_code == 400 and "preview again" in r.content.decode().lower()
    assert not Entry.objects.filter(session=session, type="compaction").exists()


def test_compact_now_shows_tokens_after_and_warns_when_it_would_not_shrink(editor_client, session):
    url = reverse("explorer:compact", args=[session.pk])
    html = editor_client.get(url, {"keep_recent": "1", "preview": "1"}).content.decode()
    m = re.search(r"<strong>(\d+)</strong> tokens now → <strong>(\d+)</strong> after", html)
    assert m
    now, after = int(m.group(1)), int(m.group(2))
    # The small session's history is tiny: a summary is longer than what it replaces.
    assert after >= now and 'id="compact-grows"' in html
    # The figure "now" is the Raw vs projected estimate at the same cursor.
    ctx = editor_client.get(
        reverse("explorer:context", args=[session.pk]), {"format": "json"}
    ).json()
    assert ctx["projected_tokens"] == now
    # Applying it gives exactly the estimate the preview announced.
    editor_client.post(url, {"keep_recent": "1", "previewed": _preview_token(html)})
    ctx = editor_client.get(
        reverse("explorer:context", args=[session.pk]), {"format": "json"}
    ).json()
    assert ctx["projected_tokens"] == after


def test_compact_now_keeps_the_tail_it_refused_in_the_form(editor_client, session):
    r = editor_client.get(reverse("explorer:compact", args=[session.pk]), {"keep_recent": "200000"})
    html = r.content.decode()
    assert "while keeping the newest 200,000 tokens" in html
    assert 'name="keep_recent" type="number"' in html and 'value="200000"' in html


def test_compact_now_rejects_a_bad_tail_setting(editor_client, session):
    r = editor_client.post(reverse("explorer:compact", args=[session.pk]), {"keep_recent": "lots"})
    assert r.status_code == 400
    assert "Keep recent tokens must be a whole number" in r.content.decode()
    assert not Entry.objects.filter(session=session, type="compaction").exists()


def test_a_label_change_that_changes_nothing_appends_nothing(editor_client, session):
    url = reverse("explorer:label", args=[session.pk])
    before = _raws(session)
    r = editor_client.post(url, {"target": "d4e5f6a7", "clear": "1"})  # no label to clear
    assert r.status_code == 400 and "has no label to clear" in r.content.decode()
    r = editor_client.post(url, {"target": "a1b2c3d4", "label": "start"})  # already "start"
    assert r.status_code == 400 and "already has the label" in r.content.decode()
    assert _raws(session) == before


def test_the_admin_names_entries_in_plain_english(admin_client):
    r = admin_client.get(reverse("admin:index"))
    assert r.status_code == 200
    html = r.content.decode()
    assert "Entries" in html and "Entrys" not in html
