"""``?format=json`` on the pages: the same builder's data as the page, as JSON.

Read-only, behind the same login and roles as the page (the view's decorators run first).
Values are plain data from the builders; anything else (a date, a tuple) is made JSON here,
so ``None`` is always ``null``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from django.db.models import Model
from django.http import HttpRequest

from explorer.rendering import VisibleJsonResponse


def wants_json(request: HttpRequest) -> bool:
    """The caller asked for the page's data rather than its HTML."""
    return request.GET.get("format") == "json"


def json_page(data: dict[str, Any], *, status: int = 200) -> VisibleJsonResponse:
    """One page's data as a JSON object (never HTML, never Python reprs)."""
    # Lone surrogates and NUL read as U+FFFD, as on the pages.
    response = VisibleJsonResponse(data, status=status)
    response["Vary"] = "HX-Request"
    return response


def problem_rows(problems: Any) -> list[dict[str, Any]]:
    """Import warnings as JSON rows: the Problems page and the Integrity tab list the same."""
    return [
        {"line": p.line, "severity": p.severity, "code": p.code, "message": p.message,
         "entry_id": p.entry_id or None}
        for p in problems
    ]  # fmt: skip


def finding_rows(findings: Any, *, with_session: bool = False) -> list[dict[str, Any]]:
    """Secret findings as JSON rows: where each is and its masked preview, never the secret."""
    rows = []
    for f in findings:
        row = {
            "id": f.pk, "entry_id": f.entry_id, "line_no": f.line_no, "kind": f.kind,
            "path": f.path, "preview": f.preview, "status": f.status,
        }  # fmt: skip
        if with_session:
            row["session"] = f.session_id
        rows.append(row)
    return rows


def plain(value: Any) -> Any:
    """A builder's value as JSON data: dataclasses and tuples opened, marked-safe HTML as its
    text, a model row as its primary key, a non-finite number as ``null``.

    Iterative, not recursive: an entry nested a thousand levels deep (a crafted file) is
    past Python's recursion limit, and its JSON answer must not be a 500. The plain
    numbers and strings that make up most of an answer are placed first, by their exact
    type (a Timeline's points are a few thousand of them)."""
    root: list[Any] = [None]
    todo: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while todo:
        into, at, v = todo.pop()
        kind = type(v)
        if kind is str or kind is int or kind is bool or v is None:
            into[at] = v
            continue
        if kind is float:
            into[at] = v if math.isfinite(v) else None
            continue
        names = _field_names(kind)
        if names is not None:
            v = {name: getattr(v, name) for name in names}
        if isinstance(v, dict):
            copy: dict[str, Any] = {}
            into[at] = copy
            for k, x in v.items():
                copy[str(k)] = None  # keeps the order of the keys
                todo.append((copy, str(k), x))
        elif isinstance(v, list | tuple | set | frozenset):
            items: list[Any] = [None] * len(v)
            into[at] = items
            todo.extend((items, i, x) for i, x in enumerate(v))
        else:
            into[at] = _leaf(v)
    return root[0]


_FIELDS: dict[type, tuple[str, ...] | None] = {}


def _field_names(kind: type) -> tuple[str, ...] | None:
    """The fields of a dataclass type in order (None: not one), looked up once per type."""
    try:
        return _FIELDS[kind]
    except KeyError:
        pass
    found = (
        tuple(f.name for f in dataclasses.fields(kind))
        if dataclasses.is_dataclass(kind) and kind is not type
        else None
    )
    _FIELDS[kind] = found
    return found


def _leaf(value: Any) -> Any:
    if isinstance(value, Model):
        return value.pk
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, str):
        return str.__str__(value)  # a SafeString becomes a plain str (str() keeps it one)
    return value
