"""Errors raised by the session engine.

The engine never imports Django; the web layer translates these into form and HTTP errors at
its edge. `str(error)` is exactly the message Pi uses (SPEC section 3.10) so that users who know
Pi recognise it.
"""

from __future__ import annotations


class SessionError(Exception):
    """A session could not be read, written or navigated as asked."""


class SummarizationError(SessionError):
    """A summary request failed (SPEC section 6.10); the message says why."""
