"""The report's cost and energy rows (:mod:`fourfold.measure.cost`'s formulas on each side): cost per 1M
output tokens and joules per output token. Each is the side's figure over its wall time and tokens, and
its spread is output tokens/s's, carried over (the money a machine-hour costs and the power it draws are
spread over the tokens it serves: both fall as throughput rises); an API price per token adds a
constant. Shown where a side has prices (``--price-*``) or power samples."""

from __future__ import annotations

import numpy as np

from fourfold.measure.cost import POWER_SERIES, Prices, cost_usd, joules_per_token
from fourfold.reports.estimators import output_tps
from fourfold.reports.replication import Spread
from fourfold.reports.rows import CompareSettings, GroupSample, Metric

__all__ = ["COST_METRICS", "COST_ROWS", "cost_fields", "side_power"]


def side_power(g: GroupSample) -> float | None:
    """The side's mean GPU power over its telemetry samples (the target's, else nvidia-smi's)."""
    for name in POWER_SERIES:
        samples = g.telemetry.get(name)
        if samples is not None and samples.size:
            return float(samples.mean())
    return None


def _scaled(g: GroupSample, rng: np.random.Generator, s: CompareSettings, value: float | None,
            per_token_s: float, constant: float) -> Spread | None:
    """A figure ``per_token_s / tps + constant`` with output tokens/s's spread carried over."""
    if value is None:
        return None
    tps = output_tps(g, rng, s)
    spread = Spread(value, tps.n if tps is not None else 0)
    if tps is not None and tps.replicates is not None and per_token_s:
        with np.errstate(divide="ignore"):
            spread.replicates = per_token_s / tps.replicates + constant
        spread.blocks, spread.too_few = tps.blocks, tps.too_few
    return spread


def cost_per_1m_output(g: GroupSample, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
    prices = g.prices
    if prices is None or not prices.any or not g.output_tokens_total:
        return None
    cost = cost_usd(prices, g.wall_s, g.prompt_tokens_total, g.output_tokens_total)
    if cost is None:
        return None
    api = (g.prompt_tokens_total * prices.per_1m_input + g.output_tokens_total * prices.per_1m_output)
    return _scaled(g, rng, s, cost * 1e6 / g.output_tokens_total, prices.per_hour / 3600 * 1e6,
                   api / g.output_tokens_total)


def energy_per_token(g: GroupSample, rng: np.random.Generator, s: CompareSettings) -> Spread | None:
    power = side_power(g)
    value = joules_per_token(power, g.wall_s, g.output_tokens_total)
    return _scaled(g, rng, s, value, power or 0.0, 0.0)


COST_METRICS = (
    Metric("cost_per_1m_output", "cost per 1M output tokens", "USD", "lower", cost_per_1m_output),
    Metric("joules_per_token", "energy per output token", "J", "lower", energy_per_token),
)
COST_ROWS = tuple(metric.key for metric in COST_METRICS)


def cost_fields(meta: dict[str, object], input_tokens: np.ndarray) -> dict[str, object]:
    """A side's GroupSample fields: its prices (the first run's settings) and the input tokens of every
    request whose count is known (summary.json's prompt_tokens_total)."""
    settings = meta.get("settings")
    return {"prices": Prices.of(settings if isinstance(settings, dict) else {}),
            "prompt_tokens_total": float(np.nansum(np.asarray(input_tokens, dtype=np.float64)))}
