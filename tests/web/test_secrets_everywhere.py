"""Secrets in the session header (``cwd``) and in names glued to a word by a hyphen
(``screenshot-ghp_….png``): found by the scan, listed as findings, and masked on every
page, partial, JSON answer, export and live frame, for a viewer and for an editor."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from explorer.models import Entry, SecretFinding
from explorer.secrets import scan_text
from tests.live.conftest import ws_connect  # noqa: F401 - the websocket fixture

CWD_TOKEN = "ghp_" + "Cw" * 18  # 36 characters after the prefix
AWS_IN_CWD = "AKIA" + "Q7RT2XJ4MV9KZ3LB"
IMAGE_TOKEN = "ghp_" + "Im4g3N4m3" * 4  # 36
MODEL_TOKEN = "ghp_" + "M0d3lF1eld" * 3 + "abcdef"  # 36: in descriptive fields
CWD = f"/home/ana/{CWD_TOKEN}/deploy-{AWS_IN_CWD}"
SECRETS = {"cwd token": CWD_TOKEN, "cwd aws key": AWS_IN_CWD, "image name": IMAGE_TOKEN,
           "model and custom type": MODEL_TOKEN}  # fmt: skip


def _session_bytes() -> bytes:
    header = {"type": "session", "version": 3, "id": "0195f3a2-7c41-7d2e-9b1a-3c5d7e9f1a77",
              "timestamp": "2025-03-04T05:06:07.089Z", "cwd": CWD}  # fmt: skip
    user = {"type": "message", "id": "a1b2c3d4", "parentId": None,
            "timestamp": "2025-03-04T05:06:08.000Z",
            "message": {"role": "user", "timestamp": 1741064768000,
                        "content": f"Look at screenshot-{IMAGE_TOKEN}.png please"}}  # fmt: skip
    reply = {"type": "message", "id": "b2c3d4e5", "parentId": "a1b2c3d4",
             "timestamp": "2025-03-04T05:06:09.000Z",
             "message": {"role": "assistant", "content": [{"type": "text", "text": "Seen."}],
                         "api": "x", "provider": "p", "model": f"m-{MODEL_TOKEN}", "stopReason": "stop",
                         "timestamp": 1741064769000,
                         "usage": {"input": 10, "output": 2, "cacheRead": 0, "cacheWrite": 0,
                                   "totalTokens": 12, "cost": {"input": 0, "output": 0,
                                   "cacheRead": 0, "cacheWrite": 0, "total": 0}}}}  # fmt: skip
    custom = {"type": "custom", "id": "c3d4e5f6", "parentId": "b2c3d4e5",
              "timestamp": "2025-03-04T05:06:10.000Z", "customType": f"ext/{MODEL_TOKEN}",
              "data": {"note": "kept by an extension"}}  # fmt: skip
    return "".join(json.dumps(x) + "\n" for x in (header, user, reply, custom)).encode()


def assert_clean(text: str, where: str) -> None:
    for what, secret in SECRETS.items():
        assert secret not in text, f"{what} shown in {where}"
        assert secret[4:16] not in text, f"part of the {what} shown in {where}"


@pytest.fixture
def planted(make_session):
    return make_session(_session_bytes())


def test_a_github_token_after_a_hyphen_is_found():
    assert [m.kind for m in scan_text(f"screenshot-{IMAGE_TOKEN}.png")] == ["github-token"]
    assert [m.kind for m in scan_text(f"x_{IMAGE_TOKEN}")] == ["github-token"]


def test_the_header_is_scanned_and_listed(planted, viewer_client):
    header = SecretFinding.objects.filter(session=planted, entry_id="")
    assert sorted(header.values_list("kind", "path")) == [
        ("aws-access-key", "/cwd"), ("github-token", "/cwd")
    ]  # fmt: skip
    assert SecretFinding.objects.filter(session=planted, entry_id="a1b2c3d4").count() == 1
    page = viewer_client.get(reverse("explorer:session_secrets", args=[planted.pk]))
    assert "session header" in page.content.decode()


def test_a_secret_of_the_header_can_be_revealed_with_a_reason(admin_client, planted):
    finding = SecretFinding.objects.get(session=planted, entry_id="", kind="github-token")
    url = reverse("explorer:finding_reveal", args=[planted.pk, finding.pk])
    r = admin_client.post(url, {"confirm": "1", "reason": "which repository is it for"})
    assert r.status_code == 200 and CWD_TOKEN in r.content.decode()


def test_a_rescan_keeps_the_header_findings(planted):
    from explorer import services

    assert services.rescan_secrets(planted, force=True) == 5
    assert SecretFinding.objects.filter(session=planted, entry_id="").count() == 2


def _urls(session) -> list[tuple[str, dict]]:
    pk = [session.pk]
    tabs = ["session_detail", "transcript", "context", "compactions", "timeline", "compare",
            "integrity", "session_stats", "problems", "review", "session_secrets", "live"]  # fmt: skip
    urls = [(reverse("explorer:session_list"), {}), (reverse("explorer:session_list"), {"format": "json"}),
            (reverse("explorer:secrets"), {}), (reverse("explorer:search"), {"q": "deploy"}),
            (reverse("explorer:search"), {"q": "screenshot", "format": "json"}),
            (reverse("explorer:graph_svg", args=pk), {}),
            (reverse("explorer:session_search", args=pk), {"q": "screenshot"})]  # fmt: skip
    for tab in tabs:
        urls.append((reverse(f"explorer:{tab}", args=pk), {}))
        urls.append((reverse(f"explorer:{tab}", args=pk), {"format": "json"}))
    for eid in ("a1b2c3d4", "b2c3d4e5", "c3d4e5f6"):
        urls.append((reverse("explorer:entry", args=pk), {"id": eid, "raw": "1", "full": "1"}))
        urls.append((reverse("explorer:entry", args=pk), {"id": eid, "format": "json"}))
        urls.append((reverse("explorer:transcript", args=pk), {"leaf": eid}))
    return urls


@pytest.mark.parametrize("who", ["viewer_client", "editor_client"])
def test_no_page_partial_or_json_shows_a_secret_of_the_header_or_a_name(request, who, planted):
    client = request.getfixturevalue(who)
    for url, params in _urls(planted):
        for headers in ({}, {"HX-Request": "true"}):
            r = client.get(url, params, headers=headers)
            assert r.status_code == 200, (url, params, r.status_code)
            assert_clean(r.content.decode(), f"{url} {params} {headers}")
    list_page = client.get(reverse("explorer:session_list")).content.decode()
    assert "[REDACTED:github-token]" in list_page  # the heading says where it was


def test_the_editor_forms_show_the_cwd_masked_and_a_fork_keeps_the_directory(
    editor_client, planted
):
    pk = [planted.pk]
    for name, params in (("fork", {}), ("rename", {}), ("label", {"target": "a1b2c3d4"}),
                         ("edit", {"target": "a1b2c3d4"}), ("compact", {}),
                         ("navigate", {"target": "a1b2c3d4"})):  # fmt: skip
        r = editor_client.get(reverse(f"explorer:{name}", args=pk), params)
        assert r.status_code == 200, name
        assert_clean(r.content.decode(), name)
    # Posting the fork form as shown (the masked directory) keeps the real one.
    r = editor_client.post(reverse("explorer:fork", args=pk), {"cwd": planted.shown_cwd})
    assert r.status_code == 302
    from explorer.models import Session

    fork = Session.objects.exclude(pk=planted.pk).get()
    assert fork.cwd == CWD


@pytest.mark.parametrize("who", ["viewer_client", "editor_client"])
def test_the_exports_mask_the_header_and_the_name(request, who, planted):
    client = request.getfixturevalue(who)
    pk = [planted.pk]
    for name in ("export", "branch_download", "export_html"):
        r = client.get(reverse(f"explorer:{name}", args=pk))
        assert r.status_code == 200, name
        body = b"".join(r.streaming_content) if r.streaming else r.content
        assert_clean(body.decode(), name)
    redacted = b"".join(client.get(reverse("explorer:export", args=pk)).streaming_content)
    header = json.loads(redacted.splitlines()[0])
    assert "[REDACTED:" in header["cwd"]


def test_a_session_list_search_by_a_secret_confirms_nothing(viewer_client, planted):
    data = viewer_client.get(reverse("explorer:session_list"), {"q": CWD_TOKEN, "format": "json"})
    assert data.json()["sessions"] == []


@pytest.mark.django_db(transaction=True)
async def test_the_live_frames_show_no_secret(ws_connect, viewer_user):  # noqa: F811
    from channels.db import database_sync_to_async

    from explorer import services
    from tests.live.conftest import close_all

    result = await database_sync_to_async(services.import_bytes)(_session_bytes())
    pk = result.session.pk
    html_comm, ok, _ = await ws_connect(f"/ws/sessions/{pk}/", user=viewer_user)
    json_comm, ok2, _ = await ws_connect(f"/ws/sessions/{pk}/?format=json", user=viewer_user)
    assert ok and ok2
    try:
        for comm in (html_comm, json_comm):
            await comm.send_to(text_data=json.dumps({"type": "resume", "after": 0}))
        html_frame = await html_comm.receive_from(timeout=5)
        json_frame = await json_comm.receive_from(timeout=5)
        assert "screenshot-" in html_frame and '"a1b2c3d4"' in json_frame
        assert_clean(html_frame, "the htmx live frame")
        assert_clean(json_frame, "the JSON live frame")
    finally:
        await close_all([html_comm, json_comm])


def test_every_entry_of_the_planted_session_is_stored(planted):
    assert Entry.objects.filter(session=planted).count() == 3
    paths = SecretFinding.objects.filter(session=planted, kind="github-token")
    assert {"/message/model", "/customType"} <= set(paths.values_list("path", flat=True))


@pytest.mark.parametrize("who", ["viewer_client", "editor_client"])
def test_a_secret_in_the_file_name_is_masked_in_the_list(request, who, make_session):
    client = request.getfixturevalue(who)
    make_session(_session_bytes(), source_path=f"/home/ana/sessions/run-{IMAGE_TOKEN}.jsonl")
    for params in ({}, {"format": "json"}, {"q": "run"}):
        r = client.get(reverse("explorer:session_list"), params)
        assert r.status_code == 200
        assert_clean(r.content.decode(), f"the session list {params}")
    data = client.get(reverse("explorer:session_list"), {"format": "json"}).json()
    assert data["sessions"][0]["file_name"] == "run-[REDACTED:github-token].jsonl"
