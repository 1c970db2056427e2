"""The text a search snippet is cut from, without reading a multi-MB hit whole.

A hit's snippet (``html.highlight`` for the page, ``views.search.plain_snippet`` for JSON)
is the first match of the query in the hit's readable text (``describe.readable_tool_calls``)
with every run of whitespace made one space, and ``width`` characters either side. Over a
3.7 MB tool output, that text was built and split into words whole for 180 characters
shown: at 2 GB, the search JSON spent most of its time there.

:func:`snippet_source` builds it over a prefix of the text only, growing it until the
first match and ``width`` characters after it are in: since the readable text is made line
by line and whitespace runs only shrink, a prefix's normalized text is a prefix of the
whole's, and a match in it is the whole's first (the query is a literal, so every match is
as long as the query). Where no prefix settles it (no match within the last try), the
whole text is given as before.
"""

from __future__ import annotations

import re

from explorer.session.describe import readable_tool_calls

# Prefixes tried, in characters, before the whole text: the first holds nearly every
# snippet of an ordinary hit, the second the rest short of a deep match.
TRIES = (8 * 1024, 256 * 1024)
# A line ``readable_tool_calls`` may rewrite starts with a tool's name (at most 100
# characters), a space and ``{``: a cut line not starting so is left as it is, whole or cut.
_HEAD = re.compile(r"[A-Za-z0-9_.:-]{1,100} \{")
_HEAD_REACH = 102  # characters of a line that tell whether it starts so


def snippet_source(text: str, query: str, width: int = 90) -> str:
    """What the snippet functions take for ``text`` and give the same snippet from:
    ``readable_tool_calls(text)``, or its whitespace-normalized prefix holding the first
    match of ``query`` (case-insensitive) and more than ``width`` characters after it."""
    if query:
        pattern = re.compile(re.escape(query), re.I)
        for reach in TRIES:
            if reach >= len(text):
                break
            flat = " ".join(readable_tool_calls(_lines_prefix(text, reach)).split())
            m = pattern.search(flat)
            if m is not None and len(flat) > m.end() + width:
                return flat
    return readable_tool_calls(text)


def _lines_prefix(text: str, reach: int) -> str:
    """``text[:reach]``, or longer: a cut line that may be a tool call line (which
    ``readable_tool_calls`` rewrites whole, or not at all) is taken whole, so that the
    prefix's readable text is a prefix of the whole text's."""
    if reach >= len(text):
        return text
    start = text.rfind("\n", 0, reach) + 1  # the cut line's first character
    line_end = text.find("\n", reach)
    line_end = len(text) if line_end < 0 else line_end
    if _HEAD.match(text, start, min(line_end, start + _HEAD_REACH)):
        return text[:line_end]
    return text[:reach]
