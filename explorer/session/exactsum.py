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

__all__ = ["added", "dumps", "loads", "rounded"]


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


def rounded(partials: Iterable[float], minus: Iterable[float] = ()) -> float:
    """The exact sum of ``partials`` less every one of ``minus``, rounded once."""
    return math.fsum([*partials, *(-m for m in minus)])


def dumps(partials: list[float]) -> str:
    """Stored form: JSON, each float written exactly (``repr``)."""
    return json.dumps(partials)


def loads(text: str) -> list[float] | None:
    """The stored partials, or None when none are stored (not known)."""
    if not text:
        return None
    value = json.loads(text)
    return [float(v) for v in value]
