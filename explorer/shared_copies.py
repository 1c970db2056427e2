"""The shared copies of the figures each process keeps (``queries.grown``), written off the
request path.

A whole-session figure of a 50,000-entry session (the integrity findings, the route of a
leaf, the labels) is megabytes once pickled: writing it to the shared cache (pickle, zlib,
a file or Redis) cost the first request that built it as much as building it did, while
that request's reader needs only the process's own copy. So the copy is handed to one
daemon thread that writes it while the answer goes out.

This is safe because a kept figure is never changed once built: an extension makes a new
value (``grown``'s contract), so pickling it on another thread sees what the request saw.
Only the newest copy per key is written: one queued earlier for the same key is dropped,
since the newer copy covers everything it did. And a copy is written only while the cache
still holds the stamp it was made under: once the cache was cleared (or another copy was
shared since), writing it would bring back what the clear meant to forget.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections import OrderedDict
from typing import Any

from django.core.cache import cache

logger = logging.getLogger(__name__)

# Copies waiting at most: beyond it the oldest is given up (a copy is only a saving for the
# next worker), so a cache that hangs cannot make the queue hold every figure built meanwhile.
MAX_PENDING = 256


class _Writer:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.pending: OrderedDict[str, tuple[Any, int, str, str]] = OrderedDict()
        self.busy = False
        self.dropped = 0  # copies given up because the queue was full
        self.thread: threading.Thread | None = None

    def put(self, key: str, value: Any, timeout: int, stamp_key: str, stamp: str) -> None:
        with self.cond:
            self.pending.pop(key, None)
            self.pending[key] = (value, timeout, stamp_key, stamp)
            while len(self.pending) > MAX_PENDING:  # a cache that stopped answering
                self.pending.popitem(last=False)
                self.dropped += 1
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._loop, name="shared-copies", daemon=True)
                self.thread.start()
            self.cond.notify_all()

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self.pending:
                    self.cond.wait()
                key, (value, timeout, stamp_key, stamp) = self.pending.popitem(last=False)
                self.busy = True
            try:
                if cache.get(stamp_key) == stamp:
                    cache.set(key, value, timeout)
            except Exception:  # a cache that cannot take it: the next worker builds its own
                logger.exception("writing the shared copy %s failed", key)
            finally:
                with self.cond:
                    self.busy = False
                    self.cond.notify_all()

    def flush(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self.cond:
            return self.cond.wait_for(
                lambda: not self.pending and not self.busy, max(0.0, deadline - time.monotonic())
            )


_writer = _Writer()


def write_later(key: str, value: Any, timeout: int, *, stamp_key: str, stamp: str) -> None:
    """``cache.set(key, value, timeout)`` on the writer thread, if ``stamp_key`` still holds
    ``stamp`` by then. ``value`` must not change once handed over."""
    _writer.put(key, value, timeout, stamp_key, stamp)


def waiting(key: str) -> Any:
    """The copy queued under ``key`` and not written yet (None when there is none): the
    process that made it must not build it again meanwhile."""
    with _writer.cond:
        queued = _writer.pending.get(key)
    return None if queued is None else queued[0]


def flush(timeout: float = 30.0) -> bool:
    """Wait until every copy handed over was written: for tests and benchmarks (a cleared
    cache must not receive a copy computed before it was cleared) and at exit. True when
    the writer is idle in time."""
    return _writer.flush(timeout)


# A command that builds figures and exits still leaves them for the next worker; registered
# with threading's own exit hooks, which run before the interpreter stops daemon threads.
getattr(threading, "_register_atexit", atexit.register)(lambda: flush(10))
