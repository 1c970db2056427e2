"""Renderings kept per process must be the renderings themselves: sanitised the same, and
links the same as Django's own ``reverse``."""

from __future__ import annotations

from django.urls import reverse, set_script_prefix

from explorer import rendering

HOSTILE = "<script>alert(1)</script> **bold** [x](javascript:alert(2)) <img src=x onerror=y>"


def test_a_kept_markdown_rendering_is_sanitised_like_a_fresh_one():
    rendering._kept_markdown.cache_clear()
    first = rendering.render_markdown(HOSTILE)
    again = rendering.render_markdown(HOSTILE)
    fresh = rendering._markdown(HOSTILE)
    assert first == again == fresh
    assert rendering._kept_markdown.cache_info().hits == 1
    assert "<strong>bold</strong>" in again
    assert "<script" not in again and "<img" not in again and 'href="javascript' not in again
    assert "&lt;script&gt;" in again  # shown as the text it is


def test_a_long_text_is_rendered_without_being_kept():
    rendering._kept_markdown.cache_clear()
    text = "word " * (rendering.MARKDOWN_KEEP_CHARS // 5 + 10)
    assert rendering.render_markdown(text) == rendering._markdown(text)
    assert rendering._kept_markdown.cache_info().currsize == 0


def test_session_url_is_reverse_under_each_script_prefix():
    for name in ("explorer:session_detail", "explorer:context", "explorer:undo"):
        assert rendering.session_url(name, 7) == reverse(name, args=[7])
    set_script_prefix("/proxied/")
    try:
        assert rendering.session_url("explorer:context", 7) == "/proxied/sessions/7/context/"
    finally:
        set_script_prefix("/")
    assert rendering.session_url("explorer:context", 7) == "/sessions/7/context/"
