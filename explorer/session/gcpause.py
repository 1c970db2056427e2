"""Pausing the cyclic garbage collector around bulk parsing and projection.

Parsed JSON and projections hold no reference cycles, but every container created counts
toward the collector's thresholds: on a large session each triggered pass rescans the whole
(growing) heap, which roughly doubles load and projection time. Pausing is process-wide; a
nested or concurrent pause leaves the collector as the outermost caller found it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
