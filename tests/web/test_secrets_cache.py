"""Cached page builders follow a finding's status: marking a secret a false positive (or
back) shows the change at once, without waiting for the session to gain an entry."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.urls import reverse

from explorer import queries, services
from explorer.models import SecretFinding, Session
from tests.secrets.seeded import build_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded(make_session):
    data, _, secrets = build_session()
    return make_session(data), secrets


def test_a_status_change_makes_cached_labels_stale(seeded, editor_user):
    session, secrets = seeded
    token = secrets["github-token"]
    finding = SecretFinding.objects.get(session=session, kind="github-token", path="/label")
    before = queries.current_labels(session)
    assert any("[REDACTED:github-token]" in t for t in before.values())
    key = queries.mask_key(session)
    services.set_finding_status(finding, editor_user, SecretFinding.FALSE_POSITIVE)
    fresh = Session.objects.get(pk=session.pk)
    assert queries.mask_key(fresh) != key
    assert any(token in t for t in queries.current_labels(fresh).values())
    services.set_finding_status(finding, editor_user, SecretFinding.ROTATED)
    assert queries.mask_key(fresh) == key  # back to the first masking: its key again
    assert not any(token in t for t in queries.current_labels(fresh).values())


def test_the_tree_page_shows_the_decision_without_a_new_entry(seeded, editor_client, viewer_client):
    session, secrets = seeded
    token = secrets["github-token"]
    url = reverse("explorer:session_detail", args=[session.pk])
    count = session.entry_count
    assert token not in viewer_client.get(url).content.decode()
    finding = SecretFinding.objects.get(session=session, kind="github-token", path="/label")
    status_url = reverse("explorer:finding_status", args=[session.pk, finding.pk])
    assert editor_client.post(status_url, {"status": "false_positive"}).status_code == 302
    assert token in viewer_client.get(url).content.decode()
    assert Session.objects.get(pk=session.pk).entry_count == count  # nothing was appended


def test_the_session_list_reads_every_mask_key_in_one_query(
    make_session, django_assert_max_num_queries
):
    sessions = [make_session(build_session()[0]) for _ in range(3)]
    cache.clear()
    queries.list_path_totals(sessions)  # fills the cache
    with django_assert_max_num_queries(1 + 2 * len(sessions)):  # no per-row finding query
        totals = queries.list_path_totals(sessions)
    assert set(totals) == {s.pk for s in sessions}


def test_a_page_reads_the_false_positives_and_the_newest_entry_once(seeded, viewer_client):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    session, _ = seeded
    for name in ("session_detail", "transcript", "live"):
        url = reverse(f"explorer:{name}", args=[session.pk])
        viewer_client.get(url)
        with CaptureQueriesContext(connection) as seen:
            assert viewer_client.get(url).status_code == 200
        sql = [q["sql"] for q in seen.captured_queries]
        assert sum('FROM "explorer_secretfinding"' in q for q in sql) == 1, name
        newest = [q for q in sql if 'ORDER BY "explorer_entry"."position" DESC' in q]
        assert len(newest) <= 1, (name, newest)


def test_a_write_inside_a_read_memo_makes_the_next_read_fresh(seeded, editor_user):
    session, secrets = seeded
    finding = SecretFinding.objects.get(session=session, kind="github-token", path="/label")
    with queries.read_memo():
        before = queries.allowed_fingerprints(session)
        tip = queries.default_leaf_id(session)
        assert finding.fingerprint not in before
        services.set_finding_status(finding, editor_user, SecretFinding.FALSE_POSITIVE)
        assert finding.fingerprint in queries.allowed_fingerprints(session)
        services.rename_session(session, editor_user, "renamed", leaf_id=tip)
        assert queries.default_leaf_id(session) != tip  # the rename's entry is the new tip
    assert queries.allowed_fingerprints(session) == before | {finding.fingerprint}
