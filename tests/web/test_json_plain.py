"""``jsonapi.plain``: every builder's value becomes the same JSON data whatever path a
value takes through it (the exact-type fast path for numbers and strings, the per-type
field lookup of a dataclass)."""

from __future__ import annotations

import dataclasses
import math

from django.utils.safestring import mark_safe

from explorer.views.jsonapi import plain


@dataclasses.dataclass
class _Point:
    index: int
    projected: float
    title: str
    tags: tuple[str, ...] = ()


@dataclasses.dataclass
class _Outer:
    points: list[_Point]
    kind: type | None = None


class _Count(int):
    pass


def test_plain_opens_dataclasses_and_tuples_and_cleans_numbers() -> None:
    value = {
        "points": [_Point(1, 2.5, "a", ("x",)), _Point(2, math.nan, "b"), _Point(3, math.inf, "c")],
        "outer": _Outer([_Point(4, -math.inf, mark_safe("<b>x</b>"))], kind=_Point),
        "flags": (True, False, None),
        7: {1},
        "count": _Count(5),
    }
    got = plain(value)
    assert got["points"] == [
        {"index": 1, "projected": 2.5, "title": "a", "tags": ["x"]},
        {"index": 2, "projected": None, "title": "b", "tags": []},
        {"index": 3, "projected": None, "title": "c", "tags": []},
    ]
    inner = got["outer"]["points"][0]
    assert inner["projected"] is None
    assert inner["title"] == "<b>x</b>" and type(inner["title"]) is str  # not SafeString
    assert got["outer"]["kind"] is _Point  # a class is a leaf, not opened
    assert got["flags"] == [True, False, None] and got["flags"][0] is True
    assert got["7"] == [1] and got["count"] == 5
    assert list(got) == ["points", "outer", "flags", "7", "count"]  # key order kept


def test_plain_answers_a_deeply_nested_value() -> None:
    deep: list = []
    node = deep
    for _ in range(3000):
        node.append([])
        node = node[0]
    got = plain(deep)
    for _ in range(3000):
        got = got[0]
    assert got == []
