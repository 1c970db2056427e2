"""JavaScript-compatible JSON, strings and dates.

Pi is written in TypeScript, so several JavaScript behaviours leak into the bytes it writes
and the numbers it computes (SPEC section 0.3). Everything in the engine that serializes,
parses, measures or trims text goes through this module so that the porting rules live in one
place.
"""

from __future__ import annotations

import json
import math
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

__all__ = [
    "JS_WHITESPACE",
    "date_parse",
    "dumps",
    "is_array_index",
    "iso_from_ms",
    "hashable",
    "js_join",
    "js_order",
    "js_string",
    "js_sort_key",
    "js_trim",
    "loads",
    "nesting_depth",
    "now_iso",
    "truthy",
    "utf16_len",
    "utf16_slice",
    "visible",
    "visible_data",
]

# ---------------------------------------------------------------------------------------------
# Serialization (JSON.stringify)

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
# Control characters, quote, backslash and any surrogate code point (Python only holds
# surrogates in a str when they are unpaired in the JSON text or built by hand).
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f"\\\ud800-\udfff]')
_PAIR = re.compile(r"[\ud800-\udbff][\udc00-\udfff]")


def _escape_char(match: re.Match[str]) -> str:
    ch = match.group(0)
    esc = _ESCAPES.get(ch)
    if esc is not None:
        return esc
    return f"\\u{ord(ch):04x}"


def _join_pair(match: re.Match[str]) -> str:
    hi, lo = match.group(0)  # type: ignore[str-unpack]
    return chr(0x10000 + ((ord(hi) - 0xD800) << 10) + (ord(lo) - 0xDC00))


def _encode_str(s: str) -> str:
    if _NEEDS_ESCAPE.search(s) is None:
        return '"' + s + '"'
    # Two adjacent surrogate code points form one character in JavaScript.
    s = _PAIR.sub(_join_pair, s)
    return '"' + _NEEDS_ESCAPE.sub(_escape_char, s) + '"'


def _format_number(value: float | int) -> str:
    """ECMAScript Number.prototype.toString for a double."""
    if isinstance(value, int):
        if -(2**53) <= value <= 2**53:
            return str(value)
        value = float(value)
    if math.isnan(value) or math.isinf(value):
        return "null"
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    sign = "-" if value < 0 else ""
    r = repr(abs(value))
    mantissa, _, exp = r.partition("e")
    exponent = int(exp) if exp else 0
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    # Position of the decimal point relative to the start of `digits`.
    n = (
        len(int_part.lstrip("0")) + exponent
        if int_part.strip("0")
        else exponent - (len(frac_part) - len(frac_part.lstrip("0")))
    )
    digits = digits.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        out = (
            digits[0]
            + ("." + digits[1:] if k > 1 else "")
            + "e"
            + ("+" if e >= 0 else "-")
            + str(abs(e))
        )
    return sign + out


def is_array_index(key: str) -> bool:
    """True for keys JavaScript orders first in every object (canonical array indices)."""
    if not key or not key.isascii() or not key.isdigit():
        return False
    if len(key) > 1 and key[0] == "0":
        return False
    return int(key) <= 4294967294


def js_order(keys: list[str]) -> list[str]:
    """Keys in JavaScript object order: array indices ascending, then insertion order."""
    idx = [k for k in keys if is_array_index(k)]
    if not idx:
        return keys
    idx.sort(key=int)
    return idx + [k for k in keys if not is_array_index(k)]


def _encode(value: Any, parts: list[str]) -> None:
    # Iterative, not recursive: session trees thousands of levels deep are serialized as
    # nested JSON and must not hit Python's recursion limit.
    stack: list[list[Any]] = []  # [is_dict, container, iterator, first]
    while True:
        if value is None or value is True or value is False:
            parts.append("null" if value is None else ("true" if value else "false"))
        elif isinstance(value, str):
            parts.append(_encode_str(value))
        elif isinstance(value, (int, float)):
            parts.append(_format_number(value))
        elif isinstance(value, dict):
            parts.append("{")
            stack.append([True, value, iter(js_order(list(value.keys()))), True])
        elif isinstance(value, (list, tuple)):
            parts.append("[")
            stack.append([False, value, iter(value), True])
        else:
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
        # Find the next value to write, closing every container that is exhausted.
        while stack:
            frame = stack[-1]
            is_dict, container, items, first = frame
            if is_dict:
                for key in items:
                    item = container[key]
                    if item is _UNDEFINED:
                        continue
                    if not first:
                        parts.append(",")
                    frame[3] = False
                    parts.append(_encode_str(str(key)))
                    parts.append(":")
                    value = item
                    break
                else:
                    parts.append("}")
                    stack.pop()
                    continue
                break
            for item in items:
                if not first:
                    parts.append(",")
                frame[3] = False
                # JSON.stringify writes undefined array members as null.
                value = None if item is _UNDEFINED else item
                break
            else:
                parts.append("]")
                stack.pop()
                continue
            break
        else:
            return


class _Undefined:
    """Marker for a JavaScript `undefined` property value: the key is omitted on output."""

    _instance: _Undefined | None = None

    def __new__(cls) -> _Undefined:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNDEFINED"

    def __bool__(self) -> bool:
        return False


_UNDEFINED = _Undefined()
UNDEFINED = _UNDEFINED


def _encode_reference(value: Any) -> str:
    """The project encoder itself (JavaScript rules for every value); :func:`dumps` uses it
    whenever orjson's bytes are not provably the same."""
    parts: list[str] = []
    _encode(value, parts)
    return "".join(parts)


_SAFE_INT = 2**53


def _orjson_writes_alike(value: Any) -> bool:
    """Whether orjson writes ``value`` byte for byte as :func:`_encode_reference` does.

    For strings, ``None``, booleans, integers within 2**53, lists, tuples and dicts with
    string keys the two agree: the same escapes (the short ones for backspace, form feed,
    newline, carriage return and tab, the quote and the backslash, lowercase ``\\u00xx``
    for the other control characters, nothing else), no spaces, insertion order. Everything
    else goes to the reference encoder: floats (JavaScript writes ``1.0`` as ``1`` and
    ``-0.0`` as ``0``), integers beyond 2**53 (doubles in JavaScript), keys JavaScript
    moves first (array indices), ``UNDEFINED``, subclasses. Lone surrogates and nesting
    deeper than orjson goes are refused by orjson itself, and fall back too.
    """
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        v = pop()
        t = type(v)
        if t is str or v is None or t is bool:
            continue
        if t is int:
            if -_SAFE_INT <= v <= _SAFE_INT:
                continue
            return False
        if t is dict:
            for k in v:
                if type(k) is not str or ("0" <= k[:1] <= "9" and is_array_index(k)):
                    return False
            extend(v.values())
        elif t is list or t is tuple:
            extend(v)
        else:
            return False
    return True


def dumps(value: Any) -> str:
    """Serialize exactly like JavaScript `JSON.stringify(value)` (no indentation).

    orjson writes the values it provably writes alike (:func:`_orjson_writes_alike`), at a
    fraction of the cost: the token estimate measures every tool call's arguments this way.
    """
    if _orjson_writes_alike(value):
        try:
            return orjson.dumps(value).decode()
        except orjson.JSONEncodeError:
            pass  # a lone surrogate, or nesting beyond orjson's limit
    return _encode_reference(value)


# ---------------------------------------------------------------------------------------------
# Parsing (JSON.parse)

_INDEX_KEY = re.compile(r'"(?:0|[1-9][0-9]{0,9})"\s*:')


def _reject_constant(name: str) -> Any:
    raise ValueError(f"Unexpected token {name} in JSON")


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for k, v in pairs:
        obj[k] = v
    keys = list(obj.keys())
    ordered = js_order(keys)
    if ordered is keys:
        return obj
    return {k: obj[k] for k in ordered}


def _parse_int(text: str) -> int | float:
    """A JSON integer; one too long for ``int()`` (4,300 digits) is far beyond 2**53, so it
    is the double JavaScript reads (``Infinity`` past 1e308), as ``_normalize_numbers``
    would make of it anyway."""
    if len(text) > 400:
        return float(text)
    return int(text)


_decoder = json.JSONDecoder(
    parse_constant=_reject_constant, object_pairs_hook=_pairs_hook, parse_int=_parse_int
)


def loads(text: str | bytes) -> Any:
    """Parse like `JSON.parse`: strict literals, last duplicate wins, JavaScript key order.

    orjson is the fast path; texts it refuses (lone surrogate escapes, huge integers) or
    that may hold integer-like keys go through the standard library with JavaScript rules.
    """
    if isinstance(text, bytes | bytearray | memoryview):
        text = bytes(text).decode("utf-8", errors="replace")
    if _INDEX_KEY.search(text) is None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    # JSON whitespace is only space, tab, newline and carriage return.
    stripped = text.strip(" \t\n\r")
    if not stripped:
        raise ValueError("Unexpected end of JSON input")
    value, end = _decoder.raw_decode(stripped)
    if end != len(stripped):
        raise ValueError("Unexpected non-whitespace character after JSON")
    return _normalize_numbers(value)


_STRUCTURE = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def nesting_depth(text: str) -> int:
    """How deeply arrays and objects nest in JSON ``text`` (strings skipped), without
    recursion: a line Pi reads (JavaScript's parser has no depth limit) but Python's refuses
    can be reported with its real depth."""
    depth = deepest = 0
    for m in _STRUCTURE.finditer(text):
        ch = m.group(0)
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _normalize_numbers(value: Any) -> Any:
    """Integers beyond 2**53 become doubles, as every JSON number is one in JavaScript;
    one beyond the largest double is ±Infinity there (a 310-digit usage figure in a crafted
    line must not stop the import with an OverflowError)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if -(2**53) <= value <= 2**53:
            return value
        try:
            return float(value)
        except OverflowError:
            return math.inf if value > 0 else -math.inf
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, (dict, list)) or (isinstance(v, int) and not isinstance(v, bool)):
                value[k] = _normalize_numbers(v)
        return value
    if isinstance(value, list):
        return [_normalize_numbers(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# Strings

# What Pi keeps in a JavaScript string but UTF-8, PostgreSQL and graphviz refuse: unpaired
# surrogate code points (JSON.stringify writes them as ``\\udXXX`` escapes) and NUL.
_INVALID_TEXT = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def visible(s: str) -> str:
    """``s`` with every lone surrogate and NUL shown as U+FFFD.

    The stored line keeps the original (export stays byte-identical); this is the form for
    everything that must encode as UTF-8: pages, JSON answers, graphs, database columns. Two
    adjacent surrogate code points (only built by hand) are one character, as in JavaScript.
    """
    if _INVALID_TEXT.search(s) is None:
        return s
    return _INVALID_TEXT.sub(REPLACEMENT, _PAIR.sub(_join_pair, s))


def visible_data(value: Any) -> Any:
    """A parsed JSON value with every string (keys too) passed through :func:`visible`;
    tuples become lists.

    Iterative, not recursive: a crafted line may nest a thousand levels deep, past Python's
    recursion limit, and its answer must still be written (it was a 500)."""
    if isinstance(value, str):
        return visible(value)
    if not isinstance(value, dict | list | tuple):
        return value
    root: list[Any] = [None]
    # (the container to fill, the key or index in it, the value to put there)
    todo: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while todo:
        into, at, v = todo.pop()
        if isinstance(v, str):
            into[at] = visible(v)
        elif isinstance(v, dict):
            copy: dict[Any, Any] = {}
            into[at] = copy
            for k, x in v.items():
                key = visible(k) if isinstance(k, str) else k
                copy[key] = None
                todo.append((copy, key, x))
        elif isinstance(v, list | tuple):
            items: list[Any] = [None] * len(v)
            into[at] = items
            todo.extend((items, i, x) for i, x in enumerate(v))
        else:
            into[at] = v
    return root[0]


JS_WHITESPACE = (
    "\u0009\u000a\u000b\u000c\u000d\u0020\u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(s: str) -> str:
    """JavaScript `String.prototype.trim`."""
    return s.strip(JS_WHITESPACE)


def utf16_len(s: str) -> int:
    """JavaScript `.length`: UTF-16 code units."""
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", errors="surrogatepass")) // 2


def utf16_slice(s: str, start: int, end: int | None = None) -> str:
    """JavaScript `s.slice(start, end)` by UTF-16 units; may leave a lone surrogate."""
    if s.isascii():
        return s[start:end]
    units = s.encode("utf-16-le", errors="surrogatepass")
    n = len(units) // 2
    a = max(0, n + start) if start < 0 else min(start, n)
    b = n if end is None else (max(0, n + end) if end < 0 else min(end, n))
    if b <= a:
        return ""
    return units[a * 2 : b * 2].decode("utf-16-le", errors="surrogatepass")


def js_sort_key(s: str) -> bytes:
    """Default JavaScript sort order (UTF-16 code units)."""
    return s.encode("utf-16-be", errors="surrogatepass")


def truthy(value: Any) -> bool:
    """JavaScript truthiness (`[]` and `{}` are truthy, NaN is falsy)."""
    if value is None or value is False or value is _UNDEFINED:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return not (value == 0 or (isinstance(value, float) and math.isnan(value)))
    if isinstance(value, str):
        return value != ""
    return True


# ---------------------------------------------------------------------------------------------
# JavaScript value conversions


def js_string(value: Any = UNDEFINED) -> str:
    """JavaScript `String(value)`, for text that interpolates arbitrary stored values.

    Call with no argument (or `UNDEFINED`) for `undefined`, with `None` for `null`.
    """
    if value is UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        if isinstance(value, float):
            if math.isnan(value):
                return "NaN"
            if math.isinf(value):
                return "Infinity" if value > 0 else "-Infinity"
        # JSON.stringify and String() agree for every finite number.
        return _format_number(value)
    if isinstance(value, (list, tuple)):
        return js_join(value, ",")
    return "[object Object]"


def js_join(values: Any, separator: str = ",") -> str:
    """`Array.prototype.join`: null and undefined members become empty strings."""
    return separator.join("" if v is None or v is UNDEFINED else js_string(v) for v in values)


def hashable(value: Any) -> bool:
    """Whether a parsed JSON value can key a dict (ids in hand-written files may be objects)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# Dates


def iso_from_ms(ms: float) -> str:
    """`new Date(ms).toISOString()`: UTC, millisecond precision, trailing Z."""
    ms_int = int(ms)
    dt = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms_int)
    year = dt.year
    y = f"{year:04d}" if 0 <= year <= 9999 else (f"+{year:06d}" if year > 0 else f"-{-year:06d}")
    return f"{y}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}.{dt.microsecond // 1000:03d}Z"


def now_iso(clock: Any = None) -> str:
    """ISO timestamp of `clock()` (epoch ms) or of the wall clock."""
    ms = clock() if clock is not None else time.time() * 1000
    return iso_from_ms(ms)


_DATE_RE = re.compile(
    r"^(?P<y>[+-]\d{6}|\d{4})(?:-(?P<mo>\d{2})(?:-(?P<d>\d{2}))?)?"
    r"(?:T(?P<h>\d{2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:\.(?P<f>\d+))?)?"
    r"(?P<tz>Z|[+-]\d{2}:\d{2})?)?$"
)


def date_parse(s: Any) -> float:
    """`Date.parse` for ECMAScript date-time strings; NaN for anything else."""
    if not isinstance(s, str):
        return math.nan
    m = _DATE_RE.match(s)
    if m is None:
        return math.nan
    year_s = m.group("y")
    if year_s == "-000000":
        return math.nan
    year = int(year_s)
    month = int(m.group("mo") or 1)
    day = int(m.group("d") or 1)
    hour = int(m.group("h") or 0)
    minute = int(m.group("mi") or 0)
    second = int(m.group("s") or 0)
    frac = m.group("f")
    millis = int((frac + "00")[:3]) if frac else 0
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 24 and minute <= 59 and second <= 59):
        return math.nan
    if hour == 24 and (minute or second or millis):
        return math.nan
    if day > _days_in_month(year, month):
        return math.nan
    days = _days_from_civil(year, month, day)
    ms = ((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis
    tz = m.group("tz")
    if m.group("h") is None or tz == "Z":
        return float(ms)
    if tz:
        sign = 1 if tz[0] == "+" else -1
        offset = sign * (int(tz[1:3]) * 60 + int(tz[4:6]))
        return float(ms - offset * 60_000)
    # A date-time without an offset is local time.
    local = datetime(1970, 1, 1) + timedelta(milliseconds=ms)
    try:
        return float(round(local.timestamp() * 1000))  # naive datetimes are local time
    except (OverflowError, OSError, ValueError):
        return float(ms)


def _days_in_month(y: int, m: int) -> int:
    if m == 2:
        return 29 if (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)) else 28
    return 30 if m in (4, 6, 9, 11) else 31


def _days_from_civil(y: int, m: int, d: int) -> int:
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468
