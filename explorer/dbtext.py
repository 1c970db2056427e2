"""Text columns that accept whatever Pi writes.

Pi's files may hold lone UTF-16 surrogates and NUL in ids, names, timestamps and roles. The
database drivers refuse them (SQLite's UTF-8 encoder, PostgreSQL's text type), so a column
stores the visible form (U+FFFD in their place) while the line itself keeps the original
and the export stays byte-identical. The mapping runs on every value the ORM sends, writes
and lookups alike, so an id read from a parsed line finds its row.

The migration state is the plain Django field (``deconstruct``): the database type does not
change, only what Python hands the driver.
"""

from __future__ import annotations

from typing import Any

from django.db import models

from explorer.session.jsonfmt import visible


class _Visible:
    def get_prep_value(self, value: Any) -> Any:
        value = super().get_prep_value(value)  # type: ignore[misc]
        return visible(value) if isinstance(value, str) else value


class VisibleCharField(_Visible, models.CharField):
    """A ``CharField`` that stores lone surrogates and NUL as U+FFFD."""

    def deconstruct(self) -> tuple[Any, str, Any, Any]:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.CharField", args, kwargs


class VisibleTextField(_Visible, models.TextField):
    """A ``TextField`` that stores lone surrogates and NUL as U+FFFD."""

    def deconstruct(self) -> tuple[Any, str, Any, Any]:
        name, _path, args, kwargs = super().deconstruct()
        return name, "django.db.models.TextField", args, kwargs
