"""After an import stores a big session's whole-session figures, the importing process lets go
of its own copies step by step (issue 28: they held about 2 KB per entry, all at once, after
the last line). What must stay true: every figure is stored, the process keeps none of the
big ones, and a reader in that process gets the same figures as a fresh build."""

from __future__ import annotations

import pytest

from explorer import queries, stored_figures
from explorer.models import StoredFigure
from explorer.queries import keep

pytestmark = pytest.mark.django_db

BIG = ("skeleton", "integrity-findings", "integrity-report", "integrity-tools-2")


def _kept(session, name: str) -> bool:
    return keep._identity_key(session, f"grown|{name}") in keep._GROWN


def test_the_import_stores_the_figures_and_keeps_no_copy_of_its_own(make_session, monkeypatch):
    monkeypatch.setattr(stored_figures, "STORE_FROM", 1)
    monkeypatch.setattr(stored_figures, "STORE_LAG", 2)
    keep._GROWN.clear()
    session = make_session()
    stored = {
        n.removeprefix(f"{stored_figures.FORMAT}:").split("|")[0]
        for n in StoredFigure.objects.filter(session=session).values_list("name", flat=True)
    }
    assert set(BIG) <= stored
    assert not [name for name in BIG if _kept(session, name)]
    # A reader in the same process loads them: the same figures as a build from the rows.
    loaded = (queries._skeleton(session), queries.integrity_sections(session))
    keep._GROWN.clear()
    with monkeypatch.context() as mp:
        mp.setattr(stored_figures, "load", lambda *a: None)
        from django.core.cache import cache

        cache.clear()
        built = (queries._skeleton(session), queries.integrity_sections(session))
    assert loaded == built
