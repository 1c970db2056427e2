"""Numbers from query strings and socket messages, read one way everywhere.

Anyone can type a URL or send a socket message, so a number arrives as arbitrary text:
``"²"`` (``str.isdigit`` says yes, ``int`` says no), ``"٣"`` (``int`` reads 3), 5,000
digits (``int`` refuses more than 4,300), ``"-1"``, ``""``, 10 KB of letters. Only ASCII
digits with an optional minus sign count; anything else is the caller's documented
fallback, and a number is clamped to the caller's range, so no value reaches ``int`` or a
query it would break.
"""

from __future__ import annotations

import re
from typing import Any

# At most 18 digits: every such number fits a 64-bit column, and longer text is not parsed.
_INTEGER = re.compile(r"-?[0-9]{1,18}")


def parse_int(value: Any) -> int | None:
    """An integer written in ASCII digits (an ``int`` as is, not a ``bool``); else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        return int(value)
    return None


def int_param(value: Any, default: int, lo: int, hi: int) -> int:
    """``value`` as an integer clamped to ``lo..hi``; ``default`` when it is not one."""
    number = parse_int(value)
    if number is None:
        return default
    return max(lo, min(hi, number))
