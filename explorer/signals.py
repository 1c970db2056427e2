"""Signals sent by ``explorer.services`` after each write has committed.

- ``entries_appended(sender=Session, session=Session, entries=list[Entry], source=str)``:
  new rows exist. ``source`` says who wrote them: ``"import"``, ``"edit"``, ``"compaction"``,
  ``"turn"``, ``"follow"``, ...
- ``cursor_moved(sender=Session, session=Session, leaf=Leaf, user=User | None)``: a named
  cursor points somewhere else; nothing was appended.
- ``session_created(sender=Session, session=Session, source=str)`` and
  ``session_deleted(sender=Session, session_pk=int, session_id=str)``.
"""

from __future__ import annotations

from django.dispatch import Signal

entries_appended = Signal()
cursor_moved = Signal()
session_created = Signal()
session_deleted = Signal()
