"""`jsonfmt.dumps` hands values to orjson only when its bytes equal the project encoder's.

The reference encoder (`_encode_reference`) carries the JavaScript rules; these properties
generate values of every kind orjson is given or refused (non-ASCII, control characters,
lone and paired surrogates, floats, integers around 2**53 and beyond 64 bits, array-index
keys, deep nesting) and require the same text either way.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.session import jsonfmt as j

_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec=None, exclude_categories=()),  # surrogates included
        st.sampled_from('"\\\b\f\n\r\t\x00\x1f\x7f\u2028\u2029\ud800\udc00\ud83d\ude00é'),
    ),
    max_size=20,
)
_KEY = st.one_of(_TEXT, st.sampled_from(["0", "1", "10", "01", "4294967294", "4294967295", "-1"]))
_INT = st.one_of(
    st.integers(-(2**53) - 2, 2**53 + 2),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**53, -(2**53), 2**53 + 1, 2**63, 2**64, -(2**63) - 1]),
)
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    _INT,
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 1e21, 1e-7, 5e-324, 0.1, 123456789.125]),
    _TEXT,
    st.just(j.UNDEFINED),
)
_VALUES = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.lists(inner, max_size=5).map(tuple),
        st.dictionaries(_KEY, inner, max_size=5),
    ),
    max_leaves=30,
)
# What orjson is handed: no floats, no big integers, no UNDEFINED, no index keys.
_PLAIN = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), _TEXT),
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(_TEXT.filter(lambda k: not j.is_array_index(k)), inner, max_size=5),
    ),
    max_leaves=30,
)


def _outcome(encode, value):
    try:
        return encode(value)
    except TypeError as exc:  # a bare UNDEFINED is no JSON text for either
        return type(exc)


@settings(max_examples=600, deadline=None)
@given(_VALUES)
def test_dumps_equals_the_reference_encoder(value):
    assert _outcome(j.dumps, value) == _outcome(j._encode_reference, value)


@settings(max_examples=400, deadline=None)
@given(_PLAIN)
def test_plain_values_take_the_orjson_path_and_agree(value):
    text = j.dumps(value)
    assert text == j._encode_reference(value)
    assert j._orjson_writes_alike(value)


def test_values_orjson_writes_otherwise_are_not_handed_to_it():
    for value in (1.0, -0.0, 1e21, 2**53 + 1, -(2**53) - 1, 2**64, {"1": 1, "a": 2}, [j.UNDEFINED]):
        assert not j._orjson_writes_alike(value), value
        assert j.dumps(value) == j._encode_reference(value)
    assert j.dumps({"b": 1, "1": [1.0, -0.0]}) == '{"1":[1,0],"b":1}'
    assert j.dumps(2**53 + 1) == "9007199254740992"


def test_strings_orjson_refuses_fall_back():
    # Lone surrogates are written as escapes; a hand-built pair is one character.
    assert j.dumps({"a": "x\ud800"}) == '{"a":"x\\ud800"}'
    assert j.dumps("\ud83d\ude00") == '"\U0001f600"'
    assert j.dumps("\x00\x1f\x7f\u2028") == '"\\u0000\\u001f\x7f\u2028"'


def test_nesting_beyond_orjson_falls_back():
    value: list = []
    for _ in range(3000):
        value = [value]
    assert j.dumps(value) == "[" * 3001 + "]" * 3001  # the innermost list too
