"""The Timeline's dot links are written by one tag (`timeline_dots`) instead of a template
loop; its markup must be the loop's, escaping and the visible ``urlencode`` included."""

from __future__ import annotations

from django.template import engines
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer.analysis.timeline import TimelinePoint, timeline_svg_data

# The loop the panel used to draw its dots with.
_LOOP = (
    '{% for d in dots %}<a href="{{ detail }}?entry={{ d.id|urlencode }}" '
    'aria-label="{{ d.label }}"><circle cx="{{ d.x }}" cy="{{ d.y }}" r="2.2" class="dot">'
    "<title>{{ d.title }}</title></circle></a>{% endfor %}"
)
_TAG = "{% timeline_dots dots detail %}"

_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"), st.sampled_from("<>&\"' ?=#%/\ud800\x00\u00e9")
    ),
    max_size=12,
)


def _render(source: str, dots: list[dict], detail: str) -> str:
    return engines["django"].from_string(source).render({"dots": dots, "detail": detail})


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(_TEXT, st.integers(0, 10**7), st.one_of(st.none(), st.floats(0, 1e7))),
        max_size=8,
    ),
    st.sampled_from(["/s/1/", "/prefix & <x>/s/2/"]),
)
def test_the_tag_writes_what_the_loop_wrote(rows, detail):
    points = [
        TimelinePoint(k, entry_id, projected, reported, k + 1, "2025-03-04T05:06:07.000Z")
        for k, (entry_id, projected, reported) in enumerate(rows)
    ]
    dots = timeline_svg_data(points, [], len(points) + 1)["dots"] if points else []
    tag = _render(_TAG, dots, detail)
    assert tag == _render(_LOOP, dots, detail)
    assert tag.count("<circle") == len(dots)


def test_markup_is_escaped():
    dots = [{"id": 'a"<b>&', "label": "L<", "x": "1.5", "y": "2", "title": "T&"}]
    html = _render(_TAG, dots, "/s/1/")
    assert '"<b>' not in html and "L&lt;" in html and "T&amp;" in html
    assert 'href="/s/1/?entry=a%22%3Cb%3E%26"' in html
