"""Where a session's bytes live.

The manager only ever needs five operations on its backing store (SPEC section 3.5): does it
exist, read it whole, create it exclusively with the first flush, append complete lines, and
rewrite it whole in the three cases the spec allows. Keeping them behind a protocol lets the
database store persist through exactly the same manager code as a file on disk.
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

__all__ = ["FileStorage", "SessionStorage"]


@runtime_checkable
class SessionStorage(Protocol):
    path: str | None

    def exists(self) -> bool: ...

    def read_bytes(self) -> bytes: ...

    def create_exclusive(self, data: bytes) -> None:
        """Create with `data`; raise `FileExistsError` if it already exists."""

    def append(self, data: bytes) -> None:
        """Append one or more complete lines (each ending in a newline)."""

    def rewrite(self, data: bytes) -> None:
        """Replace the whole content (creating it if needed)."""


class FileStorage:
    """A session file on disk. Appends never touch existing bytes (O_APPEND)."""

    def __init__(self, path: str) -> None:
        self.path: str | None = path

    def __repr__(self) -> str:
        return f"FileStorage({self.path!r})"

    def _p(self) -> str:
        assert self.path is not None
        return self.path

    def exists(self) -> bool:
        return os.path.exists(self._p())

    def size(self) -> int:
        return os.stat(self._p()).st_size

    def read_bytes(self) -> bytes:
        with open(self._p(), "rb") as fh:
            return fh.read()

    def create_exclusive(self, data: bytes) -> None:
        with open(self._p(), "xb") as fh:
            fh.write(data)

    def append(self, data: bytes) -> None:
        with open(self._p(), "ab") as fh:
            fh.write(data)

    def rewrite(self, data: bytes) -> None:
        # Not atomic, like Pi's rewrite: truncate, then write.
        with open(self._p(), "wb") as fh:
            fh.write(data)
