"""The tree checks' position-list builds report exactly what the dict-keyed builds did.

``diagnose_tree`` and ``validate_bytes`` share ``_parents``, ``_euler``, ``_check_cycles``,
``_check_siblings`` and ``_check_links``; these were rewritten over positions for a
50,000-entry session's first read. The earlier id-keyed versions are kept below, in this
file only, as the slow reference: over generated trees full of what the checks exist for
(cycles, dangling and odd parents, repeated ids, 10,000-deep routes, 1,000 siblings,
edits and compactions pointing anywhere) both give the same problems in the same order.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.session import diagnostics, jsonfmt
from explorer.session.diagnostics import (
    KNOWN_ENTRY_TYPES,
    Problem,
    ValidationReport,
    _check_contents,
    _check_edit,
    _Checker,
    _finish,
    _short,
    diagnose_tree,
    index_ids,
)

# --- the reference: the id-keyed builds as they were ----------------------------------------


def _ref_parents(chk, entries, numbers, by_id) -> dict[int, Any]:
    parent_of: dict[int, Any] = {}
    for index, entry in enumerate(entries):
        if entry.get("type") == "session":
            continue
        parent = entry.get("parentId")
        if not jsonfmt.truthy(parent):
            continue
        if jsonfmt.hashable(parent) and parent in by_id:
            parent_of[index] = parent
        else:
            chk.add(
                numbers[index],
                "warning",
                "dangling-parent",
                f"parentId {_short(parent)} names no entry: this entry is a root and its path stops here",
                entry.get("id"),
            )
    return parent_of


def _ref_euler(by_id, parent_of):
    children: dict[int, list[int]] = {}
    roots: list[int] = []
    for index in by_id.values():
        parent_key = parent_of.get(index)
        if parent_key is None:
            roots.append(index)
        else:
            children.setdefault(by_id[parent_key], []).append(index)
    tin: dict[int, int] = {}
    tout: dict[int, int] = {}
    clock = 0
    for root in roots:
        stack: list[tuple[int, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            if done:
                tout[node] = clock
                clock += 1
                continue
            if node in tin:
                continue
            tin[node] = clock
            clock += 1
            stack.append((node, True))
            for child in children.get(node, ()):
                if child not in tin:
                    stack.append((child, False))
    return tin, tout


def _ref_cycles(chk, entries, numbers, by_id, parent_of) -> None:
    state: dict[int, int] = {}
    for start in by_id.values():
        if start in state:
            continue
        walk: list[int] = []
        node: int | None = start
        while node is not None and node not in state:
            state[node] = 1
            walk.append(node)
            parent_key = parent_of.get(node)
            node = by_id[parent_key] if parent_key is not None else None
        if node is not None and state.get(node) == 1:
            members = walk[walk.index(node) :]
            ids = [entries[i].get("id") for i in members]
            shown = ", ".join(_short(i, 20) for i in ids[:10]) + (" …" if len(ids) > 10 else "")
            chk.add(
                numbers[members[0]],
                "error",
                "parent-cycle",
                f"parentId cycle through {len(ids)} entries ({shown}); walks stop at the repeat",
                ids[0],
            )
        for i in walk:
            state[i] = 2


def _ref_siblings(chk, entries, numbers, parent_of, bad_timestamps) -> None:
    sibling_count: dict[Any, int] = {}
    for index, entry in enumerate(entries):
        if entry.get("type") == "session" or index not in parent_of:
            continue
        if entry.get("parentId") == entry.get("id"):
            continue
        sibling_count[parent_of[index]] = sibling_count.get(parent_of[index], 0) + 1
    for index, entry in enumerate(entries):
        if (
            index in bad_timestamps
            and index in parent_of
            and sibling_count.get(parent_of[index], 0) > 1
        ):
            chk.add(
                numbers[index],
                "warning",
                "unparseable-timestamp",
                f"timestamp {_short(entry.get('timestamp'))} does not parse: the order among "
                "its siblings is a sort artefact in Pi (placed last here)",
                entry.get("id"),
            )


def _ref_links(chk, entries, numbers, by_id, parent_of) -> None:
    tin, tout = _ref_euler(by_id, parent_of)

    def on_path(target, index):
        entry = entries[index]
        if entry.get("id") == target:
            return True
        if not jsonfmt.hashable(target) or target not in by_id:
            return False
        parent_key = parent_of.get(index)
        if parent_key is None:
            return False
        a, b = by_id[target], by_id[parent_key]
        if a not in tin or b not in tin:
            return False
        return tin[a] <= tin[b] and tout[b] <= tout[a]

    for index, entry in enumerate(entries):
        kind = entry.get("type")
        line = numbers[index]
        key = entry.get("id")
        if kind == "context_edit":
            _check_edit(chk, line, key, entry, entries, by_id, on_path, index)
        elif kind == "compaction":
            first_kept = entry.get("firstKeptEntryId")
            if first_kept != key and not on_path(first_kept, index):
                chk.add(
                    line,
                    "warning",
                    "first-kept-not-on-path",
                    f"firstKeptEntryId {_short(first_kept)} is not before the compaction on its "
                    "path: nothing before it is kept",
                    key,
                )
        elif kind == "label":
            target = entry.get("targetId")
            if not jsonfmt.hashable(target) or target not in by_id:
                chk.add(
                    line,
                    "warning",
                    "label-unknown-target",
                    f"label target {_short(target)} is not an entry",
                    key,
                )


def _ref_entries(chk, entries, numbers) -> None:
    by_id: dict[Any, int] = {}
    first_line: dict[Any, int] = {}
    bad_timestamps: set[int] = set()
    count = 0
    for index, entry in enumerate(entries):
        line = numbers[index]
        kind = entry.get("type")
        if kind == "session":
            if index:
                chk.add(line, "warning", "extra-header", "a second session header inside the file")
            continue
        count += 1
        if "id" not in entry or not isinstance(entry.get("id"), str):
            chk.add(
                line,
                "warning",
                "bad-id",
                f"entry id is missing or not a string: {_short(entry.get('id'))}",
            )
        key = entry.get("id")
        if jsonfmt.hashable(key):
            if key in first_line:
                chk.add(
                    line,
                    "error",
                    "duplicate-id",
                    f"duplicate id {_short(key)} (lines {first_line[key]} and {line}); the later "
                    "entry wins in the index and appears under each duplicate's parent in the tree",
                    key,
                )
            else:
                first_line[key] = line
            by_id[key] = index
        if "parentId" not in entry:
            chk.add(line, "warning", "missing-parent-id", "entry has no parentId key", key)
        if not isinstance(kind, str) or kind not in KNOWN_ENTRY_TYPES:
            chk.add(
                line,
                "warning",
                "unknown-type",
                f"unknown entry type {_short(kind)} (kept as opaque metadata)",
                key,
            )
        stamp = jsonfmt.date_parse(entry.get("timestamp"))
        if stamp != stamp:
            bad_timestamps.add(index)
    chk.report.entry_count = count
    parent_of = _ref_parents(chk, entries, numbers, by_id)
    _ref_cycles(chk, entries, numbers, by_id, parent_of)
    _ref_siblings(chk, entries, numbers, parent_of, bad_timestamps)
    _ref_links(chk, entries, numbers, by_id, parent_of)
    _check_contents(chk, entries, numbers)


def _ref_diagnose(entries, numbers) -> list[Problem]:
    report = ValidationReport(path="")
    chk = _Checker(None, report)  # type: ignore[arg-type]
    by_id: dict[Any, int] = {}
    for index, entry in enumerate(entries):
        if jsonfmt.hashable(entry.get("id")):
            by_id[entry.get("id")] = index
    parent_of = _ref_parents(chk, entries, numbers, by_id)
    _ref_cycles(chk, entries, numbers, by_id, parent_of)
    _ref_links(chk, entries, numbers, by_id, parent_of)
    return _finish(report).problems


def _new_file_checks(entries, numbers) -> tuple[list[Problem], int]:
    report = ValidationReport()
    diagnostics._check_entries(_Checker(None, report), entries, numbers)  # type: ignore[arg-type]
    return _finish(report).problems, report.entry_count


def _ref_file_checks(entries, numbers) -> tuple[list[Problem], int]:
    report = ValidationReport()
    _ref_entries(_Checker(None, report), entries, numbers)  # type: ignore[arg-type]
    return _finish(report).problems, report.entry_count


# --- generated trees ------------------------------------------------------------------------

_ODD_VALUES = ["", 0, False, 1, 1.0, True, [1], {"a": 1}, "ghost", None]


def _tree(seed: int, n: int, odd: float, deep: int = 0, fan: int = 0) -> list[dict[str, Any]]:
    """A session's entries: a tree grown at its tips, a ``deep``-long route, a branch point
    with ``fan`` children, and ``odd`` the share of entries that break something (odd,
    later, own or missing parents, repeated or odd ids, cycles, targets anywhere, bad
    timestamps, a second header)."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []

    def add(eid: Any, parent: Any, kind: str = "message") -> dict[str, Any]:
        entry: dict[str, Any] = {"type": kind, "id": eid, "parentId": parent}
        entry["timestamp"] = "2025-03-04T05:06:07.000Z"
        out.append(entry)
        return entry

    for i in range(deep):
        add(f"d{i}", f"d{i - 1}" if i else None)
    if fan:
        hub = add("hub", out[-1]["id"] if out else None)
        for i in range(fan):
            add(f"f{i}", hub["id"])
    for i in range(n):
        ids = [e["id"] for e in out]
        eid: Any = f"e{i}"
        r = rng.random()
        if out and r < odd / 4:
            eid = rng.choice(ids)  # a repeated id
        elif r < odd / 3:
            eid = rng.choice(_ODD_VALUES)
        r = rng.random()
        if not out or r < 0.03:
            parent: Any = None
        elif r < odd:
            parent = rng.choice(
                [f"e{i + rng.randint(1, 5)}", "ghost", eid, f"e{i - 1}", *_ODD_VALUES]
            )
        elif r < 0.8:
            parent = ids[-1]
        else:
            parent = rng.choice(ids)
        kind = rng.choices(
            ["message", "label", "context_edit", "compaction", "model_change", "session", "odd"],
            [70, 8, 10, 6, 6, odd * 3, odd * 3],
        )[0]
        entry = add(eid, parent, kind)
        if rng.random() < odd:
            entry["timestamp"] = rng.choice(["yesterday", 5, None])
        if rng.random() < odd / 3:
            del entry["parentId"]

        def target(ids: list[Any] = ids, i: int = i) -> Any:
            if not ids or rng.random() < odd:
                return rng.choice(["ghost", f"e{i + 2}", *_ODD_VALUES])
            return rng.choice(ids[-30:] + ids[:3])

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
    # A few cycles among the last entries (a loop of two, one of three, a self-loop).
    if len(out) > 8 and odd:
        out[-1]["parentId"], out[-2]["parentId"] = out[-2]["id"], out[-1]["id"]
        out[-3]["parentId"], out[-4]["parentId"], out[-5]["parentId"] = (
            out[-4]["id"],
            out[-5]["id"],
            out[-3]["id"],
        )
        out[-6]["parentId"] = out[-6]["id"]
    return out


def _same(entries: list[dict[str, Any]]) -> None:
    numbers = [i * 2 + 3 for i in range(len(entries))]
    assert diagnose_tree(entries, numbers) == _ref_diagnose(entries, numbers)
    assert _new_file_checks(entries, numbers) == _ref_file_checks(entries, numbers)


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 100_000), n=st.integers(0, 250), odd=st.sampled_from([0, 0.05, 0.3]))
def test_generated_trees_report_the_same_problems(seed, n, odd):
    _same(_tree(seed, n, odd))


@pytest.mark.parametrize("odd", [0, 0.1])
def test_a_10000_deep_route_and_1000_siblings_report_the_same(odd):
    entries = _tree(5, 300, odd, deep=10_000, fan=1_000)
    # Edits and compactions at the far end of the deep route ask about its first entries.
    entries += [
        {"type": "context_edit", "id": "x1", "parentId": "d9999", "targetId": "d0", "replacement": None},
        {"type": "compaction", "id": "x2", "parentId": "f999", "firstKeptEntryId": "d5"},
        {"type": "compaction", "id": "x3", "parentId": "f3", "firstKeptEntryId": "f4"},
    ]  # fmt: skip
    _same(entries)
    if not odd:  # no repeated id disturbs the route: the route's first entry is on it
        # (a message without a role: not editable), the sibling is not.
        problems = diagnose_tree(entries, list(range(len(entries))))
        about = {p.entry_id: p.code for p in problems if p.entry_id in ("x1", "x2", "x3")}
        assert about == {"x1": "edit-not-editable", "x3": "first-kept-not-on-path"}


def test_a_clean_tree_has_no_problems_either_way():
    entries = _tree(9, 2_000, 0)
    numbers = list(range(2, len(entries) + 2))
    ref = [p for p in _ref_diagnose(entries, numbers) if p.code != "edit-not-editable"]
    assert diagnose_tree(entries, numbers) == _ref_diagnose(entries, numbers)
    assert all(p.code not in ("parent-cycle", "dangling-parent") for p in ref)


def test_cycles_and_dangling_parents_are_found_once_each():
    entries = [
        {"type": "message", "id": "a", "parentId": None},
        {"type": "message", "id": "b", "parentId": "c"},
        {"type": "message", "id": "c", "parentId": "b"},
        {"type": "message", "id": "d", "parentId": "ghost"},
        {"type": "message", "id": "e", "parentId": "e"},
        {"type": "label", "id": "f", "parentId": "b", "targetId": "a"},
    ]
    problems = diagnose_tree(entries, [2, 3, 4, 5, 6, 7])
    assert [(p.code, p.entry_id) for p in problems] == [
        ("parent-cycle", "b"),
        ("dangling-parent", "d"),
        ("parent-cycle", "e"),
    ]
    assert problems == _ref_diagnose(entries, [2, 3, 4, 5, 6, 7])


def test_the_index_keeps_the_last_entry_of_a_repeated_id_and_skips_unhashable_ids():
    entries = [{"id": "a"}, {"id": ["x"]}, {"id": "a"}, {"id": 1}, {}]
    assert index_ids(entries) == {"a": 2, 1: 3, None: 4}
