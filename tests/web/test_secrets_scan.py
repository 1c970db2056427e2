"""Secrets are found when entries enter the store (import, growth, appends) and rescanned
when the rules change, with the team's decisions kept."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from explorer import files, services
from explorer.models import Entry, SecretFinding, Session
from explorer.secrets import RULES_VERSION
from explorer.session import jsonfmt
from tests.secrets.seeded import build_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def seeded():
    data, seeds, secrets = build_session()
    result = files.import_bytes(data)
    assert result.ok, result.problems
    return result.session, data, seeds, secrets


def test_every_seeded_secret_is_found_at_import(seeded):
    session, data, seeds, _ = seeded
    found = {(f.line_no, f.path, f.kind) for f in SecretFinding.objects.filter(session=session)}
    for seed in seeds:
        assert (seed.line + 1, seed.path, seed.kind) in found, seed
    assert session.secrets_rules == RULES_VERSION
    assert Session.objects.get(pk=session.pk).secrets_rules == RULES_VERSION


def test_findings_never_hold_the_secret(seeded):
    session, _, seeds, _ = seeded
    stored = " ".join(
        " ".join(map(str, row))
        for row in SecretFinding.objects.filter(session=session).values_list()
    )
    for seed in seeds:
        assert seed.secret not in stored


def test_findings_point_at_the_entry_they_were_found_in(seeded):
    session, _, _, _ = seeded
    lines = dict(Entry.objects.filter(session=session).values_list("entry_id", "line_no"))
    for f in SecretFinding.objects.filter(session=session):
        assert lines[f.entry_id] == f.line_no


def test_an_appended_entry_is_scanned(seeded, editor_user):
    session, _, _, secrets = seeded
    before = SecretFinding.objects.filter(session=session).count()
    leaf = Entry.objects.filter(session=session).order_by("-position").first().entry_id
    services.set_label(session, editor_user, leaf, f"key {secrets['github-token']}")
    assert SecretFinding.objects.filter(session=session).count() == before + 1
    new = SecretFinding.objects.filter(session=session, kind="github-token").order_by("-pk")[0]
    row = Entry.objects.get(session=session, entry_id=new.entry_id)
    assert row.type == "label" and new.path == "/label" and new.line_no == row.line_no


def test_growth_of_the_file_is_scanned(seeded):
    session, data, _, secrets = seeded
    last = Entry.objects.filter(session=session).order_by("-position").first()
    line = jsonfmt.dumps(
        {
            "type": "session_info",
            "id": "feedbeef",
            "parentId": last.entry_id,
            "timestamp": "2025-03-04T06:00:00.000Z",
            "name": f"deploy {secrets['npm-token']}",
        }
    )
    result = files.import_bytes(data + line.encode() + b"\n")
    assert result.ok and result.added == 1
    finding = SecretFinding.objects.get(session=session, entry_id="feedbeef")
    assert finding.kind == "npm-token" and finding.path == "/name"


def test_a_rules_change_rescans_and_keeps_decisions(seeded, editor_user):
    session, data, seeds, _ = seeded
    count = SecretFinding.objects.filter(session=session).count()
    fp = SecretFinding.objects.filter(session=session).order_by("pk")[0]
    services.set_finding_status(fp, editor_user, SecretFinding.FALSE_POSITIVE)
    Session.objects.filter(pk=session.pk).update(secrets_rules="2000.1")
    SecretFinding.objects.filter(session=session).update(rules_version="2000.1")
    call_command("rescan_secrets")
    assert Session.objects.get(pk=session.pk).secrets_rules == RULES_VERSION
    assert SecretFinding.objects.filter(session=session).count() == count
    assert not SecretFinding.objects.filter(session=session, rules_version="2000.1").exists()
    again = SecretFinding.objects.get(
        session=session, entry_id=fp.entry_id, path=fp.path, fingerprint=fp.fingerprint
    )
    assert again.status == SecretFinding.FALSE_POSITIVE


def test_importing_an_existing_session_with_old_rules_rescans_it(seeded):
    session, data, _, _ = seeded
    Session.objects.filter(pk=session.pk).update(secrets_rules="")
    SecretFinding.objects.filter(session=session).delete()
    result = files.import_bytes(data)
    assert result.ok and result.unchanged
    assert SecretFinding.objects.filter(session=session).exists()
    assert Session.objects.get(pk=session.pk).secrets_rules == RULES_VERSION
