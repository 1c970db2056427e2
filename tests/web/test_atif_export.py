"""ATIF export: any route as Agent Trajectory Interchange Format v1.8, validated by the
``atif`` package's own models; compactions as ``continued_trajectory_ref``; secrets masked."""

from __future__ import annotations

import io
import json
import zipfile

import pytest
from atif import Trajectory
from django.test import Client
from django.urls import reverse

from explorer import atif_export
from explorer.models import Entry
from tests.secrets.seeded import build_session
from tests.web.test_secrets_pages import assert_no_secret
from tests.web.test_summary_diffs import S1, S2, S3
from tests.web.test_summary_diffs import _session as three_compactions

from . import crafted

pytestmark = pytest.mark.django_db


def _get(client, session, **query):
    return client.get(reverse("explorer:export_atif", args=[session.pk]), query)


def _documents(response) -> list[dict]:
    """Every document of a download (a JSON file or a zip of them), in order."""
    if response["Content-Type"] == "application/zip":
        with zipfile.ZipFile(io.BytesIO(response.content)) as zf:
            names = sorted(zf.namelist(), key=lambda n: int(n.split("-")[1].split(".")[0]))
            return [json.loads(zf.read(n)) for n in names]
    assert response["Content-Type"] == "application/json"
    return [json.loads(response.content)]


def test_a_route_without_compactions_is_one_valid_trajectory(make_session, viewer_client):
    session = make_session()
    response = _get(viewer_client, session, leaf="1b2c3d4e")
    assert response.status_code == 200
    assert response["Content-Disposition"].endswith('.atif.json"')
    (doc,) = _documents(response)
    traj = Trajectory.model_validate(doc)  # the package's own schema checks
    assert traj.schema_version == "ATIF-v1.8" and traj.continued_trajectory_ref is None
    assert traj.session_id == session.session_id and traj.agent.name == "pi"
    assert [s.source for s in traj.steps] == ["user", "agent", "agent"]
    ask, call, answer = traj.steps
    assert ask.message == "Read demo.txt and summarise it"
    assert call.tool_calls[0].function_name == "read"
    assert call.tool_calls[0].arguments == {"path": "demo.txt"}
    (result,) = call.observation.results
    assert (result.source_call_id, result.content) == ("call_1", "hello world")
    assert call.model_name == "anthropic/claude-sonnet-4-5"
    assert call.metrics.prompt_tokens == 1200 and call.metrics.cost_usd == 0.0042
    assert answer.message == "The file says hello world."
    assert traj.final_metrics.total_completion_tokens == 52
    assert traj.extra["skipped"] == {"label": 1, "context_edit": 1, "session_info": 1}
    other = Trajectory.model_validate(_documents(_get(viewer_client, session, leaf="e5f6a7b8"))[0])
    assert [s.message for s in other.steps] == ["Read demo.txt and summarise it", "Another route."]


def test_compactions_continue_into_the_next_trajectory(viewer_client):
    session = three_compactions()
    response = _get(viewer_client, session, leaf="u4")
    assert response["Content-Type"] == "application/zip"
    docs = [Trajectory.model_validate(d) for d in _documents(response)]
    assert len(docs) == 4
    refs = [d.continued_trajectory_ref for d in docs]
    assert refs == ["trajectory-2.json", "trajectory-3.json", "trajectory-4.json", None]
    for k, (doc, summary) in enumerate(zip(docs[1:], (S1, S2, S3), strict=True), start=1):
        first = doc.steps[0]
        assert first.source == "system" and first.message == summary
        assert doc.extra["continues_from"]["trajectory"] == f"trajectory-{k}.json"
        copied = [s for s in doc.steps if s.is_copied_context]
        assert [s.extra["pi_entry_id"] for s in copied] == [f"a{k}"]  # the kept tail
    assert [s.extra["pi_entry_id"] for s in docs[0].steps] == ["u1", "a1"]
    assert [s.extra["pi_entry_id"] for s in docs[3].steps] == ["c3", "a3", "u4"]
    # Copied steps are not counted twice in the figures.
    assert docs[1].final_metrics.total_prompt_tokens == 500
    one = _get(viewer_client, session, leaf="u4", segment="2")
    assert one["Content-Type"] == "application/json"
    assert Trajectory.model_validate(json.loads(one.content)).steps[0].message == S1
    assert _get(viewer_client, session, leaf="u4", segment="9").status_code == 400
    assert _get(viewer_client, session, leaf="u4", segment="x").status_code == 400
    # The branch summary on the other route is a system step.
    branch = Trajectory.model_validate(_documents(_get(viewer_client, session, leaf="u5"))[-1])
    assert any(s.extra.get("pi_type") == "branch_summary" for s in branch.steps)


def test_no_secret_reaches_the_file(make_session, viewer_client):
    data, _seeds, secrets = build_session()
    session = make_session(data)
    leaves = Entry.objects.filter(session=session).values_list("entry_id", flat=True)
    masked = 0
    for leaf in list(leaves)[-3:]:
        response = _get(viewer_client, session, leaf=leaf)
        for doc in _documents(response):
            masked += json.dumps(doc).count("[REDACTED:")
            Trajectory.model_validate(doc)
            assert_no_secret(json.dumps(doc, ensure_ascii=False), secrets, f"ATIF to {leaf}")
            assert_no_secret(json.dumps(doc), secrets, f"ATIF to {leaf} (escaped)")
    assert masked >= len(secrets)  # the secrets were on the routes, masked


def test_images_tool_results_without_calls_and_odd_roles():
    route = [
        crafted.entry("u1", None, {"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="},
            {"type": "image", "mimeType": "image/tiff", "data": "AAAA"},
        ]}, crafted.at(1)),
        crafted.entry("t1", "u1", {"role": "toolResult", "toolCallId": "gone", "toolName": "bash",
                                   "content": [{"type": "text", "text": "out"}], "isError": True}, "not a time"),
        crafted.entry("s1", "t1", {"role": "bashExecution", "command": "ls", "output": "a b", "exitCode": 0}, crafted.at(3)),
        crafted.entry("x1", "s1", {"role": "somethingNew", "content": "hi"}, crafted.at(4)),
    ]  # fmt: skip
    (doc,) = atif_export.trajectories(route, session_id="s", leaf="x1")
    Trajectory.model_validate(doc.to_json_dict())
    image = doc.steps[0].message
    assert isinstance(image, list) and image[1].source.path.startswith("data:image/png;base64,")
    assert image[2].text == "[image image/tiff]"
    orphan = doc.steps[1]
    assert orphan.source == "system" and orphan.timestamp is None
    assert orphan.observation.results[0].extra["toolCallId"] == "gone"
    assert doc.steps[2].message == "$ ls" and doc.steps[2].observation.results[0].content == "a b"
    assert doc.steps[3].source == "system" and doc.steps[3].extra["role"] == "somethingNew"


def test_who_may_download(make_session, editor_client):
    session = make_session()
    assert _get(Client(), session).status_code == 302  # to the login
    assert _get(editor_client, session).status_code == 200
    page = editor_client.get(reverse("explorer:session_detail", args=[session.pk])).content
    assert b"ATIF of this route" in page


def test_a_secret_in_the_headers_cwd_is_masked(make_session, viewer_client):
    token = "ghp_" + "Q7v" * 12  # a GitHub token in the working directory's name
    head = {"type": "session", "version": 3, "id": "atif-cwd", "cwd": f"/w/{token}",
            "timestamp": "2025-03-04T05:06:07.000Z"}  # fmt: skip
    user = {"type": "message", "id": "u1", "parentId": None, "timestamp": "2025-03-04T05:06:08.000Z",
            "message": {"role": "user", "content": "hi", "timestamp": 1}}  # fmt: skip
    session = make_session(f"{json.dumps(head)}\n{json.dumps(user)}\n".encode())
    for doc in _documents(_get(viewer_client, session, leaf="u1")):
        text = json.dumps(doc)
        assert token not in text and token[4:16] not in text
        assert "[REDACTED:" in text
