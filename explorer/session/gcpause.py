"""Pausing the cyclic garbage collector around bulk parsing and projection.

Parsed JSON and projections hold no reference cycles, but every container created counts
toward the collector's thresholds: on a large session each triggered pass rescans the whole
(growing) heap, which roughly doubles load and projection time. Pausing is process-wide; a
nested or concurrent pause leaves the collector as the outermost caller found it.

Pausing alone only postpones the first pass: the objects built while paused all sit in the
youngest generation, and the first allocation after re-enabling triggers a young collection
that traverses every one of them (on a 50,000-entry file about a quarter of `orjson.loads`'s
own time), then a middle-generation pass traverses them again. What a pause builds is what
the caller keeps (entries, an index, a context), so the outermost pause ends by moving the
young objects straight into the oldest generation (`gc.freeze()` then `gc.unfreeze()`: two
list splices, no traversal). Nothing is exempt from collection: a cycle that was young at
that moment is found by the next full collection instead of a young one. When something
else in the process has frozen objects (a pre-fork server), the pause leaves them alone and
skips the promotion.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


def promote_young() -> None:
    """Move every young tracked object into the oldest generation without traversing it."""
    if gc.get_freeze_count():
        return  # someone froze objects on purpose; unfreezing would release theirs too
    gc.freeze()
    gc.unfreeze()


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        promote_young()
        gc.enable()
