"""The cost left on other branches (Compare's "abandoned") is the session's exact total less
one route's costs (``Session.cost_partials``, kept by the entry writers): exactly the sum of
the costs off the route added up afresh, after an import, a grown import, appends and
migration 0025's fill."""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction

import pytest
from django.db import transaction

from explorer import services, storage
from explorer.models import Entry, Session
from explorer.queries.costs import abandoned_cost, entry_costs
from explorer.queries.routes import light_path
from explorer.session import exactsum
from tests.web.migration_states import migration_states

HEADER = b'{"type":"session","version":3,"id":"s-costs","timestamp":"t","cwd":"/w"}\n'


def _reply(i: int, parent: str | None, cost: float) -> dict:
    usage = {"input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "cost": {"total": cost}}
    return {
        "type": "message", "id": f"a{i}", "parentId": parent, "timestamp": "t",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "ok"}],
                    "usage": usage, "stopReason": "stop"},
    }  # fmt: skip


def _tree(n: int, seed: int) -> list[dict]:
    """Replies in a branchy tree, with costs far apart in size (tiny beside large)."""
    rng = random.Random(seed)
    out: list[dict] = []
    for i in range(n):
        parent = None if i == 0 else f"a{rng.randrange(i) if rng.random() < 0.3 else i - 1}"
        cost = rng.choice([1e-9, 0.0003, 0.1, 7.25, 1e6]) * rng.random()
        out.append(_reply(i, parent, cost))
    return out


def _lines(entries: list[dict]) -> bytes:
    return b"".join(json.dumps(e).encode() + b"\n" for e in entries)


def assert_exact(session: Session) -> None:
    """The stored total is exact, and for every leaf the figure is the sum off its route."""
    session.refresh_from_db()
    costs = list(entry_costs(session).values())
    partials = exactsum.loads(session.cost_partials)
    assert partials is not None
    assert sum(map(Fraction, partials)) == sum(map(Fraction, costs))
    leaves = Entry.objects.filter(session=session, child_count=0).values_list("entry_id", flat=True)
    for leaf in leaves:
        route = {e.entry_id for e in light_path(session, leaf)}
        afresh = math.fsum(c for i, c in entry_costs(session).items() if i not in route)
        assert abandoned_cost(session, leaf) == afresh


@pytest.mark.django_db
def test_import_grown_import_and_appends():
    entries = _tree(80, 3)
    session = services.import_bytes(HEADER + _lines(entries[:50])).session
    assert_exact(session)
    services.import_bytes(HEADER + _lines(entries))  # the same file, grown
    assert_exact(session)
    rng = random.Random(5)
    for i in range(80, 95):
        parent = f"a{rng.randrange(i)}"
        with transaction.atomic():
            storage.append_lines(session, _lines([_reply(i, parent, rng.random() * 10**rng.randint(-9, 6))]))  # fmt: skip
    assert_exact(session)


@pytest.mark.django_db
def test_a_session_without_a_stored_total_adds_its_entries_up():
    session = services.import_bytes(HEADER + _lines(_tree(30, 9))).session
    leaf = Entry.objects.filter(session=session).order_by("-position").first().entry_id
    stored = abandoned_cost(session, leaf)
    Session.objects.filter(pk=session.pk).update(cost_partials="")
    session.refresh_from_db()
    assert abandoned_cost(session, leaf) == stored
    with transaction.atomic():  # an append keeps "not known" rather than a partial sum
        storage.append_lines(session, _lines([_reply(99, leaf, 0.5)]))
    session.refresh_from_db()
    assert session.cost_partials == ""


@pytest.mark.django_db(transaction=True)
def test_migration_0025_fills_stored_sessions():
    old, new = [("explorer", "0024_entry_body_last")], [("explorer", "0025_session_cost_sum")]
    costs = [0.1, 1e-9, 2.5, 0.0, 1e6, 0.3]
    with migration_states() as migrate:
        apps = migrate(old)
        OldSession = apps.get_model("explorer", "Session")
        OldEntry = apps.get_model("explorer", "Entry")
        stored = OldSession.objects.create(session_id="s-0024", header_raw="{}")
        OldEntry.objects.bulk_create(
            OldEntry(session=stored, entry_id=f"e{k}", parent_id=f"e{k - 1}" if k else None,
                     type="message", position=k + 1, line_no=k + 2, raw="{}", cost=c)
            for k, c in enumerate(costs)
        )  # fmt: skip
        apps = migrate(new)
        text = apps.get_model("explorer", "Session").objects.get(pk=stored.pk).cost_partials
        partials = exactsum.loads(text)
        assert partials is not None
        assert sum(map(Fraction, partials)) == sum(map(Fraction, costs))
        migrate(old)  # reversible
