"""JavaScript porting rules (SPEC 0.3) in one module: numbers, escapes, key order, parsing."""

from __future__ import annotations

import math

import pytest

from explorer.session import jsonfmt as j
from explorer.session.file_ops import format_file_operations


@pytest.mark.parametrize(
    "value, text",
    [
        (1.5e-5, "0.000015"),
        (1e-7, "1e-7"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (123456789012345680000.0, "123456789012345680000"),
        (2**60, "1152921504606847000"),
        (3.0, "3"),
        (-0.0, "0"),
        (0.1, "0.1"),
        (-1.25, "-1.25"),
        (1.2345e-7, "1.2345e-7"),
        (5e-324, "5e-324"),
        (float("nan"), "null"),
        (float("inf"), "null"),
    ],
)
def test_numbers_print_like_ecmascript(value, text):
    assert j.dumps(value) == text


def test_string_escapes_and_raw_characters():
    assert j.dumps('\u2028\x7f\x01\n\t"\\/é') == '"\u2028\x7f\\u0001\\n\\t\\"\\\\/é"'
    # A lone surrogate is escaped in lowercase hex; a pair built by hand is one character.
    assert j.dumps("\ud800") == '"\\ud800"'
    assert j.dumps("\ud83d\ude00") == '"😀"'


def test_integer_like_keys_come_first_everywhere():
    assert j.dumps({"b": 1, "10": 2, "2": 3, "01": 4}) == '{"2":3,"10":2,"b":1,"01":4}'
    assert list(j.loads('{"b":1,"1":2,"a":3}')) == ["1", "b", "a"]


def test_undefined_values_are_omitted():
    assert j.dumps({"a": j.UNDEFINED, "b": [j.UNDEFINED]}) == '{"b":[null]}'


def test_parse_is_strict_like_json_parse():
    for bad in ["NaN", '{"a":Infinity}', "", "\ufeff{}", "{} x"]:
        with pytest.raises(ValueError):
            j.loads(bad)
    assert j.loads('"\\ud800"') == "\ud800"
    assert j.loads("1e400") == math.inf or j.loads("1e400") > 1e308
    assert isinstance(j.loads("123456789012345678901234567890"), float)


def test_deeply_nested_values_serialize_without_recursion_limits():
    value: list = []
    for _ in range(20_000):
        value = [value]
    assert j.dumps(value) == "[" * 20_001 + "]" * 20_001


def test_dates_follow_date_parse_and_to_iso_string():
    ms = j.date_parse("2025-03-04T05:06:07.089Z")
    assert j.iso_from_ms(ms) == "2025-03-04T05:06:07.089Z"
    assert j.date_parse("2025-03-04") == j.date_parse("2025-03-04T00:00:00.000Z")
    assert j.date_parse("2025-03-04T06:06:07.089+01:00") == ms
    assert math.isnan(j.date_parse("2025-02-30"))
    assert math.isnan(j.date_parse("yesterday"))
    assert math.isnan(j.date_parse(None))


def test_utf16_measures_and_slices_by_code_units():
    assert j.utf16_len("a😀") == 3
    assert j.utf16_slice("a😀b", 0, 2) == "a\ud83d"
    assert j.js_trim("\ufeff x \x1c") == "x \x1c"
    assert sorted(["\uff61", "😀"], key=j.js_sort_key) == ["😀", "\uff61"]


def test_string_conversion_and_join_follow_javascript():
    assert j.js_string() == "undefined"
    assert j.js_string(None) == "null"
    assert j.js_string([1, None, [2, "a"]]) == "1,,2,a"
    assert j.js_string({"k": 1}) == "[object Object]"
    assert j.js_string(float("nan")) == "NaN"
    assert j.js_join(["a", None, 3], "\n") == "a\n\n3"


def test_file_lists_in_summaries_join_like_arrays():
    # Hand-written details may carry null or objects: Array.join writes "" and [object Object].
    text = format_file_operations([None, "a.py", {"x": 1}], [])
    assert text == "\n\n<read-files>\n\na.py\n[object Object]\n</read-files>"


def test_truthiness():
    assert not any(j.truthy(v) for v in (None, False, 0, 0.0, float("nan"), "", j.UNDEFINED))
    assert all(j.truthy(v) for v in ([], {}, "0", -1, True))


def test_hashable_guards_hand_written_ids():
    assert j.hashable("abc") and not j.hashable({"id": 1}) and not j.hashable([1])
