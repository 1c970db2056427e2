"""Page weight bounded: the Tree tab of a big session weighs about what a small one does.

The folded graph keeps to the Tree tab's budget (``queries.TREE_BUDGET``) and the text tree
to it plus one page of the route, so the HTML, the drawn nodes and the rows stop growing
once a session is big enough to fill them. Sizes are compared, never times.
"""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from benchmarks.gen_session import generate_session
from explorer import queries
from explorer.analysis.tree import PAGE_ROWS

pytestmark = pytest.mark.django_db


def _weights(client, session) -> dict[str, int]:
    page = client.get(reverse("explorer:session_detail", args=[session.pk])).content.decode()
    svg = client.get(reverse("explorer:graph_svg", args=[session.pk])).content.decode()
    tree = page.split('id="text-tree"', 1)[1].split("</ul>", 1)[0]
    return {
        "html": len(page.encode()),
        "svg": len(svg.encode()),
        "nodes": svg.count('class="node ge '),
        "rows": tree.count("<li "),
        "elements": len(re.findall(r"<[a-zA-Z]", page)),
    }


@pytest.fixture
def small_and_big(make_session, tmp_path):
    made = []
    for name, entries, branches, seed in (("small", 500, 5, 11), ("big", 6000, 120, 7)):
        path = generate_session(
            tmp_path / f"{name}.jsonl", entries=entries, branch_points=branches, seed=seed
        )
        made.append(make_session(path.read_bytes()))
    return made


def test_the_tree_page_of_a_big_session_weighs_about_what_a_small_one_does(
    viewer_client, small_and_big
):
    small, big = (_weights(viewer_client, s) for s in small_and_big)
    # The big session fills the budget; the small one draws all it has, well under it.
    # (The route to the cursor is always drawn, so the budget can be passed by a little.)
    assert small["nodes"] < queries.TREE_BUDGET < big["nodes"] <= queries.TREE_BUDGET * 1.3
    assert big["rows"] <= queries.TREE_BUDGET * 1.3 + PAGE_ROWS
    for what in ("html", "svg", "elements"):
        assert big[what] < 2 * small[what], (what, small, big)
