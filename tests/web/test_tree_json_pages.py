"""The Tree JSON in pages: a client follows ``next`` and reads every node once, in file order,
with the same parents and route flags the engine gives; a page's size does not grow with the
session."""

from __future__ import annotations

from benchmarks.gen_session import generate_session
from explorer import services
from explorer.session.manager import SessionManager


def _import(tmp_path, entries: int):
    path = generate_session(tmp_path / f"s{entries}.jsonl", entries=entries, branch_points=6)
    session = services.import_bytes(path.read_bytes(), source_path="", user=None).session
    return session, SessionManager.open(str(path))


def _every_page(client, url: str) -> list[dict]:
    pages = []
    while url:
        page = client.get(url).json()
        pages.append(page)
        url = page["next"]
    return pages


def test_following_next_lists_every_node_once_in_file_order(tmp_path, viewer_client):
    session, manager = _import(tmp_path, 120)
    pages = _every_page(viewer_client, f"/sessions/{session.pk}/?format=json&limit=25")
    assert [len(p["nodes"]) for p in pages] == [25, 25, 25, 25, 20]
    assert pages[-1]["next"] is None and pages[-1]["next_after"] is None
    nodes = [n for p in pages for n in p["nodes"]]
    engine = manager.get_entries()
    assert [n["id"] for n in nodes] == [e["id"] for e in engine]
    assert [n["parent_id"] for n in nodes] == [e.get("parentId") for e in engine]
    assert [n["position"] for n in nodes] == list(range(1, 121))
    route = {e["id"] for e in manager.get_branch()}
    assert {n["id"] for n in nodes if n["on_route"]} == route
    assert all(p["entry_count"] == 120 for p in pages)


def test_a_page_holds_as_many_nodes_on_a_big_session_as_on_a_small_one(tmp_path, viewer_client):
    small, _ = _import(tmp_path, 300)
    big, _ = _import(tmp_path, 3000)
    sizes = []
    for session in (small, big):
        page = viewer_client.get(f"/sessions/{session.pk}/?format=json&limit=200").json()
        assert len(page["nodes"]) == 200 and page["next"]
        sizes.append(page["next_after"])
    assert sizes == [200, 200]


def test_limits_are_clamped_and_a_bad_after_starts_at_the_beginning(make_session, viewer_client):
    session = make_session()
    first = viewer_client.get(f"/sessions/{session.pk}/?format=json&limit=0&after=x").json()
    assert first["after"] == 0 and len(first["nodes"]) == 1 and first["next_after"] == 1
    whole = viewer_client.get(f"/sessions/{session.pk}/?format=json").json()
    assert len(whole["nodes"]) == session.entry_count and whole["next"] is None
    past = viewer_client.get(f"/sessions/{session.pk}/?format=json&after=99999").json()
    assert past["nodes"] == [] and past["next"] is None
