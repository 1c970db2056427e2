"""Estimated prices for usage that carries no cost (Claude Code and Codex records never do).

Prices come from `genai-prices` (Pydantic's maintained price list, MIT), read from the data
bundled with the installed package: no network call is ever made, so an estimate depends only
on the installed version, which `PRICE_LIST` names for the pages and the command line to show.
Anything priced here is an *estimate*: the provider's bill may differ (discounts, batch
pricing, long-context tiers the records do not reveal).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

__all__ = ["PRICE_LIST", "CostEstimate", "estimate_cost", "price_list"]


@lru_cache(maxsize=1)
def price_list() -> str:
    """The name and version of the price list used (shown next to every estimate)."""
    try:
        import genai_prices
    except ImportError:  # pragma: no cover - a dependency; kept so a page never fails on it
        return "no price list installed"
    return f"genai-prices {genai_prices.__version__} (bundled price data)"


PRICE_LIST = "genai-prices"


@dataclass
class CostEstimate:
    """A priced usage: the parts in Pi's cost keys and what could not be priced."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    unpriced: list[str] = field(default_factory=list)

    @property
    def total(self) -> float:
        return self.input + self.output + self.cache_read + self.cache_write

    def add(self, other: CostEstimate) -> None:
        self.input += other.input
        self.output += other.output
        self.cache_read += other.cache_read
        self.cache_write += other.cache_write
        for name in other.unpriced:
            if name not in self.unpriced:
                self.unpriced.append(name)

    def to_json(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "output": self.output,
            "cacheRead": self.cache_read,
            "cacheWrite": self.cache_write,
            "total": self.total,
        }


_PROVIDERS = {"anthropic": "anthropic", "openai": "openai", "google": "google"}


@lru_cache(maxsize=256)
def _unit_prices(provider: str, model: str) -> tuple[float, float, float, float] | None:
    """Price per token of (input, output, cache read, cache write), or None when the list
    does not know the model. Derived by pricing a thousand tokens of each kind: small enough
    to stay in the first tier of tiered prices (long-context tiers start at 200k input
    tokens; the route totals priced here are sums of many requests, not one request)."""
    try:
        from genai_prices import Usage, calc_price
    except ImportError:  # pragma: no cover
        return None
    provider_id = _PROVIDERS.get(provider)
    unit = 1000

    def price(**counts: int) -> float:
        result = calc_price(Usage(**counts), model_ref=model, provider_id=provider_id)
        return float(result.total_price) / unit

    try:
        base_input = price(input_tokens=unit)
        output = price(output_tokens=unit)
        cache_read = price(input_tokens=unit, cache_read_tokens=unit)
        cache_write = price(input_tokens=unit, cache_write_tokens=unit)
    except (LookupError, ValueError):
        return None
    return base_input, output, cache_read, cache_write


def estimate_cost(provider: str, model: str, usage: dict[str, int]) -> CostEstimate:
    """`usage` in Pi's keys (`input` excluding cache reads and writes) priced by the list."""
    estimate = CostEstimate()
    if not any(usage.get(k) for k in ("input", "output", "cacheRead", "cacheWrite")):
        return estimate
    prices = _unit_prices(provider, model) if model else None
    if prices is None:
        estimate.unpriced.append(f"{provider}/{model}" if model else f"{provider}/(no model)")
        return estimate
    per_input, per_output, per_read, per_write = prices
    estimate.input = usage.get("input", 0) * per_input
    estimate.output = usage.get("output", 0) * per_output
    estimate.cache_read = usage.get("cacheRead", 0) * per_read
    estimate.cache_write = usage.get("cacheWrite", 0) * per_write
    return estimate
