"""The Compactions tab reads a placed route by depth through its chain of segments
(``queries.compaction_route``), never the whole route, and gives the answers the walked
route (``light_path``'s index rows) gives: the same list, the same branch summaries and the
same detail for every compaction and window.

Generated sessions hold branches, several compactions on a route (their first kept entry
on the route, mid-turn, on another branch, unknown, or the compaction itself), branch
summaries and the other entry kinds; routes are read from every depth, so a route shorter
than the session's count of compactions and branch summaries reads its marks by range
instead of by type.
"""

from __future__ import annotations

import json
import random
import re
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer import queries
from explorer.analysis.compactions import replaced_count, replaced_indices, replaced_window
from explorer.models import Entry, SurvivalCheck
from explorer.queries import compaction_reads as cr
from explorer.queries import routes
from explorer.queries.compaction_reads import PlacedRoute, WalkedRoute, compaction_route
from tests.web.test_timeline_rows import _cold

pytestmark = pytest.mark.django_db

KINDS = ("user", "assistant", "tool", "compaction", "branch_summary", "session_info", "label")
WEIGHTS = (4, 4, 3, 3, 1, 1, 1)


def _session_lines(seed: int, count: int) -> list[dict]:
    """``count`` entries: a growing route with branches back to earlier entries, many
    compactions (first kept on the route up to a dozen back, often mid-turn; on another
    branch; unknown; the compaction itself) and branch summaries."""
    rng = random.Random(seed)
    out: list[dict] = []
    parent_of: dict[str, str | None] = {}
    leaf: str | None = None
    for n in range(count):
        eid = f"{seed % 251:02x}{n:06x}"
        if out and rng.random() < 0.04:
            leaf = rng.choice(out)["id"]  # a new branch
        route, cur = [], leaf
        while cur is not None:
            route.append(cur)
            cur = parent_of[cur]
        kind = rng.choices(KINDS, WEIGHTS)[0] if n > 2 else "user"
        base = {"id": eid, "parentId": leaf, "timestamp": f"2025-03-04T05:06:{n % 60:02d}.000Z"}
        ts = 1741064768000 + n
        if kind == "user":
            e = {"type": "message", "message": {"role": "user", "content": f"fix src/m{n}.py", "timestamp": ts}}  # fmt: skip
        elif kind == "assistant":
            usage = {"input": 100 + n, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 105 + n}  # fmt: skip
            e = {"type": "message", "message": {"role": "assistant", "content": [{"type": "text", "text": f"ran `git diff` {n}"}], "usage": usage, "timestamp": ts}}  # fmt: skip
        elif kind == "tool":
            e = {"type": "message", "message": {"role": "toolResult", "toolCallId": f"c{n}", "toolName": "read", "content": [{"type": "text", "text": f"/tmp/f{n}.txt 1234"}], "isError": False, "timestamp": ts}}  # fmt: skip
        elif kind == "compaction":
            pick = rng.random()
            if pick < 0.6 and route:
                kept = route[rng.randrange(0, min(len(route), 12))]
            elif pick < 0.75:
                kept = rng.choice(out)["id"]  # maybe on another branch
            elif pick < 0.9:
                kept = "ffffffff"  # no such entry
            else:
                kept = eid  # the compaction itself: nothing kept
            e = {"type": "compaction", "summary": f"Worked on src/m{n - 1}.py, kept {kept}", "firstKeptEntryId": kept, "tokensBefore": 1000 + n}  # fmt: skip
        elif kind == "branch_summary":
            e = {"type": "branch_summary", "fromId": rng.choice(out)["id"], "summary": f"tried src/m{n}.py"}  # fmt: skip
        elif kind == "label":
            e = {"type": "label", "targetId": rng.choice(route) if route else eid, "label": f"l{n}"}  # fmt: skip
        else:
            e = {"type": "session_info", "name": f"name {n}"}
        out.append({"type": e.pop("type"), **base, **e})
        parent_of[eid] = leaf
        leaf = eid
    return out


def _import(make_session, entries: list[dict]):
    head = {"type": "session", "version": 3, "id": str(uuid.uuid4()), "timestamp": "2025-03-04T05:06:07.089Z", "cwd": "/p"}  # fmt: skip
    data = "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in [head, *entries])
    return make_session(data.encode())


def _windows(item: dict) -> list[dict]:
    """Window positions of a compaction's two lists: the defaults, small windows at each
    end and in the middle of each list, and positions past the ends."""
    n, k = item["replaced_count"], item["kept_count"]
    out: list[dict] = [{}]
    for before in (0, 1, n // 2, n + 5):
        out.append({"replaced_before": before, "limit": 2})
    for after in (1, k // 2, k + 5):
        out.append({"kept_after": after, "limit": 2})
    return out


def _assert_same_answers(session, leaf: str) -> PlacedRoute:
    light = queries.light_path(session, leaf)
    placed = compaction_route(session, leaf)
    assert isinstance(placed, PlacedRoute)
    assert [m.depth for m in placed.marks] == [
        i for i, e in enumerate(light) if e.type in ("compaction", "branch_summary")
    ]
    listed = queries.route_compactions(session, placed)
    assert listed == queries.route_compactions(session, light)
    assert queries.route_branch_summaries(placed) == queries.route_branch_summaries(light)
    for item in listed:
        for window in _windows(item):
            got = queries.compaction_detail(session, placed, item, **window)
            assert got == queries.compaction_detail(session, light, item, **window), (item, window)
            ids = {e.entry_id for e in light}
            assert {r["id"] for r in got["replaced"] + got["kept"]} <= ids
    return placed


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 100_000))
def test_the_read_by_depth_equals_the_walked_route(make_session, seed):
    entries = _session_lines(seed, 140)
    session = _import(make_session, entries)
    # Half the stored checks go: the detail then checks the replaced entries itself and
    # compares the summary with the one before it over the route.
    dropped = [pk for k, pk in enumerate(Entry.objects.filter(session=session, type="compaction").values_list("pk", flat=True)) if k % 2]  # fmt: skip
    SurvivalCheck.objects.filter(pk__in=dropped).delete()
    rng = random.Random(seed)
    leaves = {entries[-1]["id"], *(e["id"] for e in rng.sample(entries, 6))}
    for leaf in sorted(leaves):
        _assert_same_answers(session, leaf)


def test_a_short_route_reads_its_marks_by_range(make_session):
    """A route shorter than the session's count of compactions and branch summaries reads
    its own entries (by range through its chain), and finds the same marks."""
    entries = _session_lines(7, 160)
    session = _import(make_session, entries)
    marks = Entry.objects.filter(session=session, type__in=cr.MARK_TYPES).count()
    light = queries.light_path(session, entries[-1]["id"])
    short = next(e.entry_id for e in light[3:] if len(queries.light_path(session, e.entry_id)) < marks)  # fmt: skip
    placed = _assert_same_answers(session, short)
    assert placed.chain.end + 1 < marks
    long = _assert_same_answers(session, entries[-1]["id"])
    assert long.chain.end + 1 >= marks and any(m.type == "compaction" for m in long.marks)


@st.composite
def _stretch(draw: st.DrawFn) -> tuple[list[str], tuple[int, int, int | None]]:
    """A route's types and one compaction's range on it, as ``extend_compaction_ranges``
    makes it: the compaction on the route, its start at or above it, its first kept entry
    above it (or none)."""
    n = draw(st.integers(1, 60))
    kinds = st.sampled_from(["message", "message", "compaction", "branch_summary"])
    types = draw(st.lists(kinds, min_size=n, max_size=n))
    ci = draw(st.integers(0, n - 1))
    fk = draw(st.none() | st.integers(0, ci - 1)) if ci else None
    # Mostly a start at or above where the stretch stops; sometimes below it (empty).
    start = draw(st.integers(0, fk if fk is not None else ci) | st.integers(0, ci))
    return types, (ci, start, fk)


@settings(deadline=None, max_examples=300)
@given(stretch=_stretch(), data=st.data())
def test_replaced_windows_count_from_the_compactions_alone(stretch, data):
    """``replaced_count`` and ``replaced_window`` (from the compactions' depths) are
    ``replaced_indices`` over the route's types, for any stretch and window."""
    types, rng = stretch
    first = data.draw(st.integers(0, len(types) + 1))
    size = data.draw(st.integers(0, len(types) + 1))
    comps = [i for i, t in enumerate(types) if t == "compaction"]
    full = replaced_indices(types, rng)
    assert replaced_count(rng, comps) == len(full)
    assert replaced_window(rng, comps, first, first + size) == full[first : first + size]


def _panel(page: bytes) -> str:
    """The page's compactions panel (the list and the chosen one's detail)."""
    found = re.search(r'<section class="panel comp-list".*</section>', page.decode(), re.S)
    assert found is not None
    return found.group(0)


def _no_walk(*args, **kwargs):
    raise AssertionError("the whole route was read")


def test_a_placed_route_is_not_walked(make_session, viewer_client, monkeypatch):
    """The page and its JSON read a placed route by depth: ``light_path`` is not called,
    and the answers are those of the walked route."""
    entries = _session_lines(3, 200)
    session = _import(make_session, entries)
    leaf = queries.default_leaf_id(session)
    light = queries.light_path(session, leaf)
    assert [e.type for e in light].count("compaction") >= 2
    url = f"/sessions/{session.pk}/compactions/"
    want_json = viewer_client.get(url, {"format": "json", "limit": 3}).json()
    want_page = viewer_client.get(url, {"limit": 3}).content
    _cold()
    monkeypatch.setattr(cr, "light_path", _no_walk)
    monkeypatch.setattr(routes, "light_path", _no_walk)
    monkeypatch.setattr(queries, "light_path", _no_walk)
    assert viewer_client.get(url, {"format": "json", "limit": 3}).json() == want_json
    got_page = viewer_client.get(url, {"limit": 3}).content
    assert _panel(got_page) == _panel(want_page)
    placed = compaction_route(session, leaf)
    for item in queries.route_compactions(session, placed):
        queries.compaction_detail(session, placed, item, limit=2)
    assert want_json["compactions"] and want_json["detail"]["replaced"]


def test_an_unplaced_leaf_walks_its_route(make_session, viewer_client, monkeypatch):
    """Where the segments do not place the leaf, the route is walked and read through
    the same questions: the same answers."""
    entries = _session_lines(5, 120)
    session = _import(make_session, entries)
    url = f"/sessions/{session.pk}/compactions/"
    want = viewer_client.get(url, {"format": "json"}).json()
    walked: list[int] = []
    real = cr.light_path

    def counted(*args, **kwargs):
        out = real(*args, **kwargs)
        walked.append(len(out))
        return out

    _cold()
    monkeypatch.setattr(cr.route_parts, "chain", lambda *a: None)
    monkeypatch.setattr(cr, "light_path", counted)
    leaf = queries.default_leaf_id(session)
    assert isinstance(compaction_route(session, leaf), WalkedRoute)
    walked.clear()
    assert viewer_client.get(url, {"format": "json"}).json() == want
    assert walked and walked[0] == len(queries.light_path(session, leaf))
