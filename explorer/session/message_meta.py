"""Newer persisted message fields, in words (Pi 1.6.0): durations, response model, diagnostics.

Pi 1.3-1.6 added optional fields to stored messages: `durationMs` on assistant messages and
tool results, and `responseModel`, `thinkingLevel`, `diagnostics`, `rawStopReason` on assistant
messages. The engine keeps every field as stored (loading never drops or rewrites them); these
helpers only say what they mean, for the command line and the web app. An absent `durationMs`
means nothing was measured - for a tool result, the tool never ran - so it is never shown as
"0 s". Provider names that are one vendor under different API names are folded together for
usage totals.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "PROVIDER_TOTAL_ALIASES",
    "format_duration",
    "message_facts",
    "provider_total_name",
]

# Stored provider name → the name usage is totalled under.
PROVIDER_TOTAL_ALIASES = {"azure-openai-responses": "azure"}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def format_duration(duration_ms: Any) -> str | None:
    """`took 1.2 s` for a stored `durationMs`; None when absent or not a usable number.

    Under a second in milliseconds (`took 350 ms`, `took 0 ms` for a measured instant), under
    a minute in tenths of a second, longer ones in minutes and seconds (`took 2 min 5 s`).
    """
    ms = _number(duration_ms)
    if ms is None:
        return None
    if ms < 1000:
        return f"took {round(ms)} ms"
    seconds = ms / 1000
    if seconds < 59.95:
        return f"took {seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"took {minutes} min {rest} s" if rest else f"took {minutes} min"


def provider_total_name(provider: Any) -> Any:
    """The provider name usage is totalled under (`azure-openai-responses` counts as `azure`)."""
    if isinstance(provider, str):
        return PROVIDER_TOTAL_ALIASES.get(provider, provider)
    return provider


def message_facts(message: Any) -> list[str]:
    """Short phrases for the newer optional fields a stored message carries, in a fixed order.

    Only fields that are present appear: the duration, the model that actually answered when it
    differs from the requested one, the requested thinking level, the provider's raw stop reason
    when it adds to `stopReason`, and how many diagnostics were recorded.
    """
    if not isinstance(message, dict):
        return []
    facts: list[str] = []
    took = format_duration(message.get("durationMs"))
    if took is not None:
        facts.append(took)
    response_model = message.get("responseModel")
    if (
        isinstance(response_model, str)
        and response_model
        and response_model != message.get("model")
    ):
        facts.append(f"answered by {response_model}")
    level = message.get("thinkingLevel")
    if isinstance(level, str) and level:
        facts.append(f"thinking {level}")
    raw_stop = message.get("rawStopReason")
    if isinstance(raw_stop, str) and raw_stop and raw_stop != message.get("stopReason"):
        facts.append(f"provider stop {raw_stop}")
    diagnostics = message.get("diagnostics")
    if isinstance(diagnostics, list) and diagnostics:
        kinds = sorted(  # type: ignore[type-var]
            {
                d.get("type")
                for d in diagnostics
                if isinstance(d, dict) and isinstance(d.get("type"), str)
            }
        )
        noun = "diagnostic" if len(diagnostics) == 1 else "diagnostics"
        facts.append(f"{len(diagnostics)} {noun}" + (f" ({', '.join(kinds)})" if kinds else ""))  # type: ignore[arg-type]
    return facts
