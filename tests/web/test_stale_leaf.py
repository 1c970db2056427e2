"""A write aimed at a leaf that moved meanwhile is refused (409 for htmx and JSON callers, a
message on the plain form), unless its author asked for a branch there."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from explorer import queries, services
from explorer.models import Entry, Session

# The small session's cursor (its last entry) is 1b2c3d4e.
TIP = "1b2c3d4e"


@pytest.fixture
def session(make_session):
    return make_session()


@pytest.fixture
def other_editor(db, django_user_model):
    from tests.conftest import _client_for, _user_with_role

    return _client_for(_user_with_role(django_user_model, "eddie2", "editor"))


def _labels(session) -> list[Entry]:
    rows = Entry.objects.filter(session=session, type="label", author__isnull=False)
    return list(rows.order_by("position"))  # the labels appended here (the file has one)


def _label(client, session, text: str, expected: str | None, **extra):
    url = reverse("explorer:label", args=[session.pk])
    data = {"target": "a1b2c3d4", "label": text, "expected_leaf": expected or "", **extra}
    return client.post(url, data, **extra.pop("headers", {}))


def test_the_label_form_posts_the_leaf_the_page_showed(editor_client, session):
    r = editor_client.get(reverse("explorer:label", args=[session.pk]), {"target": "a1b2c3d4"})
    assert f'name="expected_leaf" value="{TIP}"' in r.content.decode()


def test_the_second_of_two_editors_at_one_leaf_is_refused_on_the_plain_form(
    editor_client, other_editor, session
):
    first = _label(editor_client, session, "first", TIP)
    assert first.status_code == 302
    stored = _labels(session)
    assert [e.parent_id for e in stored] == [TIP]
    # The other editor's cursor followed the new entry; their page still showed TIP.
    r = _label(other_editor, session, "second", TIP)
    html = r.content.decode()
    assert r.status_code == 409 and "The session changed while you were looking at it" in html
    assert _labels(session) == stored  # nothing written
    # The form shown again aims at the leaf as it is now: posting it again is accepted.
    assert f'name="expected_leaf" value="{stored[0].entry_id}"' in html
    again = _label(other_editor, session, "second", stored[0].entry_id)
    assert again.status_code == 302
    assert [e.parent_id for e in _labels(session)] == [TIP, stored[0].entry_id]


def test_htmx_and_json_callers_get_409(editor_client, other_editor, session):
    assert _label(editor_client, session, "first", TIP).status_code == 302
    url = reverse("explorer:label", args=[session.pk])
    data = {"target": "a1b2c3d4", "label": "late", "expected_leaf": TIP}
    htmx = other_editor.post(url, data, HTTP_HX_REQUEST="true")
    assert htmx.status_code == 409
    assert "The session changed" in htmx.content.decode()
    as_json = other_editor.post(url + "?format=json", data)
    assert as_json.status_code == 409
    body = json.loads(as_json.content)
    assert body["conflict"] is True and body["expected_leaf"] == TIP
    assert body["leaf"] == _labels(session)[-1].entry_id
    assert len(_labels(session)) == 1
    ok = other_editor.post(url + "?format=json", {**data, "expected_leaf": body["leaf"]})
    assert ok.status_code == 200 and json.loads(ok.content)["ok"] is True
    assert len(_labels(session)) == 2


def test_a_branch_asked_for_appends_at_the_leaf_the_page_showed(
    editor_client, other_editor, session
):
    assert _label(editor_client, session, "first", TIP).status_code == 302
    r = _label(other_editor, session, "on a branch", TIP, branch="1")
    assert r.status_code == 302
    labels = _labels(session)
    assert [e.parent_id for e in labels] == [TIP, TIP]  # two children of TIP: a branch
    assert queries.cursor_id(session, other_editor.user) == labels[-1].entry_id


def test_a_stale_context_edit_is_refused_too(editor_client, other_editor, session):
    assert _label(editor_client, session, "first", TIP).status_code == 302
    before = Entry.objects.filter(session=session).count()
    url = reverse("explorer:edit", args=[session.pk])
    r = other_editor.post(
        url,
        {"target": "d4e5f6a7", "mode": "hide", "confirm": "1", "expected_leaf": TIP},
        HTTP_HX_REQUEST="true",
    )
    assert r.status_code == 409
    assert Entry.objects.filter(session=session).count() == before


def test_a_post_without_expected_leaf_writes_at_the_cursor(editor_client, session):
    url = reverse("explorer:label", args=[session.pk])
    assert editor_client.post(url, {"target": "a1b2c3d4", "label": "x"}).status_code == 302
    assert editor_client.post(url, {"target": "a1b2c3d4", "label": "y"}).status_code == 302
    first, second = _labels(session)
    assert second.parent_id == first.entry_id


def test_services_refuse_a_stale_leaf_with_nothing_written(editor_user, session):
    services.set_label(session, editor_user, "a1b2c3d4", "one", expected_leaf=TIP)
    count = Session.objects.get(pk=session.pk).entry_count
    with pytest.raises(services.StaleLeaf) as info:
        services.set_label(session, editor_user, "a1b2c3d4", "two", expected_leaf=TIP)
    assert info.value.expected == TIP and info.value.current != TIP
    assert Session.objects.get(pk=session.pk).entry_count == count


def test_counters_come_from_the_row_not_from_a_stale_copy(editor_user, session):
    from django.db import transaction

    from explorer.storage import append_lines

    stale = Session.objects.get(pk=session.pk)  # loaded before the other appends
    for text in ("a", "b", "c"):
        services.set_label(session, editor_user, "a1b2c3d4", text)
    tip = _labels(session)[-1].entry_id
    line = json.dumps({"type": "label", "id": "feedf00d", "parentId": tip,
                       "timestamp": "2026-01-01T00:00:00.000Z", "targetId": "a1b2c3d4",
                       "label": "d"})  # fmt: skip
    with transaction.atomic():
        append_lines(stale, (line + "\n").encode())
    row = Session.objects.get(pk=session.pk)
    entries = Entry.objects.filter(session=session)
    assert row.entry_count == entries.count()
    assert row.leaf_count == entries.filter(child_count=0).count()
    assert row.next_position == entries.order_by("-position").first().position + 1


# --- Undo and the Live tab's turn form name the cursor they were shown too -----------------


def test_the_undo_buttons_post_the_cursor_the_page_showed(editor_client, session):
    for url in (
        f"/sessions/{session.pk}/transcript/",
        f"/sessions/{session.pk}/entry/?id=c3d4e5f6",
    ):
        body = editor_client.get(url).content.decode()
        undo = body.split(f'action="/sessions/{session.pk}/undo/"')[1].split("</form>")[0]
        assert f'name="expected_leaf" value="{TIP}"' in undo, url


def test_a_stale_undo_is_refused_with_nothing_written(editor_client, session):
    _label(editor_client, session, "moves my cursor", TIP)  # from another tab, say
    count = Entry.objects.filter(session=session).count()
    url = reverse("explorer:undo", args=[session.pk])
    r = editor_client.post(
        url, {"target": "c3d4e5f6", "expected_leaf": TIP}, headers={"HX-Request": "true"}
    )
    assert r.status_code == 409
    assert "The session changed while you were looking at it" in r.content.decode()
    assert Entry.objects.filter(session=session).count() == count
    # At the leaf as it is now the same undo is accepted.
    now = queries.cursor_id(session, _labels(session)[0].author)
    r = editor_client.post(url, {"target": "c3d4e5f6", "expected_leaf": now})
    assert r.status_code == 302
    assert Entry.objects.filter(session=session).count() == count + 1


def test_the_turn_form_posts_the_cursor_the_page_showed(editor_client, session, settings):
    settings.SESSIONS_LLM = {"SESSIONS_LLM_BASE_URL": "http://127.0.0.1:9/v1"}
    body = editor_client.get(reverse("explorer:live", args=[session.pk])).content.decode()
    form = body.split('id="turn-form"')[1].split("</form>")[0]
    assert f'name="expected_leaf" id="turn-expected-leaf" value="{TIP}"' in form


def test_a_turn_sent_from_a_stale_page_is_refused_before_it_runs(editor_client, session, settings):
    from explorer.models import TurnLock

    # Nothing listens there: a turn that started would fail, not hang.
    settings.SESSIONS_LLM = {"SESSIONS_LLM_BASE_URL": "http://127.0.0.1:9/v1"}
    _label(editor_client, session, "moves my cursor", TIP)
    count = Entry.objects.filter(session=session).count()
    url = reverse("explorer:live_turn", args=[session.pk])
    data = {"text": "hello", "expected_leaf": TIP}
    r = editor_client.post(url, data, headers={"HX-Request": "true"})
    assert r.status_code == 409
    body = r.content.decode()
    assert "The session changed while you were looking at it" in body and 'id="turn-status"' in body
    assert Entry.objects.filter(session=session).count() == count
    assert not TurnLock.objects.filter(session=session).exists()  # the next turn may start
    # Without JavaScript: back to the Live tab, with the same message.
    r = editor_client.post(url, data, follow=True)
    assert "The session changed while you were looking at it" in r.content.decode()
    assert Entry.objects.filter(session=session).count() == count


# --- A post without expected_leaf reads the cursor under the lock ---------------------------


def test_a_post_without_expected_leaf_writes_at_the_cursor_as_it_is_under_the_lock(
    editor_client, editor_user, session
):
    from explorer import forms

    # The request read the cursor (TIP), then another tab of the same login wrote there
    # before this request's turn at the lock came.
    seen = queries.cursor_id(session, editor_user)
    form = forms.LabelForm({"target": "a1b2c3d4", "label": "late"}, session=session,
                           user=editor_user, cursor=seen)  # fmt: skip
    assert form.is_valid()
    services.set_label(session, editor_user, "a1b2c3d4", "from another tab")
    assert form.perform() is not None
    first, second = _labels(session)
    assert first.parent_id == TIP
    assert second.parent_id == first.entry_id  # not a second child of TIP: no fork
    assert Entry.objects.get(session=session, entry_id=TIP).child_count == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_posts_without_expected_leaf_fork_nothing(
    small_session_bytes, django_user_model, monkeypatch
):
    """Four clients of one login post at once; each read the cursor before any of them
    wrote (the barrier holds them there). Every label must land in one chain."""
    import threading

    from django.db import connection

    from explorer import broadcast, forms
    from explorer.permissions import set_role

    user = django_user_model.objects.create_user("four", password="pw")
    set_role(user, "editor")
    stored = services.import_bytes(small_session_bytes).session
    # SQLite in memory with a shared cache fails a writer at once beside a reader in another
    # thread (the broadcasts read); only the writes are under test.
    monkeypatch.setattr(broadcast, "entries_appended", lambda *args, **kwargs: None)
    monkeypatch.setattr(broadcast, "cursor_moved", lambda *args, **kwargs: None)
    clients = 4
    ready = [
        forms.LabelForm({"target": "a1b2c3d4", "label": f"c{n}"}, session=stored, user=user,
                        cursor=queries.cursor_id(stored, user))
        for n in range(clients)
    ]  # fmt: skip
    for form in ready:
        assert form.is_valid()
    barrier = threading.Barrier(clients)
    errors: list[Exception] = []

    def client(form) -> None:
        try:
            barrier.wait()
            if form.perform() is None:
                errors.append(AssertionError(form.error_messages()))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(f,)) for f in ready]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    labels = _labels(stored)
    assert len(labels) == clients
    chain = [TIP] + [e.entry_id for e in labels]
    assert [e.parent_id for e in labels] == chain[:-1]  # one chain
    forks = Entry.objects.filter(session=stored, child_count__gt=1).values_list("entry_id")
    assert [f[0] for f in forks] == ["a1b2c3d4"]  # the file's own branch point, no other


def test_the_undo_of_a_viewed_route_posts_that_leaf(editor_client, session):
    url = f"/sessions/{session.pk}/entry/?id=c3d4e5f6&leaf={TIP}"
    body = editor_client.get(url).content.decode()
    undo = body.split(f'action="/sessions/{session.pk}/undo/"')[1].split("</form>")[0]
    assert f'name="expected_leaf" value="{TIP}"' in undo
    assert f'name="leaf" value="{TIP}"' in undo
