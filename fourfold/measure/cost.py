"""What the tokens cost, in money and in energy (pure): summary.json's ``cost`` block and the report's rows.

Prices are the run's options: ``--price-per-hour`` (the deployment under test, all its GPUs, per hour of
the run's wall time) and ``--price-per-1m-input`` / ``--price-per-1m-output`` (an API's prices per 1M
tokens); either or both. Power is the telemetry's (``power_w``: the GPUs' draw, DCGM or nvidia-smi).

- ``cost_usd`` = price_per_hour x wall_s / 3600 + (input tokens x input price + output tokens x output
  price) / 1e6, over the run's requests (summary.json's total);
- ``cost_per_1m_output`` = cost_usd per 1M output tokens; ``cost_per_request`` per ok request (on L3 a
  RAG answer); ``cost_per_session`` per ended L4 session;
- ``joules_per_token`` = mean power x wall_s / output tokens (= mean power / output tokens per second);
  ``tokens_per_joule`` its inverse.

The report computes each side's value with the same formulas (:func:`cost_usd`, :func:`joules_per_token`)
from the side's wall time, tokens and power samples.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fourfold.measure.metrics import ratio

__all__ = ["COST_DECIMALS", "POWER_SERIES", "Prices", "cost_block", "cost_usd", "joules_per_token",
           "power_mean"]

COST_DECIMALS = 6          # summary.json rounds the money figures (USD) to this many places
ENERGY_DECIMALS = 4        # ... and the energy figures (J, tokens/J)
POWER_SERIES = ("server.power_w", "nvidia_smi.power_w")    # the target's telemetry first


@dataclass(frozen=True)
class Prices:
    per_hour: float = 0.0
    per_1m_input: float = 0.0
    per_1m_output: float = 0.0

    @property
    def any(self) -> bool:
        return bool(self.per_hour or self.per_1m_input or self.per_1m_output)

    @classmethod
    def of(cls, settings: Any) -> Prices:
        """From a run's settings (an object with the options, or meta.json's ``settings`` dict)."""
        get = settings.get if isinstance(settings, dict) else lambda k, d=0.0: getattr(settings, k, d)
        return cls(float(get("price_per_hour", 0.0) or 0.0), float(get("price_per_1m_input", 0.0) or 0.0),
                   float(get("price_per_1m_output", 0.0) or 0.0))


def cost_usd(prices: Prices, wall_s: float | None, input_tokens: float, output_tokens: float) -> float | None:
    """The run's cost (see module docstring); None without a wall time when a price per hour is given."""
    if prices.per_hour and not wall_s:
        return None
    machine = prices.per_hour * (wall_s or 0.0) / 3600
    return machine + (input_tokens * prices.per_1m_input + output_tokens * prices.per_1m_output) / 1e6


def joules_per_token(power_w: float | None, wall_s: float | None, output_tokens: float) -> float | None:
    """Energy per output token: mean power x wall time / output tokens (None without one of them)."""
    if power_w is None or not wall_s or not output_tokens:
        return None
    return power_w * wall_s / output_tokens


def power_mean(metrics: dict[str, Any]) -> float | None:
    """The mean power of a summary.json ``server_metrics.metrics`` block (the target's, else nvidia-smi's)."""
    for name in POWER_SERIES:
        stats = metrics.get(name)
        if isinstance(stats, dict) and isinstance(stats.get("mean"), (int, float)):
            return float(stats["mean"])
    return None


def cost_block(summary: dict[str, Any], prices: Prices) -> dict[str, Any] | None:
    """summary.json's ``cost`` block from the rest of it (None: no price given and no power measured)."""
    total = summary.get("total") or {}
    power = power_mean(((summary.get("server_metrics") or {}).get("metrics")) or {})
    if not prices.any and power is None:
        return None
    wall, output = total.get("wall_s"), float(total.get("output_tokens_total") or 0)
    block: dict[str, Any] = {"price_per_hour": prices.per_hour, "price_per_1m_input": prices.per_1m_input,
                             "price_per_1m_output": prices.per_1m_output}
    prompt = float(total.get("prompt_tokens_total") or 0)
    cost = cost_usd(prices, wall, prompt, output) if prices.any else None
    sessions = ((summary.get("sessions") or {}).get("total") or {}).get("ended")

    def money(value: float | None) -> float | None:
        return round(value, COST_DECIMALS) if value is not None else None

    block.update(cost_usd=money(cost),
                 cost_per_1m_output=money(ratio(cost * 1e6, output) if cost is not None else None),
                 cost_per_request=money(ratio(cost, total.get("ok")) if cost is not None else None),
                 cost_per_session=money(ratio(cost, sessions) if cost is not None and sessions else None))
    energy = joules_per_token(power, wall, output)
    block.update(power_w_mean=power,
                 joules_per_token=round(energy, ENERGY_DECIMALS) if energy is not None else None,
                 tokens_per_joule=round(1 / energy, ENERGY_DECIMALS) if energy else None)
    return block
