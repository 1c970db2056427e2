"""``describe.one_line`` gives the whole text's normalized line while reading only what the
line can show: the same answer as normalizing everything, for any text and limit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.session.describe import entry_title, message_preview, one_line


def _whole(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


WORDS = st.lists(
    st.one_of(
        st.text(alphabet="ab\u00e9\u4e2d", min_size=1, max_size=12),
        st.text(alphabet=" \n\t\r\u00a0\u2003\x0b", min_size=1, max_size=400),
    ),
    max_size=60,
)


@settings(max_examples=400)
@given(WORDS, st.integers(1, 200))
def test_the_line_is_the_whole_texts(parts, limit):
    text = "".join(parts)
    assert one_line(text, limit) == _whole(text, limit)


def test_a_long_run_of_whitespace_before_the_words():
    text = " " * 100_000 + "word " * 10 + "\n" * 50_000 + "tail"
    for limit in (1, 5, 49, 50, 51, 160):
        assert one_line(text, limit) == _whole(text, limit)


def test_a_multi_megabyte_tool_result_gives_the_same_title_and_preview():
    text = ("line of output  with\tspaces\n" * 150_000)[:3_700_000]
    message = {"role": "toolResult", "content": [{"type": "text", "text": text}]}
    entry = {"type": "message", "id": "x", "message": message}
    assert entry_title(entry, 50) == _whole(text, 50)
    assert message_preview(message, 160) == _whole(text, 160)


def test_words_exactly_the_limit_long_then_only_whitespace_are_not_cut():
    for limit in (1, 10, 160):
        text = "a" * limit + " \n" * 2000
        assert one_line(text, limit) == "a" * limit == _whole(text, limit)
