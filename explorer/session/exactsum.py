"""An exact running sum of floats, kept as a few non-overlapping floats ("partials").

A figure such as the cost of every branch left behind is the session's total less the costs
on one route. Added up per request that reads every costed entry of the session; kept as a
single float, the subtraction would round twice and differ in its last bits from adding the
left-behind costs up afresh. Kept as partials, the total is exact, so the difference
rounded once (``math.fsum``) is exactly the sum a reader would add up afresh, whatever the
order and the session's size.

Each step is Knuth's two-sum: a float pair (high, low) whose real sum is exactly
``a + b``; the low parts that are not zero are the partials kept.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

__all__ = ["added", "added_finite", "dumps", "loads", "rounded", "total"]


def added(partials: list[float], values: Iterable[float]) -> list[float]:
    """Partials whose exact sum is that of ``partials`` plus every one of ``values``
    (finite floats; a non-finite value makes the sum not exact, so it is refused)."""
    kept = list(partials)
    for value in values:
        if not math.isfinite(value):
            raise ValueError(f"an exact sum takes finite values, not {value!r}")
        carry = float(value)
        out: list[float] = []
        for part in kept:
            big, small = (carry, part) if abs(carry) >= abs(part) else (part, carry)
            high = big + small
            low = small - (high - big)  # what ``high`` lost of the exact sum
            if low:
                out.append(low)
            carry = high
        out.append(carry)
        kept = out
    return kept


def added_finite(partials: tuple[float, ...] | None, value: float) -> tuple[float, ...] | None:
    """:func:`added` of one finite ``value`` (zero adds nothing) for a running sum that may
    give up: None stays None, and a sum whose partials leave the floats (finite values past
    ``±1.8e308`` together) becomes None, not exact any more. A route's exact cost is kept
    this way (``route_figures.RouteFigures.cost_partials``)."""
    if partials is None or not value:
        return partials
    out = added(list(partials), [value])
    return tuple(out) if all(math.isfinite(p) for p in out) else None


def total(values: Iterable[float]) -> float:
    """The exact sum of ``values`` rounded once: what a figure "added up" means wherever its
    order could differ (a route's part after a common ancestor, read as two stored prefix
    sums or added entry by entry, must be the same figure to the last bit). ``math.fsum``,
    except where it gives up: an intermediate overflow of finite values is summed exactly
    as fractions (±infinity only when the sum itself is past the floats), and infinities of
    both signs give NaN, as a running sum would."""
    values = list(values)
    try:
        return math.fsum(values)
    except OverflowError:
        from fractions import Fraction

        exact = sum((Fraction(v) for v in values), Fraction(0))
        try:
            return float(exact)
        except OverflowError:
            return math.inf if exact > 0 else -math.inf
    except ValueError:
        return math.nan


def rounded(partials: Iterable[float], minus: Iterable[float] = ()) -> float:
    """The exact sum of ``partials`` less every one of ``minus``, rounded once
    (:func:`total`)."""
    return total([*partials, *(-m for m in minus)])


def dumps(partials: list[float]) -> str:
    """Stored form: JSON, each float written exactly (``repr``)."""
    return json.dumps(partials)


def loads(text: str) -> list[float] | None:
    """The stored partials, or None when none are stored (not known)."""
    if not text:
        return None
    value = json.loads(text)
    return [float(v) for v in value]
