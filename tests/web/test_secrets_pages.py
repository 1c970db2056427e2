"""A session seeded with one secret of each kind: no page, partial, JSON answer, search
result or viewer download shows any of them; admins still export the stored bytes; the
findings pages, decisions and audited reveals work for the roles that may use them."""

from __future__ import annotations

import re

import pytest
from django.test import override_settings
from django.urls import reverse

from explorer.models import Entry, SecretFinding, SecretReveal
from explorer.session import SessionManager, jsonfmt, validate_bytes
from tests.secrets.seeded import build_session

pytestmark = pytest.mark.django_db

# The reveal's second step: confirmed, with the reason its reader gave.
CONFIRMED = {"confirm": "1", "reason": "rotating the key"}


def fragments(secret: str) -> list[str]:
    """What would give a secret away in a response: the whole secret, as JSON spells it,
    and the middle of its longest random run (so a truncated or re-wrapped copy is caught
    too, but a public vendor prefix is not)."""
    run = max(re.findall(r"[A-Za-z0-9]+", secret), key=len)
    start = (len(run) - 10) // 2
    middle = run[start : start + 10]
    assert len(middle) == 10, secret
    return [secret, jsonfmt.dumps(secret)[1:-1], middle]


def assert_no_secret(text: str, secrets: dict[str, str], where: str) -> None:
    for kind, secret in secrets.items():
        for piece in fragments(secret):
            assert piece not in text, f"{kind} shown in {where}"


@pytest.fixture
def seeded(make_session):
    data, seeds, secrets = build_session()
    session = make_session(data)
    return session, data, seeds, secrets


def _pages(session) -> list[tuple[str, dict]]:
    pk = [session.pk]
    ids = list(Entry.objects.filter(session=session).values_list("entry_id", flat=True))
    pages = [
        (reverse("explorer:session_list"), {}),
        (reverse("explorer:session_detail", args=pk), {}),
        (reverse("explorer:context", args=pk), {}),
        (reverse("explorer:compactions", args=pk), {}),
        (reverse("explorer:timeline", args=pk), {}),
        (reverse("explorer:integrity", args=pk), {}),
        (reverse("explorer:compare", args=pk), {"a": ids[-1], "b": ids[1]}),
        (reverse("explorer:session_secrets", args=pk), {}),
        (reverse("explorer:secrets"), {}),
        (reverse("explorer:graph_svg", args=pk), {}),
        (reverse("explorer:session_stats", args=pk), {}),
        (reverse("explorer:problems", args=pk), {}),
        (reverse("explorer:search"), {"q": "REDACTED"}),
    ]
    for eid in ids:
        pages.append((reverse("explorer:entry", args=pk), {"id": eid, "raw": "1", "full": "1"}))
        pages.append((reverse("explorer:session_detail", args=pk), {"entry": eid}))
        pages.append((reverse("explorer:context", args=pk), {"leaf": eid}))
        pages.append((reverse("explorer:compactions", args=pk), {"id": eid}))
    return pages


def test_no_page_or_partial_shows_a_secret(viewer_client, seeded):
    session, _, _, secrets = seeded
    for url, params in _pages(session):
        for headers in ({}, {"HX-Request": "true"}):
            r = viewer_client.get(url, params, headers=headers)
            assert r.status_code == 200, (url, params, r.status_code)
            assert_no_secret(r.content.decode(), secrets, f"{url} {params} {headers}")


def test_the_entry_panel_says_where_a_secret_was(viewer_client, seeded):
    session, _, seeds, _ = seeded
    label = next(s for s in seeds if s.kind == "github-token")
    eid = Entry.objects.get(session=session, position=label.line).entry_id
    html = viewer_client.get(
        reverse("explorer:entry", args=[session.pk]), {"id": eid, "raw": "1"}
    ).content.decode()
    assert "[REDACTED:github-token]" in html


def test_search_never_matches_inside_a_secret(viewer_client, seeded):
    session, _, _, secrets = seeded
    for kind, secret in secrets.items():
        for piece in fragments(secret)[::2]:
            for url in (
                reverse("explorer:search"),
                reverse("explorer:session_search", args=[session.pk]),
            ):
                data = viewer_client.get(url, {"q": piece, "format": "json"}).json()
                assert data["results"] == [], (kind, url)
    # the text around a secret is still found, with the secret masked in the snippet
    data = viewer_client.get(
        reverse("explorer:search"), {"q": "deploy with key", "format": "json"}
    ).json()
    assert data["results"] and "[REDACTED:aws-access-key]" in data["results"][0]["snippet"]
    html = viewer_client.get(reverse("explorer:search"), {"q": "deploy with key"}).content
    assert_no_secret(html.decode(), secrets, "search page")


@pytest.mark.parametrize("who", ["viewer_client", "editor_client"])
def test_viewers_and_editors_download_a_valid_redacted_session(request, who, seeded):
    session, data, _, secrets = seeded
    client = request.getfixturevalue(who)
    for url, params in (
        (reverse("explorer:export", args=[session.pk]), {}),
        (reverse("explorer:branch_download", args=[session.pk]), {}),
    ):
        r = client.get(url, params)
        body = b"".join(r.streaming_content)
        assert r.status_code == 200 and r["X-Secrets-Redacted"] == "true"
        assert "redacted-" in r["Content-Disposition"]
        assert_no_secret(body.decode(), secrets, url)
        assert b"[REDACTED:" in body
        report = validate_bytes(body)
        assert not report.errors
    export = b"".join(client.get(reverse("explorer:export", args=[session.pk])).streaming_content)
    assert validate_bytes(export).entry_count == validate_bytes(data).entry_count
    assert [e["id"] for e in SessionManager.load_readonly(export).get_entries()] == [
        e["id"] for e in SessionManager.load_readonly(data).get_entries()
    ]


def test_admins_export_the_stored_bytes(admin_client, seeded):
    session, data, _, _ = seeded
    r = admin_client.get(reverse("explorer:export", args=[session.pk]))
    assert b"".join(r.streaming_content) == data
    assert "X-Secrets-Redacted" not in r


def test_the_export_link_says_when_secrets_are_masked(viewer_client, admin_client, seeded):
    session = seeded[0]
    url = reverse("explorer:session_detail", args=[session.pk])
    assert "Export JSONL (secrets masked)" in viewer_client.get(url).content.decode()
    assert "Export JSONL (secrets masked)" not in admin_client.get(url).content.decode()


def test_a_false_positive_is_shown_in_clear_and_rotated_stays_masked(
    editor_client, viewer_client, seeded
):
    session, _, seeds, secrets = seeded
    finding = SecretFinding.objects.get(session=session, kind="npm-token")
    entry_url = reverse("explorer:entry", args=[session.pk])
    status_url = reverse("explorer:finding_status", args=[session.pk, finding.pk])
    r = editor_client.post(status_url, {"status": "false_positive"})
    assert r.status_code == 302
    finding.refresh_from_db()
    assert finding.status == "false_positive" and finding.status_by.username == "eddie"
    html = viewer_client.get(entry_url, {"id": finding.entry_id}).content.decode()
    assert secrets["npm-token"] in html
    r = editor_client.post(status_url, {"status": "rotated"}, headers={"HX-Request": "true"})
    assert r.status_code == 200 and f'id="finding-{finding.pk}"' in r.content.decode()
    html = viewer_client.get(entry_url, {"id": finding.entry_id}).content.decode()
    assert secrets["npm-token"] not in html
    assert editor_client.post(status_url, {"status": "gone"}).status_code == 400


def test_an_admin_reveal_is_recorded_and_shown_once(admin_client, admin_user, seeded):
    session, _, _, secrets = seeded
    finding = SecretFinding.objects.get(session=session, kind="stripe-key")
    url = reverse("explorer:finding_reveal", args=[session.pk, finding.pk])
    r = admin_client.post(url, CONFIRMED, headers={"HX-Request": "true"})
    assert r.status_code == 200 and r["Cache-Control"] == "no-store"
    assert secrets["stripe-key"] in r.content.decode()
    reveal = SecretReveal.objects.get(finding=finding)
    assert reveal.user == admin_user and reveal.revealed_at is not None
    # shown once: the findings page afterwards still shows it masked
    page = admin_client.get(reverse("explorer:session_secrets", args=[session.pk]))
    assert secrets["stripe-key"] not in page.content.decode()
    assert admin_client.get(url).status_code == 405


def test_a_stale_finding_reveals_nothing_but_is_still_recorded(admin_client, seeded):
    session = seeded[0]
    finding = SecretFinding.objects.get(session=session, kind="stripe-key")
    SecretFinding.objects.filter(pk=finding.pk).update(fingerprint="0" * 32)
    r = admin_client.post(reverse("explorer:finding_reveal", args=[session.pk, finding.pk]),
                          CONFIRMED)  # fmt: skip
    assert "stale" in r.content.decode() and SecretReveal.objects.filter(finding=finding).exists()


def test_role_matrix_of_the_findings_views(
    viewer_client, editor_client, admin_client, csrf_client_factory, norole_user, seeded
):
    session = seeded[0]
    finding = SecretFinding.objects.filter(session=session).first()
    pages = [
        reverse("explorer:session_secrets", args=[session.pk]),
        reverse("explorer:secrets"),
    ]
    status = reverse("explorer:finding_status", args=[session.pk, finding.pk])
    reveal = reverse("explorer:finding_reveal", args=[session.pk, finding.pk])
    nobody = csrf_client_factory(norole_user)
    for url in pages:
        assert nobody.get(url).status_code == 403
        for client in (viewer_client, editor_client, admin_client):
            assert client.get(url).status_code == 200
    viewer_page = viewer_client.get(pages[0]).content.decode()
    assert "Reveal" not in viewer_page and 'name="status"' not in viewer_page
    editor_page = editor_client.get(pages[0]).content.decode()
    assert 'name="status"' in editor_page and "Reveal" not in editor_page
    assert "Reveal" in admin_client.get(pages[0]).content.decode()
    assert viewer_client.post(status, {"status": "rotated"}).status_code == 403
    assert nobody.post(status, {"status": "rotated"}).status_code == 403
    assert admin_client.post(status, {"status": "rotated"}).status_code == 302
    assert viewer_client.post(reveal, CONFIRMED).status_code == 403
    assert editor_client.post(reveal, CONFIRMED).status_code == 403
    assert not SecretReveal.objects.exists()
    with override_settings(SESSIONS_EDITORS_MAY_REVEAL=True):
        assert "Reveal" in editor_client.get(pages[0]).content.decode()
        assert editor_client.post(reveal, CONFIRMED).status_code == 200
    assert SecretReveal.objects.filter(finding=finding, user__username="eddie").exists()


def test_the_findings_pages_list_every_finding_masked(viewer_client, seeded):
    session, _, seeds, secrets = seeded
    html = viewer_client.get(reverse("explorer:session_secrets", args=[session.pk])).content
    text = html.decode()
    for seed in seeds:
        assert f"<code>{seed.kind}</code>" in text
    assert_no_secret(text, secrets, "findings page")
    overview = viewer_client.get(reverse("explorer:secrets"), {"status": "open"}).content.decode()
    assert session.display_name in overview and "[REDACTED:" in overview
    assert (
        reverse("explorer:secrets")
        in viewer_client.get(reverse("explorer:session_list")).content.decode()
    )


def test_editor_forms_show_no_secret(editor_client, seeded):
    session, _, _, secrets = seeded
    pk = [session.pk]
    ids = list(Entry.objects.filter(session=session).values_list("entry_id", flat=True))
    pages = [(reverse("explorer:rename", args=pk), {}), (reverse("explorer:compact", args=pk), {})]
    for eid in ids:
        pages.append((reverse("explorer:edit", args=pk), {"target": eid}))
        pages.append((reverse("explorer:label", args=pk), {"target": eid}))
    for url, params in pages:
        r = editor_client.get(url, params)
        assert r.status_code == 200, (url, params)
        assert_no_secret(r.content.decode(), secrets, f"{url} {params}")
    rename = editor_client.get(reverse("explorer:rename", args=pk)).content.decode()
    assert 'value="rotate [REDACTED:gitlab-token]"' in rename


def test_the_session_list_filter_does_not_confirm_a_secret(viewer_client, seeded):
    session, _, _, secrets = seeded
    url = reverse("explorer:session_list")
    detail = reverse("explorer:session_detail", args=[session.pk])
    assert detail in viewer_client.get(url, {"q": "deploy with key"}).content.decode()
    for kind in ("aws-access-key", "gitlab-token"):  # first message, name
        assert detail not in viewer_client.get(url, {"q": secrets[kind]}).content.decode()


def test_the_search_index_holds_no_secret(db, make_session):
    """The visible-text index is filled with secrets masked, so no query reaches one."""
    from explorer.models import EntryText
    from explorer.session import jsonfmt

    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    header = {
        "type": "session",
        "version": 3,
        "id": "s-index",
        "timestamp": "2026-11-20T10:00:00.000Z",
        "cwd": "/w",
    }
    message = {
        "type": "message", "id": "u1", "parentId": None, "timestamp": "2026-11-20T10:00:01.000Z",
        "message": {"role": "user", "content": f"deploy with {token} please", "timestamp": 1},
    }  # fmt: skip
    session = make_session(b"".join(jsonfmt.dumps(x).encode() + b"\n" for x in (header, message)))
    texts = list(EntryText.objects.filter(session=session).values_list("text", flat=True))
    assert texts and all(token not in t for t in texts)
    assert any("REDACTED" in t and "deploy with" in t for t in texts)
