"""Turning untrusted session content into safe HTML and SVG, in one place.

Everything shown on the explorer pages comes from agent sessions: model output, tool output,
file names, labels chosen by anyone who could write the JSONL file. All of it is treated as
hostile. Markdown is rendered first and then sanitised with an allow-list (nh3), so a payload
that survives the markdown step still cannot execute. Graph labels are escaped for DOT, and
the SVG that graphviz produces is cached by the hash of its DOT source so repeated requests
(on any worker sharing the cache) skip the layout.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
import threading
import uuid
from collections.abc import Callable
from typing import Any

import graphviz
import markdown
import nh3
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse
from django.template import Library
from django.template.backends.django import DjangoTemplates
from django.template.backends.django import Template as DjangoTemplate
from django.template.defaultfilters import stringfilter
from django.template.defaultfilters import urlencode as django_urlencode
from django.urls import get_script_prefix, reverse
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from explorer.session.jsonfmt import visible, visible_data

# Tags a rendered chat message may contain. No img: a message must not make the browser fetch
# arbitrary URLs (tracking pixels); images reach the page only as inline image blocks.
ALLOWED_TAGS = frozenset(
    {
        "a", "abbr", "b", "blockquote", "br", "code", "del", "details", "div", "em",
        "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre",
        "s", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "th",
        "thead", "tr", "ul",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "code": {"class"},
    "td": {"align"},
    "th": {"align"},
    "ol": {"start"},
}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
# Image types a browser renders without running code (no image/svg+xml).
SAFE_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


class _RawHtmlAsText(markdown.Extension):
    """Raw HTML in a message is shown as the text it is, not passed to the sanitiser, which
    would drop it without a trace: a reviewer must see that a message carried ``<script>``
    (or any markup), escaped, where it was written."""

    def extendMarkdown(self, md: markdown.Markdown) -> None:  # noqa: N802 - markdown's API
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")


_MD_EXTENSIONS = ["fenced_code", "tables", "sane_lists", "nl2br", _RawHtmlAsText()]
_CLASS_OK = re.compile(r"^language-[A-Za-z0-9_+-]{1,40}$")


def _filter_attribute(tag: str, attr: str, value: str) -> str | None:
    # Code blocks keep their "language-x" class for styling; no other class survives, so
    # message content cannot borrow the page's own classes (e.g. to fake UI controls).
    if attr == "class":
        return value if tag == "code" and _CLASS_OK.match(value) else None
    return value


def sanitize_html(html: str) -> SafeString:
    """Reduce arbitrary HTML to inert, allow-listed markup."""
    cleaned = nh3.clean(
        visible(html),
        tags=set(ALLOWED_TAGS),
        attributes={k: set(v) for k, v in ALLOWED_ATTRIBUTES.items()},
        url_schemes=set(URL_SCHEMES),
        link_rel="noopener noreferrer nofollow",
        attribute_filter=_filter_attribute,
        strip_comments=True,
    )
    return mark_safe(cleaned)  # noqa: S308 - nh3 output is the safe form


# Messages up to this many characters keep their rendered form in this process (at most
# MARKDOWN_KEPT of them): a transcript page renders dozens of messages, the same ones on
# every visit, and converting and sanitising them was a third of the page's time.
MARKDOWN_KEEP_CHARS = 32 * 1024
MARKDOWN_KEPT = 2048


def render_markdown(text: Any) -> SafeString:
    """Markdown → sanitised HTML. Non-strings render as empty (malformed content)."""
    if not isinstance(text, str) or not text:
        return mark_safe("")
    if len(text) <= MARKDOWN_KEEP_CHARS:
        return mark_safe(_kept_markdown(text))  # noqa: S308 - sanitised when first made
    return _markdown(text)


@functools.lru_cache(maxsize=MARKDOWN_KEPT)
def _kept_markdown(text: str) -> str:
    """The rendering of one text, kept: the same text always renders the same (the
    converter is reset after each use; the sanitiser's rules are constants)."""
    return str(_markdown(text))


def _markdown(text: str) -> SafeString:
    converter = _converter()
    try:
        html = converter.convert(visible(text))
    finally:
        converter.reset()
    return sanitize_html(html)


_local = threading.local()


def _converter() -> markdown.Markdown:
    """This thread's Markdown converter: building one (parsers, extensions) costs more than
    converting a typical message, and a page renders dozens. ``reset()`` after each use
    clears what a conversion leaves behind, so messages never share state."""
    converter = getattr(_local, "markdown", None)
    if converter is None:
        converter = markdown.Markdown(extensions=_MD_EXTENSIONS, output_format="html")
        _local.markdown = converter
    return converter


def render_plain(text: Any) -> SafeString:
    """Preformatted text (tool output, JSON): escaped, never interpreted."""
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    return mark_safe(escape(visible(text)))


_B64 = re.compile(r"^[A-Za-z0-9+/\s]*={0,2}\s*$")


def image_data_uri(data: Any, mime_type: Any) -> str | None:
    """A data: URI for an image block, or None when the block is not a safe raster image."""
    if not isinstance(data, str) or not isinstance(mime_type, str):
        return None
    mime = mime_type.strip().lower()
    if mime not in SAFE_IMAGE_TYPES or not _B64.match(data):
        return None
    try:
        base64.b64decode(data[:64].ljust(4 * ((len(data[:64]) + 3) // 4), "="), validate=False)
    except (binascii.Error, ValueError):
        return None
    return f"data:{mime};base64,{''.join(data.split())}"


# --- DOT and SVG -------------------------------------------------------------------------

_XML_PROLOG = re.compile(r"^\s*<\?xml[^>]*>\s*(<!DOCTYPE[^>]*>\s*)?(<!--.*?-->\s*)*", re.S)
# Defence in depth: the SVG is ours, but if a future label path forgot to escape, nothing
# scriptable may reach the page.
_SVG_TAG = re.compile(r"<([a-zA-Z][\w:-]*)((?:[^>\"']|\"[^\"]*\"|'[^']*')*)/?>")
_SVG_ATTR = re.compile(r"([\w:-]+)\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>]+)")
_SVG_BAD_TAGS = frozenset(
    {"script", "foreignobject", "iframe", "object", "embed", "use", "animate", "set", "handler"}
)


def _svg_is_active(svg: str) -> bool:
    """True if any real tag (text is escaped by graphviz, so "<" starts a tag) could run code."""
    for m in _SVG_TAG.finditer(svg):
        if m.group(1).lower() in _SVG_BAD_TAGS:
            return True
        for name, value in _SVG_ATTR.findall(m.group(2)):
            name = name.lower()
            v = value.strip("\"'").strip().lower()
            if name.startswith("on"):
                return True
            if name.endswith("href") and v.startswith(("javascript:", "data:", "vbscript:")):
                return True
    return False


class GraphRenderError(RuntimeError):
    """graphviz failed; the message is safe to show."""


def _layout(dot: str) -> str:
    try:
        out = graphviz.pipe("dot", "svg", dot.encode("utf-8"))
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError) as exc:
        raise GraphRenderError(
            f"graphviz could not lay out the graph: {type(exc).__name__}"
        ) from exc
    svg = _XML_PROLOG.sub("", out.decode("utf-8", errors="replace"))
    if _svg_is_active(svg):
        raise GraphRenderError("graph output rejected: unexpected active content")
    return svg


def dot_to_svg(dot: str) -> str:
    """Lay out DOT with the real `dot` binary. Kept by its caller under the DOT's digest
    (``queries.by_content``): the layout depends on the text alone."""
    return _layout(visible(dot))  # graphviz reads UTF-8: a lone surrogate or NUL as U+FFFD


# ---------------------------------------------------------------------------------------------
# Templates


class VisibleTemplate(DjangoTemplate):
    """A template whose output shows lone surrogates and NUL as U+FFFD.

    Session text reaches the pages from many places (parsed lines, engine results, columns);
    the rendered page is the one point they all pass before the response encodes as UTF-8,
    which would refuse a lone surrogate for every reader of the page.
    """

    def render(self, context: Any = None, request: Any = None) -> SafeString:
        return mark_safe(visible(super().render(context, request)))  # noqa: S308 - same markup


class VisibleTextTemplates(DjangoTemplates):
    """Django's template engine, with :class:`VisibleTemplate` output."""

    def from_string(self, template_code: str) -> VisibleTemplate:
        return VisibleTemplate(self.engine.from_string(template_code), self)

    def get_template(self, template_name: str) -> VisibleTemplate:
        return VisibleTemplate(super().get_template(template_name).template, self)


# Loaded as a template builtin (settings): replaces Django's ``urlencode`` filter, which
# refuses a lone surrogate. Links then carry the visible form, the one the columns hold.
register = Library()


@register.filter(is_safe=False)
@stringfilter
def urlencode(value: str, safe: str | None = None) -> str:
    """Django's ``urlencode`` of the visible form of ``value``."""
    return django_urlencode(visible(value), safe)


@register.simple_tag
def timeline_dots(dots: list[dict[str, Any]], detail: str) -> SafeString:
    """The Timeline chart's dot links, as the template loop wrote them (autoescaped, ids
    through :func:`urlencode`), in one pass: the chart draws up to 150 dots, and resolving
    their six values each through the template engine was most of the panel's render."""
    href = escape(detail)
    return mark_safe(  # noqa: S308 - every value below is escaped
        "".join(
            f'<a href="{href}?entry={escape(urlencode(d["id"]))}" '
            f'aria-label="{escape(d["label"])}"><circle cx="{escape(d["x"])}" '
            f'cy="{escape(d["y"])}" r="2.2" class="dot"><title>{escape(d["title"])}</title>'
            "</circle></a>"
            for d in dots
        )
    )


@register.simple_tag
def compare_route(rows: list[dict[str, Any]], detail: str) -> SafeString:
    """One route's entries on the Compare page, as the template loop wrote them: up to 150
    per route (``queries.ROUTE_SHOWN``), whose three values each the template engine
    resolved and escaped for a fifth of a 50,000-entry session's page."""
    href = escape(detail)
    return mark_safe(  # noqa: S308 - every value below is escaped
        "".join(
            f'<li><a class="mono" href="{href}?entry={escape(urlencode(e["id"]))}">'
            f'{escape(e["id"])}</a> <span class="pill pill-{escape(e["role"])}">'
            f"{escape(e['role'])}</span> {escape(e['title'])}</li>"
            for e in rows
        )
    )


@register.simple_tag
def projection_diff(diff: list[dict[str, Any]]) -> SafeString:
    """The Compare page's projection difference, as the template loop wrote it: one line
    per message only one route's context holds, so as long as the live ranges (five hundred
    entries on the big benchmark session), where resolving its values through the template
    engine cost more than comparing the routes."""
    out = []
    for d in diff:
        # A line's number in the whole difference, when not every line is listed.
        value = f' value="{int(d["n"])}"' if "n" in d else ""
        if d["side"] == "both" and d.get("first_b"):
            # Equal content from different entries: say which entry on each side.
            count = d["count"]
            a_ids, b_ids = (
                escape(d[f"first_{k}"]) + (f" … {escape(d[f'last_{k}'])}" if count > 1 else "")
                for k in ("id", "b")
            )
            out.append(
                f'<li class="pd-both pd-content muted"{value}><span class="side">A=B</span> '
                f"{escape(count)} shared message{'' if count == 1 else 's'} by equal content "
                f'from different entries (A: <span class="mono ids">{a_ids}</span>, B: '
                f'<span class="mono ids">{b_ids}</span>), {escape(d["tokens"])} tok, '
                "counted once</li>"
            )
        elif d["side"] == "both":
            count = d["count"]
            last = f' … <span class="mono ids">{escape(d["last_id"])}</span>' if count > 1 else ""
            out.append(
                f'<li class="pd-both muted"{value}><span class="side">A+B</span> {escape(count)} '
                f'shared message{"" if count == 1 else "s"} (<span class="mono ids">'
                f"{escape(d['first_id'])}</span>{last}), {escape(d['tokens'])} tok, "
                "counted once</li>"
            )
        else:
            side = escape(d["side"])
            out.append(
                f'<li class="pd-{side}"{value}><span class="side">{escape(str(d["side"]).upper())}'
                f'</span> <span class="mono ids">{escape(d["source_id"])}</span> '
                f'<span class="pill pill-{escape(d["role"])}">{escape(d["role"])}</span> '
                f'{escape(d["text"])} <span class="muted">{escape(d["tokens"])} tok</span></li>'
            )
    return mark_safe("".join(out))  # noqa: S308 - every value above is escaped


@register.simple_tag
def session_url(name: str, pk: int) -> str:
    """``{% url name pk %}`` for a view of one session, reversed once per process: a
    transcript page reverses the same few links for each of its dozens of items, and
    resolving them was a tenth of the page's time. Keyed by the script prefix too, which a
    proxy may set per request."""
    return _session_url(get_script_prefix(), name, int(pk))


@functools.lru_cache(maxsize=4096)
def _session_url(prefix: str, name: str, pk: int) -> str:
    return reverse(name, args=[pk])


class VisibleJsonResponse(HttpResponse):
    """A JSON answer whose strings show lone surrogates and NUL as U+FFFD, like the pages
    (``JsonResponse`` would write ``\\ud83d`` escapes that many clients cannot decode)."""

    def __init__(self, data: Any, **kwargs: Any) -> None:
        kwargs.setdefault("content_type", "application/json")
        data = visible_data(data)
        try:
            text = json.dumps(data, cls=DjangoJSONEncoder, ensure_ascii=False)
        except RecursionError:  # nested past the C encoder's limit: written iteratively
            text = deep_json(data, DjangoJSONEncoder().default)
        # A string no builder opened (one a value's ``default`` wrote) may still hold a lone
        # surrogate; JSON escapes NUL itself, so this is the whole of what UTF-8 refuses.
        super().__init__(visible(text).encode("utf-8"), **kwargs)


class _Literal(str):
    """Text :func:`deep_json` writes as it is (brackets, commas, a key)."""


def deep_json(value: Any, default: Callable[[Any], Any]) -> str:
    """``json.dumps(value, ensure_ascii=False)`` with no depth limit: an explicit stack
    instead of recursion, for the rare value nested deeper than the C encoder goes.
    ``default`` turns any other object into JSON data, as the encoder's does."""
    from json.encoder import encode_basestring

    out: list[str] = []
    stack: list[Any] = [value]
    while stack:
        v = stack.pop()
        if type(v) is _Literal:
            out.append(v)
        elif isinstance(v, str):
            out.append(encode_basestring(v))
        elif v is None or v is True or v is False or isinstance(v, int | float):
            out.append(json.dumps(v))
        elif isinstance(v, dict):
            parts: list[Any] = [_Literal("{")]
            for i, (k, x) in enumerate(v.items()):
                key = k if isinstance(k, str) else json.dumps(k).strip('"')
                parts += [_Literal((", " if i else "") + encode_basestring(key) + ": "), x]
            parts.append(_Literal("}"))
            stack.extend(reversed(parts))
        elif isinstance(v, list | tuple):
            parts = [_Literal("[")]
            for i, x in enumerate(v):
                if i:
                    parts.append(_Literal(", "))
                parts.append(x)
            parts.append(_Literal("]"))
            stack.extend(reversed(parts))
        else:
            stack.append(default(v))
    return "".join(out)


def with_token_slots(render: Callable[[str], str]) -> list[str]:
    """What ``render(token)`` draws, cut where the CSRF token goes, so one rendering can be
    kept for every reader and each gets its own token (:func:`fill_token_slots`). The
    stand-in is new for each rendering and never sent, so no session text can hold it."""
    slot = f"csrf-slot-{uuid.uuid4().hex}"
    return render(slot).split(slot)


def fill_token_slots(parts: list[str], token: str) -> str:
    """A kept rendering (:func:`with_token_slots`) with this reader's token in its slots."""
    return token.join(parts)
