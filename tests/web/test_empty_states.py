"""Empty states say what is (not) there: a header-only session's graph has no zoom tools and
says it has no entries; the Compactions tab of a path without one does not ask to choose."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.conftest import SMALL_SESSION

pytestmark = pytest.mark.django_db

HEADER_ONLY = SMALL_SESSION.splitlines(keepends=True)[0]


def test_a_header_only_session_says_it_has_no_entries(viewer_client, make_session):
    session = make_session(HEADER_ONLY)
    html = viewer_client.get(reverse("explorer:session_detail", args=[session.pk])).content.decode()
    assert 'id="graph-empty"' in html and "This session has only its header" in html
    assert "0 nodes for 0 entries" not in html
    assert 'data-zoom="in"' not in html and 'id="graph"' not in html


def test_a_session_with_entries_keeps_its_graph_tools(viewer_client, make_session):
    session = make_session()
    html = viewer_client.get(reverse("explorer:session_detail", args=[session.pk])).content.decode()
    assert 'data-zoom="in"' in html and 'id="graph-empty"' not in html


@pytest.mark.parametrize("data", [None, HEADER_ONLY], ids=["no-compaction", "header-only"])
def test_the_compactions_tab_without_one_does_not_ask_to_choose(viewer_client, make_session, data):
    session = make_session(data)
    html = viewer_client.get(reverse("explorer:compactions", args=[session.pk])).content.decode()
    assert "Choose a compaction" not in html
    assert 'id="no-compaction"' in html and "No compaction on this path" in html
