"""Synthetic latency series for the over-saturation detector (fourfold/gates/saturation.py): Poisson
arrivals, multiplicative noise, an optional growing queue; judged each second as the ladder and the
sweep judge a step."""

from __future__ import annotations

import math
import random

from fourfold.gates.saturation import judge_trend, min_judge_s


def series(seed: int, *, rate: float = 20.0, hold: float = 10.0, sigma: float = 0.5, ar: float = 0.0,
           growth_ms_s: float = 0.0) -> list[tuple[float, float]]:
    """Poisson arrivals; latency 100 ms x lognormal noise (AR(1) in log space) + growth_ms_s x t."""
    rng = random.Random(seed)
    t, e, points = 0.0, rng.gauss(0, sigma), []
    while True:
        t += rng.expovariate(rate)
        if t > hold:
            return points
        e = ar * e + math.sqrt(1 - ar * ar) * rng.gauss(0, sigma)
        points.append((t, 100 * math.exp(e) + growth_ms_s * t))


def fires(points: list[tuple[float, float]], hold: float = 10.0) -> bool:
    """Judged each second from min_judge_s on, as LadderShape.tick does: True at the first alarm."""
    start = min_judge_s(hold)
    return any(judge_trend([p for p in points if p[0] <= s], s, start).saturated
               for s in range(math.ceil(start), int(hold) + 1))
