"""Properties of redaction over arbitrary entry-shaped JSON (the shape never changes, no
secret survives where scanning reaches, what must not change does not, and redacting twice
is redacting once) and of detection (a vendor token is found whatever text surrounds it)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer.secrets import redact_entry, redact_line, scan_text
from explorer.secrets.scanner import FREE_FORM_KEYS, STRUCTURAL_KEYS, _opaque_key, iter_strings
from explorer.session import jsonfmt

from .seeded import make_secrets

# kinds that are secrets on their own (the others need their name or scheme next to them)
KINDS_WITHOUT_CONTEXT = {
    k
    for k in make_secrets(5)
    if k
    not in ("generic-secret", "url-credentials", "bearer-token", "aws-secret-key", "basic-auth")
}
POOL = [v for k, v in make_secrets(5).items() if k in KINDS_WITHOUT_CONTEXT]
WORDS = [
    "hello",
    "the",
    "token",
    "key =",
    "İstanbul",
    "✓",
    "{",
    "}",
    '"',
    "\\n",
    "::",
    "x" * 30,
    "AKIA",
    "sk-",
]
KEYS = [
    "text",
    "content",
    "thinking",
    "arguments",
    "label",
    "name",
    "data",
    "alt",
    "note",
    "id",
    "parentId",
    "type",
    "thinkingSignature",
    "encrypted_content",
    "api_key",
    "0",
    "10",
]

fragment = st.one_of(st.sampled_from(WORDS), st.sampled_from(POOL), st.text(max_size=8))
text = st.lists(fragment, max_size=6).map(" ".join)
leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), text)
tree = st.recursive(
    leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(KEYS + ["image"]), children, max_size=5).map(
            lambda d: jsonfmt.loads(jsonfmt.dumps(d))
        ),
        st.builds(
            lambda alt: {
                "type": "image",
                "data": " ".join(POOL),
                "mimeType": "image/png",
                "alt": alt,
            },
            text,
        ),
    ),
    max_leaves=25,
)


def _same_shape(a: Any, b: Any, protected: bool = False, free: bool = False) -> None:
    """Same keys in the same order, same lengths, same non-strings; the strings that must
    never change (structural outside free-form values, opaque, image data) are equal."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        is_image = a.get("type") == "image"
        for k in a:
            keep = (
                protected
                or (not free and k in STRUCTURAL_KEYS)
                or _opaque_key(k)
                or (is_image and k == "data")
            )
            _same_shape(a[k], b[k], keep, free or k in FREE_FORM_KEYS)
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same_shape(x, y, protected, free)
    elif isinstance(a, str):
        assert isinstance(b, str)
        if protected:
            assert a == b
    else:
        assert a == b and type(a) is type(b)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tree)
def test_redaction_keeps_shape_removes_secrets_and_is_idempotent(value):
    out = redact_entry(value)
    _same_shape(value, out)
    for _, _, s in iter_strings(out):
        for secret in POOL:
            assert secret not in s
    assert redact_entry(out) == out
    line = jsonfmt.dumps(value).encode() + b"\n"
    assert jsonfmt.loads(redact_line(line)) == out


VENDOR = [(k, v) for k, v in make_secrets(6).items() if k in KINDS_WITHOUT_CONTEXT]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(VENDOR),
    st.text(max_size=40),
    st.text(max_size=40),
    st.sampled_from([" ", "\n", "\t", '"', "'", "=", ": ", "(", "[", ","]),
)
def test_a_vendor_token_is_found_exactly_whatever_text_surrounds_it(item, before, after, sep):
    kind, secret = item
    # quotes and brackets close; an assignment does not (a JWT may end in "=" padding)
    closing = {"(": ")", "[": "]", "=": "", ": ": ""}.get(sep, sep)
    text = f"{before} {sep}{secret}{closing} {after}"
    start = len(before) + 1 + len(sep)
    matches = scan_text(text)
    assert any((m.kind, m.start, m.end) == (kind, start, start + len(secret)) for m in matches)
