"""Template filters for short, escaped previews of entries and messages."""

from __future__ import annotations

from typing import Any

from django import template

from explorer.explore import _message_preview, entry_title

register = template.Library()


@register.filter
def entry_snippet(entry: Any, limit: int = 220) -> str:
    """One escaped line describing an entry (autoescape applies to the result)."""
    return entry_title(entry, int(limit)) if isinstance(entry, dict) else ""


@register.filter
def message_snippet(message: Any, limit: int = 220) -> str:
    return _message_preview(message, int(limit))


@register.filter
def pct(value: Any, total: Any) -> float:
    try:
        return round(100.0 * float(value) / float(total), 1) if float(total) else 0.0
    except (TypeError, ValueError):
        return 0.0
