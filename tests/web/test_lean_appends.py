"""Labels, renames and context edits read the leaf and their targets, never the route: their
cost does not grow with the session, and the engine's rules hold (a context edit's target must
be on the route, asked of the database when the loaded entries stop short of a root)."""

from __future__ import annotations

import pytest

from benchmarks.gen_session import generate_session
from explorer import queries, services
from explorer.models import Entry
from explorer.session.errors import SessionError
from explorer.storage import DatabaseStorage

pytestmark = pytest.mark.django_db


@pytest.fixture
def long_session(make_session, tmp_path):
    path = generate_session(tmp_path / "long.jsonl", entries=1500, branch_points=6, seed=11)
    return make_session(path.read_bytes())


def _route(session, leaf: str) -> list[str]:
    return [e.entry_id for e in queries.light_path(session, leaf)]


def test_a_lean_read_holds_the_header_the_leaf_and_the_targets_only(long_session):
    leaf = queries.default_leaf_id(long_session)
    route = _route(long_session, leaf)
    assert len(route) > 500
    store = DatabaseStorage(long_session, view_leaf=leaf, lean=True, extra_ids=[route[3]])
    lines = store.read_bytes().splitlines()
    assert len(lines) == 3  # header, the target, the leaf (file order)
    assert b'"type":"session"' in lines[0].replace(b" ", b"")
    assert route[3].encode() in lines[1] and leaf.encode() in lines[2]
    assert store.on_branch(route[3], leaf) and not store.on_branch("not-there", leaf)


def test_a_label_rename_and_edit_far_up_a_long_route_append_at_the_leaf(long_session, editor_user):
    leaf = queries.default_leaf_id(long_session)
    route = _route(long_session, leaf)
    far = next(
        e.entry_id
        for e in Entry.objects.filter(session=long_session, entry_id__in=route[1:50]).order_by(
            "position"
        )
        if e.type == "message" and e.role == "user"
    )
    label = services.set_label(long_session, editor_user, far, "start", leaf_id=leaf).entry
    assert label.parent_id == leaf and label.data()["targetId"] == far
    renamed = services.rename_session(long_session, editor_user, "Long", leaf_id=label.entry_id)
    assert renamed.entry.parent_id == label.entry_id
    edit = services.add_context_edit(
        long_session, editor_user, far, None, leaf_id=renamed.entry.entry_id
    ).entry
    assert edit.parent_id == renamed.entry.entry_id and edit.data()["targetId"] == far
    # The pages see the edit: on the new leaf's route the target is hidden by it.
    marks = queries.route_map(long_session, edit.entry_id).edits
    assert marks.get(far) == ("hidden", edit.entry_id)


def test_an_edit_of_an_entry_on_another_branch_is_refused(long_session, editor_user):
    leaves = [c["id"] for c in queries.leaf_choices(long_session)]
    a, b = leaves[0], next(x for x in leaves[1:] if x not in _route(long_session, leaves[0]))
    only_b = [e for e in _route(long_session, b) if e not in set(_route(long_session, a))]
    target = next(
        e.entry_id
        for e in Entry.objects.filter(session=long_session, entry_id__in=only_b, type="message")
        if e.role in ("user", "assistant")
    )
    before = Entry.objects.filter(session=long_session).count()
    with pytest.raises(SessionError, match="not on the active branch"):
        services.add_context_edit(long_session, editor_user, target, None, leaf_id=a)
    assert Entry.objects.filter(session=long_session).count() == before
    with pytest.raises(SessionError, match="not found"):
        services.set_label(long_session, editor_user, "no-such-entry", "x", leaf_id=a)
