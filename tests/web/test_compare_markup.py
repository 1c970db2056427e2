"""The Compare page's long lists are written by tags (`compare_route`, `projection_diff`)
instead of template loops, and its projected figures without Raw vs projected's rows: the
markup must be the loops', escaping and the visible ``urlencode`` included, and the
figures the ones Raw vs projected shows."""

from __future__ import annotations

import pytest
from django.template import engines
from hypothesis import given, settings
from hypothesis import strategies as st

from explorer import conf, queries
from explorer.analysis.projection import align_projection, projected_estimate

# The loops the page used to write its routes and its projection difference with.
_ROUTE_LOOP = (
    '{% for e in rows %}<li><a class="mono" href="{{ detail }}?entry={{ e.id|urlencode }}">'
    '{{ e.id }}</a> <span class="pill pill-{{ e.role }}">{{ e.role }}</span> {{ e.title }}'
    "</li>{% endfor %}"
)
_ROUTE_TAG = "{% compare_route rows detail %}"
_DIFF_LOOP = (
    '{% for d in diff %}{% if d.side == "both" %}<li class="pd-both muted"><span class="side">'
    'A+B</span> {{ d.count }} shared message{{ d.count|pluralize }} (<span class="mono ids">'
    '{{ d.first_id }}</span>{% if d.count > 1 %} … <span class="mono ids">{{ d.last_id }}'
    "</span>{% endif %}), {{ d.tokens }} tok, counted once</li>{% else %}"
    '<li class="pd-{{ d.side }}"><span class="side">{{ d.side|upper }}</span> '
    '<span class="mono ids">{{ d.source_id }}</span> <span class="pill pill-{{ d.role }}">'
    '{{ d.role }}</span> {{ d.text }} <span class="muted">{{ d.tokens }} tok</span></li>'
    "{% endif %}{% endfor %}"
)
_DIFF_TAG = "{% projection_diff diff %}"

_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"), st.sampled_from("<>&\"' ?=#%/\ud800\x00\u00e9")
    ),
    max_size=12,
)


def _render(source: str, **context) -> str:
    return engines["django"].from_string(source).render(context)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.fixed_dictionaries({"id": _TEXT, "role": _TEXT, "title": _TEXT}), max_size=6),
    st.sampled_from(["/s/1/", "/prefix & <x>/s/2/"]),
)
def test_the_route_tag_writes_what_the_loop_wrote(rows, detail):
    tag = _render(_ROUTE_TAG, rows=rows, detail=detail)
    assert tag == _render(_ROUTE_LOOP, rows=rows, detail=detail)
    assert tag.count("<li>") == len(rows)


_SHARED = st.fixed_dictionaries(
    {
        "side": st.just("both"),
        "count": st.integers(1, 3),
        "tokens": st.integers(0, 10**6),
        "first_id": _TEXT,
        "last_id": _TEXT,
    }
)
_ONE_SIDE = st.fixed_dictionaries(
    {
        "side": st.sampled_from(["a", "b"]),
        "source_id": _TEXT,
        "role": _TEXT,
        "text": _TEXT,
        "tokens": st.integers(0, 10**6),
    }
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(_SHARED, _ONE_SIDE), max_size=6))
def test_the_diff_tag_writes_what_the_loop_wrote(diff):
    tag = _render(_DIFF_TAG, diff=diff)
    assert tag == _render(_DIFF_LOOP, diff=diff)
    assert tag.count("<li ") == len(diff)


def test_the_tags_escape_what_they_write():
    route = _render(_ROUTE_TAG, rows=[{"id": 'a"<b>&', "role": "r<", "title": "<i>"}], detail="/s/")
    assert "<b>" not in route and "<i>" not in route and 'href="/s/?entry=a%22%3Cb%3E%26"' in route
    diff = _render(_DIFF_TAG, diff=[{"side": "a", "source_id": "x", "role": "user",
                                     "text": "<script>", "tokens": 1}])  # fmt: skip
    assert "<script>" not in diff and "&lt;script&gt;" in diff


@pytest.mark.django_db
def test_compare_shows_the_projected_figures_raw_vs_projected_shows(make_session):
    session = make_session()
    choices = [c["id"] for c in queries.leaf_choices(session)]
    a, b = choices[0], choices[-1]
    result = queries.compare_routes(session, a, b, a)
    window, reserve = conf.window_and_reserve()
    for side, leaf in (("a", a), ("b", b)):
        summary = queries.context_summary(session, leaf, window, reserve)
        assert result[f"projected_{side}"] == summary["projected_tokens"]
        path, _ = queries.context_path(session, queries.light_path(session, leaf))
        assert projected_estimate(path) == align_projection(path).projected_tokens
    assert result["projected_a"] > 0
