"""The session engine: Pi's JSONL session format (version 3) in pure Python.

No Django imports here: the same code serves files on disk, the database store, the command
line and the web pages. Public names are re-exported below as the modules land.
"""

from __future__ import annotations

from .errors import SessionError, SummarizationError

__all__ = ["SessionError", "SummarizationError"]
