"""``exactsum`` keeps a running sum exactly: the partials' sum rounded once is ``math.fsum``
of every value added, and a difference of two sums is ``fsum`` of what is left."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from explorer.session import exactsum

FLOATS = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)


@given(st.lists(FLOATS, max_size=60), st.integers(0, 60))
def test_the_running_sum_is_exact(values, split):
    partials = exactsum.added([], values[:split])
    partials = exactsum.added(partials, values[split:])
    assert sum(map(Fraction, partials)) == sum(map(Fraction, values))
    assert exactsum.rounded(partials) == math.fsum(values)
    assert exactsum.loads(exactsum.dumps(partials)) == partials


@given(st.lists(FLOATS, max_size=60), st.sets(st.integers(0, 59)))
def test_a_total_less_a_part_is_the_rest_added_afresh(values, chosen):
    part = [v for i, v in enumerate(values) if i in chosen]
    rest = [v for i, v in enumerate(values) if i not in chosen]
    assert exactsum.rounded(exactsum.added([], values), part) == math.fsum(rest)


def test_tiny_costs_beside_large_ones_are_not_lost():
    values = [1e16, 0.01, -1e16, 0.02, 0.003]
    assert exactsum.rounded(exactsum.added([], values)) == math.fsum(values) == 0.033
    assert sum(values) != 0.033  # plain float addition loses them


def test_unknown_and_non_finite():
    assert exactsum.loads("") is None
    with pytest.raises(ValueError):
        exactsum.added([], [math.inf])
