"""Compare stands in for the multi-MB lines of the two contexts that it does not list
(``queries.omitted``): the answer is the one every line parsed gives, and a cold request
parses no such line."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

import pytest
from django.core.cache import cache
from django.urls import reverse

from benchmarks.gen_session import generate_session
from explorer import queries, services
from explorer.models import Entry
from explorer.queries import compare as compare_query
from explorer.queries import omitted
from explorer.session import jsonfmt

pytestmark = pytest.mark.django_db

BIG = 300_000  # characters of each big tool result: above omitted.BIG_LINE
BIG_LINE = omitted.BIG_LINE
HEADER = {"type": "session", "version": 3, "id": "0195f3a2-0000-7000-8000-00000000b16b",
          "timestamp": "2025-03-04T05:06:07.089Z", "cwd": "/w"}  # fmt: skip
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


def _entry(i: str, parent: str | None, message: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "id": i, "parentId": parent,
            "timestamp": "2025-03-04T05:06:08.000Z", "message": message}  # fmt: skip


def _tool(i: str, parent: str, text: str, call: str = "") -> dict[str, Any]:
    return _entry(i, parent, {"role": "toolResult", "toolCallId": call or f"c{i}", "toolName": "read",
                              "content": [{"type": "text", "text": text}], "isError": False,
                              "timestamp": 3})  # fmt: skip


def _user(i: str, parent: str | None, text: str) -> dict[str, Any]:
    return _entry(i, parent, {"role": "user", "content": text, "timestamp": 2})


def _reply(i: str, parent: str, text: str) -> dict[str, Any]:
    return _entry(i, parent, {"role": "assistant", "content": [{"type": "text", "text": text}],
                              "api": "anthropic-messages", "provider": "anthropic", "model": "m",
                              "usage": {"input": 10, "output": 5, "cacheRead": 0,
                                        "cacheWrite": 0, "totalTokens": 15,
                                        "cost": {"total": 0.01}},
                              "stopReason": "stop", "timestamp": 4})  # fmt: skip


def _big_session_lines(*, edit: bool = False, secret: bool = False) -> list[dict[str, Any]]:
    """Four big tool results shared by two branches, then each branch's own short turn
    (and, asked for, a context edit of one big result on branch A, a secret in another)."""
    lines = [HEADER, _user("u0", None, "read them")]
    parent = "u0"
    for n in range(4):
        text = (f"{n} " + "x" * BIG) if not (secret and n == 2) else f"key {SECRET} " + "y" * BIG
        lines.append(_tool(f"t{n}", parent, text))
        parent = f"t{n}"
    lines.append(_reply("r0", parent, "read"))
    lines += [_user("ua", "r0", "left"), _reply("ra", "ua", "went left")]
    lines += [_user("ub", "r0", "right"), _reply("rb", "ub", "went right")]
    if edit:
        lines.append({"type": "context_edit", "id": "ea", "parentId": "ra", "targetId": "t1",
                      "timestamp": "2025-03-04T05:06:09.000Z",
                      "replacement": {"content": "trimmed"}})  # fmt: skip
    return lines


def _cold(client, session, a: str, b: str) -> dict[str, Any]:
    queries.forget_reads()
    cache.clear()
    url = reverse("explorer:compare", args=[session.pk])
    r = client.get(url, {"a": a, "b": b, "format": "json"})
    assert r.status_code == 200
    return r.json()


def _answers(client, session, pairs, monkeypatch, big_line: int) -> list[dict[str, Any]]:
    monkeypatch.setattr(omitted, "BIG_LINE", big_line)
    return [_cold(client, session, a, b) for a, b in pairs]


def _count_stand_ins(monkeypatch) -> list[int]:
    made: list[int] = []
    original = compare_query.omitted_entries

    def counting(*args: Any) -> dict[str, dict]:
        out = original(*args)
        made.append(len(out))
        return out

    monkeypatch.setattr(compare_query, "omitted_entries", counting)
    return made


def _big_parses(monkeypatch) -> list[int]:
    """Sizes of the strings of at least omitted.BIG_LINE characters parsed from now on."""
    sizes: list[int] = []
    original = jsonfmt.loads

    def loads(text: Any, *args: Any, **kwargs: Any) -> Any:
        if len(text) >= omitted.BIG_LINE:
            sizes.append(len(text))
        return original(text, *args, **kwargs)

    monkeypatch.setattr(jsonfmt, "loads", loads)
    return sizes


@pytest.mark.parametrize(("edit", "secret"), [(False, False), (True, False), (False, True)])
def test_big_lines_not_listed_are_not_parsed(viewer_client, make_session, monkeypatch, edit, secret):  # fmt: skip
    lines = _big_session_lines(edit=edit, secret=secret)
    session = make_session(("\n".join(json.dumps(x) for x in lines) + "\n").encode())
    a = "ea" if edit else "ra"
    reference = _answers(viewer_client, session, [(a, "rb")], monkeypatch, 10**12)[0]
    monkeypatch.setattr(omitted, "BIG_LINE", BIG_LINE)
    made = _count_stand_ins(monkeypatch)
    sizes = _big_parses(monkeypatch)
    answer = _cold(viewer_client, session, a, "rb")
    assert answer == reference
    result = answer["result"]
    assert result["diff_counts"]["both"] >= 5  # the prompt, the results A sees unedited, the reply
    # The edited result (A sees it trimmed) and the one holding a secret (masked) are read.
    read = {1} if edit else {2} if secret else set()
    assert made == [4 - len(read)]
    assert len(sizes) == len(read)
    # The page and its partial answer from the same function.
    url = reverse("explorer:compare", args=[session.pk])
    page = viewer_client.get(url, {"a": a, "b": "rb"})
    partial = viewer_client.get(url, {"a": a, "b": "rb"}, headers={"HX-Request": "true"})
    assert page.status_code == partial.status_code == 200
    assert len(sizes) == 3 * len(read)


def test_a_big_line_listed_shows_its_stored_texts(viewer_client, make_session, monkeypatch):
    """A route's newest entries are listed with their titles: a big one among them shows the
    texts stored with it (``line_text_store``), unread; without its row it is read."""
    from explorer.models import BigLineText

    lines = _big_session_lines()
    session = make_session(("\n".join(json.dumps(x) for x in lines) + "\n").encode())
    sizes = _big_parses(monkeypatch)
    answer = _cold(viewer_client, session, "t3", "rb")
    assert [r["id"] for r in answer["result"]["route_a"]] == []  # t3 is the ancestor, titled
    title = answer["result"]["ancestor_title"]
    assert answer["result"]["ancestor"] == "t3" and title.startswith("3 xxx")
    assert len(sizes) == 0
    message = {"role": "user", "content": "one more", "timestamp": 9}
    services.append_message(session, None, message, leaf_id="rb")
    session.refresh_from_db()
    grown = _cold(viewer_client, session, "t3", "rb")
    assert grown["result"]["ancestor_title"] == title and len(sizes) == 0
    BigLineText.objects.filter(session=session).delete()  # as before migration 0027
    assert _cold(viewer_client, session, "t3", "rb") == grown and len(sizes) == 1


def test_equal_big_results_of_two_branches_are_read_and_shared(
    viewer_client, make_session, monkeypatch
):
    """Each branch ends in a big tool result of the same text from its own entry, not
    listed (one entry and one line of the difference listed per route): equal content is shared, which only the text can
    tell, so both lines are read after all."""
    text = "same " + "z" * BIG
    lines = [HEADER, _user("u0", None, "go"), _reply("r0", "u0", "ok")]
    lines += [_tool("ta", "r0", text, "c1"), _reply("ra", "ta", "left")]
    lines += [_tool("tb", "r0", text, "c1"), _reply("rb", "tb", "right")]
    session = make_session(("\n".join(json.dumps(x) for x in lines) + "\n").encode())
    monkeypatch.setattr(compare_query, "ROUTE_SHOWN", 1)
    monkeypatch.setattr(compare_query, "DIFF_SHOWN", 2)  # the replies' lines, not the results'
    reference = _answers(viewer_client, session, [("ra", "rb")], monkeypatch, 10**12)[0]
    monkeypatch.setattr(omitted, "BIG_LINE", BIG_LINE)
    made = _count_stand_ins(monkeypatch)
    sizes = _big_parses(monkeypatch)
    answer = _cold(viewer_client, session, "ra", "rb")
    assert answer == reference and answer["result"]["diff_counts"]["content"] == 1
    assert made == [2] and len(sizes) == 2


def _leaves(session) -> list[str]:
    return list(
        Entry.objects.filter(session=session, child_count=0)
        .order_by("position")
        .values_list("entry_id", flat=True)
    )


def _pairs(leaves: list[str]) -> list[tuple[str, str]]:
    return [*pairwise(leaves), (leaves[0], leaves[-1]), (leaves[-1], leaves[-1])]


@pytest.mark.parametrize("shown", [150, 2])
def test_generated_sessions_answer_as_with_every_line_parsed(
    viewer_client, make_session, editor_user, monkeypatch, tmp_path, shown
):
    """Seed 6: four compactions, context edits and six branch points; one more edit made
    through the app. Every line counts as big (BIG_LINE 0), so every eligible message is
    stood in for; with two entries listed per route the stand-ins land in unaligned
    stretches and listed lines too, and are read there."""
    src = generate_session(tmp_path / "gen.jsonl", entries=1200, branch_points=6, seed=6)
    session = make_session(src.read_bytes())
    light = queries.light_path(session, queries.default_leaf_id(session))
    target = next(e.entry_id for e in reversed(light) if e.type == "message")
    services.add_context_edit(session, editor_user, target, None, leaf_id=light[-1].entry_id)
    session.refresh_from_db()
    monkeypatch.setattr(compare_query, "ROUTE_SHOWN", shown)
    pairs = _pairs(_leaves(session))
    reference = _answers(viewer_client, session, pairs, monkeypatch, 10**12)
    made = _count_stand_ins(monkeypatch)
    assert _answers(viewer_client, session, pairs, monkeypatch, 0) == reference
    assert sum(made) > 0
    # Warm: the titles and previews kept of the lines read stand in for them as well.
    url = reverse("explorer:compare", args=[session.pk])
    for (a, b), expected in zip(pairs * 2, reference * 2, strict=True):
        warm = viewer_client.get(url, {"a": a, "b": b, "format": "json"}).json()
        assert warm == expected, (a, b)


@pytest.mark.pi_fixtures
def test_pi_fixtures_answer_as_with_every_line_parsed(viewer_client, make_session, monkeypatch):
    from tests.conftest import pi_fixture_files

    for path in pi_fixture_files():
        session = make_session(path.read_bytes())
        pairs = _pairs(_leaves(session))
        reference = _answers(viewer_client, session, pairs, monkeypatch, 10**12)
        made = _count_stand_ins(monkeypatch)
        assert _answers(viewer_client, session, pairs, monkeypatch, 0) == reference, path.name
        assert sum(made) > 0, path.name
        url = reverse("explorer:compare", args=[session.pk])
        for (a, b), expected in zip(pairs * 2, reference * 2, strict=True):
            warm = viewer_client.get(url, {"a": a, "b": b, "format": "json"}).json()
            assert warm == expected, (path.name, a, b)


def test_big_lines_listed_in_a_route_are_not_read(viewer_client, make_session, monkeypatch):
    lines = _big_session_lines()
    session = make_session(("\n".join(json.dumps(x) for x in lines) + "\n").encode())
    sizes = _big_parses(monkeypatch)
    cold = _cold(viewer_client, session, "rb", "t1")
    assert [r["id"] for r in cold["result"]["route_a"]][:2] == ["t2", "t3"]
    assert cold["result"]["route_a"][0]["title"].startswith("2 xxx")
    assert len(sizes) == 0  # t2 and t3 listed, t1 the ancestor: their stored texts
    url = reverse("explorer:compare", args=[session.pk])
    warm = viewer_client.get(url, {"a": "rb", "b": "t1", "format": "json"}).json()
    diff = {
        k: (v, warm["result"].get(k))
        for k, v in cold["result"].items()
        if warm["result"].get(k) != v
    }
    assert warm == cold and len(sizes) == 0, (diff, {k for k in cold if warm.get(k) != cold[k]})
