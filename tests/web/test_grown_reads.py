"""Whole-session reads that grow with the session instead of being read again after a write.

`queries.grown` keeps the tree skeleton and the per-entry costs current by reading only the
appended rows; the masking edge masks only the entries the scanner found a secret in while
the findings are current. These tests pin what must stay true: an append is seen at once,
a deleted and re-imported session never reuses the old figures, and a secret appended later
is still masked.
"""

from __future__ import annotations

import pytest
from django.core.cache import cache

from explorer import queries, services
from explorer.models import Entry, Session
from explorer.secrets import RULES_VERSION

pytestmark = pytest.mark.django_db

GITHUB_TOKEN = "ghp_" + "Zq8W3xLmN5vR7tY2pK9sD4fH6jB1cE0aGuVo"


def _assistant(text: str, cost: float) -> dict:
    return {
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "api": "anthropic-messages",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "usage": {
            "input": 10,
            "output": 5,
            "cacheRead": 0,
            "cacheWrite": 0,
            "totalTokens": 15,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": cost},
        },
        "stopReason": "stop",
        "timestamp": 1741064800000,
    }


def _tip(session: Session) -> str | None:
    return queries.default_leaf_id(session)


def test_an_append_extends_the_skeleton_and_the_costs(make_session):
    session = make_session()
    cache.clear()
    before_rows = queries._skeleton(session)
    before_costs = queries.entry_costs(session)
    queries.integrity_sections(session)  # its stubs are grown too
    assert len(before_rows) == Entry.objects.filter(session=session).count()

    result = services.append_message(
        session, None, _assistant("one more", 0.25), leaf_id=_tip(session)
    )
    new_id = result.entries[0].entry_id
    session.refresh_from_db()

    rows = queries._skeleton(session)
    assert len(rows) == len(before_rows) + 1
    assert rows[-1][0] == new_id and rows[-1][2] == "message" and rows[-1][3] == "assistant"
    costs = queries.entry_costs(session)
    assert costs[new_id] == 0.25
    assert {k: v for k, v in costs.items() if k != new_id} == before_costs
    integrity = queries.integrity_sections(session)
    # The grown value is what a full read gives.
    cache.clear()
    assert queries._skeleton(session) == rows
    assert queries.entry_costs(session) == costs
    assert queries.integrity_sections(session) == integrity


def test_a_reimported_session_does_not_reuse_the_old_figures(make_session):
    session = make_session()
    queries._skeleton(session)
    first_ids = {r[0] for r in queries._skeleton(session)}
    services.delete_session(session, None)
    other = make_session(
        b'{"type":"session","version":3,"id":"0195f3a2-0000-7d2e-9b1a-3c5d7e9f1a2b",'
        b'"timestamp":"2025-03-04T05:06:07.089Z","cwd":"/x"}\n'
        b'{"type":"message","id":"ffff0001","parentId":null,"timestamp":"2025-03-04T05:06:08.000Z",'
        b'"message":{"role":"user","content":"hello","timestamp":1741064768000}}\n'
    )
    ids = {r[0] for r in queries._skeleton(other)}
    assert ids == {"ffff0001"}
    assert not ids & first_ids


def test_a_secret_appended_later_is_masked(make_session):
    session = make_session()
    assert session.secrets_rules == RULES_VERSION
    assert queries.entries_with_secrets(session) == frozenset()
    result = services.append_message(
        session, None, _assistant(f"the token is {GITHUB_TOKEN}", 0.01), leaf_id=_tip(session)
    )
    new_id = result.entries[0].entry_id
    session.refresh_from_db()
    assert new_id in queries.entries_with_secrets(session)
    shown = queries.load_entries(session, [new_id])[new_id]
    text = shown["message"]["content"][0]["text"]
    assert GITHUB_TOKEN not in text and "[REDACTED:" in text


def test_every_entry_is_masked_while_the_findings_predate_the_rules(make_session):
    session = make_session()
    row = Entry.objects.filter(session=session, type="message", role="user").first()
    assert row is not None
    # A line holding a secret the findings do not know of (as after a rules change that
    # has not been rescanned yet): the stored session says its findings are stale.
    data = row.data()
    data["message"]["content"] = f"key {GITHUB_TOKEN}"
    from explorer.session import jsonfmt

    Entry.objects.filter(pk=row.pk).update(raw=jsonfmt.dumps(data))
    Session.objects.filter(pk=session.pk).update(secrets_rules="an-older-version")
    session.refresh_from_db()
    cache.clear()
    shown = queries.load_entries(session, [row.entry_id])[row.entry_id]
    assert GITHUB_TOKEN not in shown["message"]["content"]
    assert "[REDACTED:" in shown["message"]["content"]


def _fresh() -> None:
    """Forget every kept figure: the shared cache and this process's copies."""
    cache.clear()
    queries._GROWN.clear()


def _folded(session: Session, cursor: str | None) -> list[tuple]:
    model = queries.folded_tree(session, cursor=cursor)
    return [
        (i.kind, i.entry_id, i.parent_key, i.count, i.leaves, i.node.label if i.node else None)
        for i in model.graph.items
    ]


def test_the_tree_after_appends_folds_as_a_fresh_read(make_session):
    session = make_session()
    _fresh()
    _folded(session, _tip(session))
    for k in range(3):
        services.append_message(session, None, _assistant(f"reply {k}", 0.1), leaf_id=_tip(session))
        session.refresh_from_db()
    services.set_label(session, None, _tip(session), "here")
    session.refresh_from_db()
    grown_tree = _folded(session, _tip(session))
    assert any(row[5] == "here" for row in grown_tree)
    _fresh()
    assert _folded(session, _tip(session)) == grown_tree


def test_a_process_copy_is_not_trusted_once_the_shared_cache_forgets_it(make_session):
    session = make_session()
    _fresh()
    builds = []

    def build(last: int) -> list[int]:
        builds.append(last)
        return [last]

    def extend(value: list[int], after: int, last: int) -> list[int]:
        return [*value, last]

    assert queries.grown(session, "probe", build, extend) == builds
    assert queries.grown(session, "probe", build, extend) == builds  # kept
    assert len(builds) == 1
    cache.clear()  # another worker's view: nothing is cached any more
    queries.grown(session, "probe", build, extend)
    assert len(builds) == 2


def _routes_fresh(session: Session, leaves: list[str]) -> dict[str, list]:
    queries._ROUTES.clear()
    out = {}
    for leaf in leaves:
        out[leaf] = queries.light_path(session, leaf)
        queries._ROUTES.clear()  # each read by the full route query
    return out


def test_routes_joined_to_kept_ones_are_the_route_query_s(make_session):
    session = make_session()
    _fresh()
    tip = _tip(session)
    base = queries.light_path(session, tip)
    assert base and base[-1].entry_id == tip
    # Grow the tip, and a branch off the middle of the route a few entries long.
    for k in range(3):
        services.append_message(session, None, _assistant(f"tip {k}", 0.1), leaf_id=_tip(session))
        session.refresh_from_db()
    middle = base[len(base) // 2].entry_id
    branch = middle
    for k in range(4):
        result = services.append_message(
            session, None, _assistant(f"side {k}", 0.1), leaf_id=branch
        )
        branch = result.entries[0].entry_id
        session.refresh_from_db()
    leaves = [_tip(session), branch, middle, base[0].entry_id, tip]
    kept = {leaf: queries.light_path(session, leaf) for leaf in leaves}
    assert kept == _routes_fresh(session, leaves)
    assert [e.entry_id for e in kept[branch]][: len(base) // 2 + 1] == [
        e.entry_id for e in base[: len(base) // 2 + 1]
    ]
    assert queries.light_path(session, "no-such-entry") == []


def test_a_figure_kept_per_process_shares_its_stamp_not_its_value(make_session):
    """``shared=False``: the value never reaches the shared cache, a second worker building
    it adopts the first one's stamp (so neither disowns the other's copy), and a cleared
    cache still disowns every copy."""
    session = make_session()
    _fresh()
    builds = []

    def build(last: int) -> list[int]:
        builds.append(last)
        return [last]

    def extend(value: list[int], after: int, last: int) -> list[int]:
        return [*value, last]

    def run():
        return queries.grown(session, "local-probe", build, extend, shared=False)

    key = queries._identity_key(session, "grown|local-probe")
    assert run() == builds and len(builds) == 1
    assert cache.get(key) is None and cache.get(key + ":stamp")
    first_worker = dict(queries._GROWN)
    queries._GROWN.clear()  # another worker: its own memory, the same shared cache
    run()
    assert len(builds) == 2
    assert queries._GROWN[key].stamp == first_worker[key].stamp  # the stamp was adopted
    queries._GROWN.clear()
    queries._GROWN.update(first_worker)  # back in the first worker: its copy still holds
    run()
    assert len(builds) == 2
    cache.clear()
    run()
    assert len(builds) == 3
