"""A search snippet cut from a prefix of the hit's text (``analysis.snippets``) is the one
today's functions cut from the whole readable text: for generated texts of plain lines,
tool call lines (that parse, that do not, with names too long), runs of every kind of
whitespace, matches near the start, at a cut, far in, and none, and for any prefix sizes."""

from __future__ import annotations

import json
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer import html
from explorer.analysis import snippets
from explorer.analysis.snippets import snippet_source
from explorer.session.describe import readable_tool_calls
from explorer.views.search import plain_snippet

QUERIES = ("fix", "FIX the", "x", "fix  bug", "é", '{"', "a: b")
PIECES = st.sampled_from(["fix", "Fix", "the", "bug", " ", "  ", "\t", "\u2028", "\x1c", "é",
                          "É", "a", "b", ":", "{", "}", "\"", "x" * 40, "fix bug", "the fix"])  # fmt: skip


@st.composite
def lines(draw) -> str:
    kind = draw(st.sampled_from(["plain", "call", "broken", "long-name", "empty"]))
    words = "".join(draw(st.lists(PIECES, max_size=30)))
    if kind == "plain":
        return words
    if kind == "empty":
        return ""
    name = draw(st.sampled_from(["read", "bash", "a.b:c-d_e", "n" * 100]))
    if kind == "long-name":
        name = "n" * 101
    args = {"path": words, "content": draw(st.sampled_from(["fix\nbug", "x", words + "\n"])),
            "n": draw(st.integers(0, 9))}  # fmt: skip
    body = json.dumps(args, ensure_ascii=False)
    if kind == "broken":
        body = body[:-1] + ", fix}"
    return f"{name} {body}"


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.lists(lines(), min_size=1, max_size=25),
    st.sampled_from(QUERIES),
    st.tuples(st.integers(1, 400), st.integers(1, 4000)),
)
def test_the_snippets_of_a_prefix_are_the_whole_texts(parts, query, tries):
    text = "\n".join(parts)
    want = readable_tool_calls(text)
    with mock.patch.object(snippets, "TRIES", tries):
        got = snippet_source(text, query)
    assert html.highlight(got, query) == html.highlight(want, query)
    assert plain_snippet(got, query) == plain_snippet(want, query)


def test_a_multi_mb_hit_is_cut_near_its_match():
    text = "read the fix now " + "lorem ipsum\n" * 400_000  # 4.8 MB
    got = snippet_source(text, "fix")
    assert len(got) < 10_000
    want = readable_tool_calls(text)
    assert html.highlight(got, "fix") == html.highlight(want, "fix")
    assert plain_snippet(got, "fix") == plain_snippet(want, "fix")
    # No match in the prefixes tried: the whole text, as before.
    assert snippet_source(text, "absent") == want
