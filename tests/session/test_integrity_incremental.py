"""`TreeFindings`: the tree checks extended by appended entries find what a fresh run finds."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.analysis.integrity import TreeFindings
from explorer.session.diagnostics import diagnose_tree


def _entries(seed: int, n: int, odd: float) -> list[dict]:
    """A random stored session: mostly a tree grown at its tips, with ``odd`` the share of
    entries that break something (missing, later or own parents, repeated ids, targets that
    are absent, off the route or not editable)."""
    rng = random.Random(seed)
    out: list[dict] = []
    for i in range(n):
        eid = f"e{i}"
        if out and rng.random() < odd / 4:
            eid = rng.choice(out)["id"]  # a repeated id
        ids = [e["id"] for e in out]
        r = rng.random()
        if not out or r < 0.03:
            parent = None
        elif r < odd:
            parent = rng.choice([f"e{i + rng.randint(1, 5)}", "ghost", eid, f"e{i - 1}"])
        elif r < 0.8:
            parent = ids[-1]
        else:
            parent = rng.choice(ids)
        kind = rng.choices(
            ["message", "label", "context_edit", "compaction", "model_change"],
            [70, 8, 10, 6, 6],
        )[0]
        entry: dict = {"type": kind, "id": eid, "parentId": parent}

        def target(ids: list[str] = ids, i: int = i) -> str:
            if not ids or rng.random() < odd:
                return rng.choice(["ghost", f"e{i + 2}", "nobody"])
            return rng.choice(ids[-30:])

        if kind == "message":
            entry["message"] = {"role": rng.choice(["user", "assistant", "toolResult", "system"])}
        elif kind == "label":
            entry["targetId"] = target()
        elif kind == "context_edit":
            entry["targetId"] = target()
            pick = rng.random()
            if pick < 0.6:
                entry["replacement"] = None
            elif pick < 0.8:
                entry["replacement"] = {"content": "x"}
            elif pick < 0.9:
                entry["replacement"] = {"nope": 1}
        elif kind == "compaction":
            entry["firstKeptEntryId"] = target()
        out.append(entry)
    return out


def _grow(entries: list[dict], numbers: list[int], cuts: list[int]) -> TreeFindings:
    bounds = sorted({0, len(entries), *[c % (len(entries) + 1) for c in cuts]})
    found = TreeFindings.check(entries[: bounds[1]], numbers[: bounds[1]])
    for a, b in zip(bounds[1:], bounds[2:], strict=False):
        found = found.extended(entries[a:b], numbers[a:b])
    return found


@settings(max_examples=120, deadline=None)
@given(
    seed=st.integers(0, 100_000),
    n=st.integers(1, 160),
    odd=st.sampled_from([0.0, 0.02, 0.1, 0.3]),
    cuts=st.lists(st.integers(0, 400), max_size=8),
)
def test_extended_findings_equal_a_fresh_check(seed, n, odd, cuts):
    entries = _entries(seed, n, odd)
    numbers = [i + 2 for i in range(n)]  # line 1 is the header
    grown = _grow(entries, numbers, cuts)
    assert list(grown.problems) == diagnose_tree(entries, numbers)
    assert grown.entries == tuple(entries) and grown.numbers == tuple(numbers)


def test_an_append_is_checked_alone_and_its_findings_are_added():
    entries = _entries(5, 300, 0.0)
    numbers = [i + 2 for i in range(300)]
    found = TreeFindings.check(entries, numbers)
    tip = entries[-1]["id"]
    more = [
        {"type": "label", "id": "x1", "parentId": tip, "targetId": "no-such-entry"},
        {"type": "context_edit", "id": "x2", "parentId": "x1", "targetId": entries[0]["id"],
         "replacement": None},
        {"type": "message", "id": "x3", "parentId": "gone", "message": {"role": "user"}},
    ]  # fmt: skip
    grown = found.extended(more, [302, 303, 304])
    codes = [(p.entry_id, p.code) for p in grown.problems if p.line > 301]
    assert ("x1", "label-unknown-target") in codes
    assert ("x3", "dangling-parent") in codes
    assert list(grown.problems) == diagnose_tree(entries + more, numbers + [302, 303, 304])
    # The awaited id arriving later changes earlier findings: checked again in full.
    late = grown.extended([{"type": "message", "id": "gone", "parentId": None}], [305])
    all_entries = [*entries, *more, {"type": "message", "id": "gone", "parentId": None}]
    assert list(late.problems) == diagnose_tree(all_entries, numbers + [302, 303, 304, 305])
    assert not any(p.entry_id == "x3" and p.code == "dangling-parent" for p in late.problems)


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 100_000),
    n=st.integers(1, 160),
    odd=st.sampled_from([0.0, 0.1, 0.3]),
    cuts=st.lists(st.integers(0, 400), max_size=4),
)
def test_awaited_ids_are_every_named_id_not_stored(seed, n, odd, cuts):
    """The inline check of plain entries names what :func:`_named` names, odd parents
    (numbers, objects, empty strings) included, in a fresh check and after extensions."""
    from explorer.analysis.integrity import _named

    entries = _entries(seed, n, odd)
    rng = random.Random(seed)
    for e in entries:
        if rng.random() < odd:
            e["parentId"] = rng.choice(["", 0, 7, {"id": "x"}, ["e1"], True, "ghost"])
    numbers = list(range(2, len(entries) + 2))
    ids = {e["id"] for e in entries}
    expected = {x for e in entries for x in _named(e) if x not in ids}
    assert TreeFindings.check(entries, numbers).awaited == expected
    assert _grow(entries, numbers, cuts).awaited == expected


def _lookup(stored: list[dict], numbers: list[int]):
    """What the database answers a report's extension: the last stored entry per id."""

    def lookup(ids: set) -> dict:
        out = {}
        for at, e in enumerate(stored):
            if e["id"] in ids:
                out[e["id"]] = (at, e, numbers[at])
        return out

    return lookup


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 100_000),
    n=st.integers(1, 160),
    odd=st.sampled_from([0.0, 0.02, 0.1, 0.3]),
    cut=st.integers(0, 160),
    plain=st.booleans(),
)
def test_an_extended_report_is_the_report_of_the_extended_findings(seed, n, odd, cut, plain):
    """`TreeReport.extended` gives what `TreeFindings.extended` gives, or declines."""
    from explorer.analysis.integrity import TreeReport

    entries = _entries(seed, n, odd)
    if plain:  # appends of messages and labels alone: the kind the report extends itself
        for e in entries[cut:]:
            if e["type"] in ("context_edit", "compaction"):
                e["type"], e["message"] = "message", {"role": "user"}
                e.pop("targetId", None), e.pop("firstKeptEntryId", None), e.pop("replacement", None)
    numbers = [i + 2 for i in range(n)]
    cut = min(cut, n)
    head = TreeFindings.check(entries[:cut], numbers[:cut])
    report = TreeReport.of(head).extended(
        entries[cut:], numbers[cut:], _lookup(entries[:cut], numbers[:cut])
    )
    expected = TreeReport.of(TreeFindings.check(entries, numbers))
    if report is not None:
        assert report == expected
        assert list(report.problems) == diagnose_tree(entries, numbers)
    else:
        assert any(
            e["type"] in ("context_edit", "compaction") for e in entries[cut:]
        ) or not head._appendable(entries[cut:], numbers[cut:])


def test_a_report_extends_itself_by_a_plain_append_and_finds_its_problems():
    from explorer.analysis.integrity import TreeReport

    entries = _entries(5, 300, 0.0)
    numbers = [i + 2 for i in range(300)]
    report = TreeReport.of(TreeFindings.check(entries, numbers))
    tip = entries[-1]["id"]
    more = [
        {"type": "label", "id": "x1", "parentId": tip, "targetId": "no-such-entry"},
        {"type": "message", "id": "x3", "parentId": "gone", "message": {"role": "user"}},
    ]
    grown = report.extended(more, [302, 303], _lookup(entries, numbers))
    assert grown is not None
    codes = [(p.entry_id, p.code) for p in grown.problems if p.line > 301]
    assert codes == [("x1", "label-unknown-target"), ("x3", "dangling-parent")]
    assert grown.awaited == report.awaited | {"no-such-entry", "gone"}
    # The awaited id arriving changes an earlier finding: left to the whole findings.
    late = {"type": "message", "id": "gone", "parentId": None}
    assert grown.extended([late], [304], _lookup(entries + more, numbers + [302, 303])) is None
    # So is an edit, whose checks walk the route above it.
    edit = {"type": "context_edit", "id": "x4", "parentId": "x3", "targetId": tip}
    assert grown.extended([edit], [304], _lookup(entries + more, numbers + [302, 303])) is None
