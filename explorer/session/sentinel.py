"""The "argument omitted" marker.

Pi's pure context functions distinguish an omitted leaf (use the last entry) from an explicit
`null` leaf (empty path) from an id (SPEC section 3.11), so Python needs a third state.
"""

from __future__ import annotations

from typing import Final


class _Unset:
    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __bool__(self) -> bool:
        return False


UNSET: Final = _Unset()
