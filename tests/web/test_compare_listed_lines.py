"""Which lines of a long projection difference the Compare page lists."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from explorer.analysis.compare import listed_lines

sides = st.lists(st.sampled_from(["a", "b", "both"]), max_size=60)


@given(sides, st.integers(min_value=0, max_value=70))
def test_listed_lines_keep_order_numbers_and_every_side(kinds: list[str], limit: int):
    lines = [{"side": k, "i": i} for i, k in enumerate(kinds)]
    listed = listed_lines(lines, limit)
    assert len(listed) == min(limit, len(lines))
    assert [d["n"] for d in listed] == sorted({d["n"] for d in listed})  # in order, once each
    assert all(lines[d["n"] - 1]["i"] == d["i"] for d in listed)  # numbered as in the whole
    present = set(kinds)
    if limit >= len(present):
        assert {d["side"] for d in listed} == present  # no side pushed off the page
    for side in present:  # each side's listed lines are its newest ones
        mine = [d["n"] for d in listed if d["side"] == side]
        allmine = [i + 1 for i, k in enumerate(kinds) if k == side]
        assert mine == allmine[len(allmine) - len(mine) :]


def test_a_long_run_of_one_side_does_not_hide_the_other():
    lines = [{"side": "a"}] * 30 + [{"side": "b"}] * 200
    listed = listed_lines(lines, 150)
    assert sum(d["side"] == "a" for d in listed) == 30
    assert [d["n"] for d in listed][:31] == [*range(1, 31), 31 + 200 - 120]
