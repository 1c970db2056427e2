"""Entry ids, session ids and the injectable sources behind them.

Entry ids are the first 8 hex digits of a random UUID v4 (SPEC section 1.4); session ids are
UUID v7 strings (section 1.1). Both draw from a `RandomSource` (callable returning n bytes) and
the current time from a `Clock` (callable returning epoch milliseconds), so tests and read-only
tools can make every id reproducible (section 0.3 rule 9).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from collections.abc import Callable, Container
from typing import Any

from .errors import SessionError

__all__ = [
    "SESSION_ID_ERROR",
    "Clock",
    "RandomSource",
    "deterministic_rng",
    "generate_entry_id",
    "now_ms",
    "system_rng",
    "uuid4",
    "uuid7",
    "validate_session_id",
]

RandomSource = Callable[[int], bytes]
Clock = Callable[[], float]

SESSION_ID_ERROR = (
    "Session id must be non-empty, contain only alphanumeric characters, '-', '_', and '.', "
    "and start and end with an alphanumeric character"
)
_SESSION_ID_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")


def system_rng(n: int) -> bytes:
    """Cryptographically strong bytes, as Pi's ids use."""
    return os.urandom(n)


def now_ms() -> int:
    """Wall clock in whole epoch milliseconds (JavaScript `Date.now()`)."""
    return time.time_ns() // 1_000_000


def deterministic_rng(seed: bytes | str) -> RandomSource:
    """A reproducible byte stream (SHA-256 in counter mode) for ids that must not change
    between runs, e.g. the ids a read-only viewer assigns while migrating a legacy file."""
    if isinstance(seed, str):
        seed = seed.encode("utf-8", errors="surrogatepass")
    base = hashlib.sha256(seed).digest()
    state: dict[str, Any] = {"counter": 0, "buffer": b""}

    def draw(n: int) -> bytes:
        buf = state["buffer"]
        while len(buf) < n:
            counter = state["counter"]
            state["counter"] = counter + 1
            buf += hashlib.sha256(base + counter.to_bytes(8, "big")).digest()
        state["buffer"] = buf[n:]
        return buf[:n]

    return draw


def _hex_uuid(b: bytes | bytearray) -> str:
    h = bytes(b).hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def uuid4(rng: RandomSource | None = None) -> str:
    """A random UUID v4 string (lowercase, dashed)."""
    b = bytearray((rng or system_rng)(16))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return _hex_uuid(b)


def generate_entry_id(known: Container[object], rng: RandomSource | None = None) -> str:
    """8 hex digits not in `known`; after 100 collisions a full UUID v4 (SPEC section 1.4)."""
    for _ in range(100):
        candidate = uuid4(rng)[:8]
        if candidate not in known:
            return candidate
    return uuid4(rng)


class _Uuid7State:
    """Process-wide monotonic state for the default random source: the timestamp never goes
    back and a 41-bit counter orders ids created within one millisecond."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ms = -1
        self.counter = 0


_UUID7_STATE = _Uuid7State()
_COUNTER_BITS = 41
_COUNTER_MASK = (1 << _COUNTER_BITS) - 1


def uuid7(ms: float, rng: RandomSource | None = None) -> str:
    """A UUID v7 for epoch milliseconds `ms`.

    With an injected random source the result is a pure function of `ms` and the bytes drawn;
    with the system source it is monotonic within the process, as Pi's generator is.
    """
    ms_int = int(ms) & ((1 << 48) - 1)
    rand = int.from_bytes((rng or system_rng)(10), "big")  # 80 bits
    counter = rand >> (80 - _COUNTER_BITS)
    tail = rand & ((1 << 33) - 1)
    if rng is None:
        with _UUID7_STATE.lock:
            state = _UUID7_STATE
            if ms_int <= state.ms:
                ms_int = state.ms
                counter = state.counter + 1
                if counter > _COUNTER_MASK:
                    ms_int += 1
                    counter &= _COUNTER_MASK >> 1
            state.ms = ms_int
            state.counter = counter
    value = ms_int << 80
    value |= 0x7 << 76
    value |= (counter >> 29) << 64  # 12 bits
    value |= 0b10 << 62
    value |= ((counter >> 23) & 0x3F) << 56  # 6 bits
    value |= (counter & ((1 << 23) - 1)) << 33  # 23 bits
    value |= tail
    return _hex_uuid(value.to_bytes(16, "big"))


def validate_session_id(session_id: object) -> str:
    """Raise `SessionError` with Pi's message unless the id is a valid custom session id."""
    if not isinstance(session_id, str) or _SESSION_ID_RE.fullmatch(session_id) is None:
        raise SessionError(SESSION_ID_ERROR)
    return session_id
