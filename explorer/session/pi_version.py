"""Which Pi release the summarization behaviour follows.

The engine follows the newest Pi release it was compared with (1.6.0) by default. The 1.0.3
behaviour stays reachable, but only when a caller asks for it by name: a reviewer reproducing
a summary that was written by an older Pi must be able to rebuild the exact request it sent,
while everyone else should get what the current Pi sends.
"""

from __future__ import annotations

__all__ = ["PI_1_0_3", "PI_1_6_0", "PI_DEFAULT", "PI_VERSIONS", "check_pi_version", "is_pi_1_0_3"]

PI_1_6_0 = "1.6.0"
PI_1_0_3 = "1.0.3"
PI_DEFAULT = PI_1_6_0
PI_VERSIONS = (PI_1_6_0, PI_1_0_3)


def check_pi_version(pi_version: str) -> str:
    """The version itself, or `ValueError`: an unknown name must not silently mean "latest"."""
    if pi_version not in PI_VERSIONS:
        raise ValueError(
            f"Unknown Pi version {pi_version!r}; expected one of {', '.join(PI_VERSIONS)}"
        )
    return pi_version


def is_pi_1_0_3(pi_version: str) -> bool:
    """True when the caller asked for the 1.0.3 behaviour (checked, so typos fail loudly)."""
    return check_pi_version(pi_version) == PI_1_0_3
