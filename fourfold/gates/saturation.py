"""Over-saturation: is a load step's queue still growing? (pure: numbers in, a verdict out)

Two signals, each a claim with its own test (``tests/unit/test_saturation.py``):

- **Within a step** (:func:`judge_trend`, GuideLLM's idea): over the step's requests so far, the
  least-squares line of log latency (TTFT; from the intended arrival in an open loop) against the
  time each request arrived. A server that keeps up has a flat line; one whose queue grows has a
  line that climbs all step long. The step is *over-saturated* when, after at least ``min_s`` in the
  step (:func:`min_judge_s`) and :data:`MIN_REQUESTS` requests, the slope's 95 % interval lies above
  0 **and** even its lower bound implies a rise over the window of more than :data:`GROWTH_FRACTION`
  (x1.5), the slope's interval lies above 0 in each half of the window too, and the median of each
  quarter of the window is above the one before, the last above the first quarter's p90. Requests
  that arrived in the first third of the elapsed step are left out: a closed loop whose users just
  went up queues at once and then levels off (that jump is not growth). With requests-in-flight
  samples (the open loop), their slope's interval must lie above 0 as well. The check runs again and
  again as the step goes on (each second), so it is set to stay quiet on noise: the growth clause
  uses the interval's lower bound, the interval is widened for autocorrelation, and the rise must
  show in each half and quarter. Measured on synthetic flat series judged each second (lognormal
  noise, i.i.d. or AR(1) up to 0.7): no alarm in 1,000 steps per kind; a latency that wanders x7
  within a second (AR 0.9) fires in about 0.2 % of steps. A queue growing 50 ms/s on a 100 ms TTFT
  fires in every step.
- **Between steps** (:func:`judge_steps`, Little's law for a closed loop): with N users, a
  throughput X and a latency R, N = X R. When the users grew by a factor k >= 1.5 but the output
  tokens per second grew by less than :data:`THROUGHPUT_GAIN_MAX` of that (x - 1 < 0.1 (k - 1); for
  a doubling: < +10 %) while TTFT p50 rose more than :data:`TTFT_RISE_MIN` x, the added users only
  wait in the server's queue: the step is *past saturation*. A closed loop's queue cannot grow
  without bound (it holds at most the users), so this is the ladder's signal; the trend is the
  open loop's.

The within-step series are autocorrelated (a queue changes slowly), which makes the plain
least-squares interval too narrow: :func:`fit` widens it by the residuals' lag-1 autocorrelation.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

MIN_REQUESTS = 30          # requests in the judged window before any within-step verdict
MIN_STEP_S = 5.0           # seconds in a step before its trend is judged (and at least a third of the hold)
MIN_BETWEEN_S = 3.0        # ... before it is compared with the step below (and at least hold / 4)
GROWTH_FRACTION = 0.5      # the rise the slope's lower bound implies over the window (x1.5)
USERS_GROWTH_MIN = 1.5     # between steps: judged only when the users grew at least this factor
THROUGHPUT_GAIN_MAX = 0.10  # ... past saturation when tokens/s grew less than this share of the users' growth
TTFT_RISE_MIN = 1.5        # ... while TTFT p50 grew more than this factor
MIN_STEP_REQUESTS = 20     # between steps: requests each step needs


@dataclass(frozen=True)
class Saturation:
    saturated: bool
    reason: str = ""          # why (saturated), or why no verdict / why not (otherwise)
    judged: bool = True       # False: too early, too few requests


@dataclass(frozen=True)
class Trend:
    slope: float              # units of y per unit of x
    low: float                # the 95 % interval of the slope
    high: float
    intercept: float
    n: int


@dataclass(frozen=True)
class StepFigures:
    """One ladder step's closed-loop figures over the same window as the step it is compared with."""

    users: int
    requests: int
    output_tps: float
    ttft_p50_ms: float


def min_judge_s(hold_s: float) -> float:
    """Seconds into a step before it is judged: ``max(MIN_STEP_S, hold_s / 3)``."""
    return max(MIN_STEP_S, hold_s / 3)


def min_compare_s(hold_s: float) -> float:
    """Seconds into a step before :func:`judge_steps` compares it: ``max(MIN_BETWEEN_S, hold_s / 4)``."""
    return max(MIN_BETWEEN_S, hold_s / 4)


def t_quantile_975(df: int) -> float:
    """Student's t 97.5 % quantile (Cornish-Fisher from the normal's 1.96: within 0.5 % for df >= 5)."""
    z = 1.959964
    if df <= 0:
        return math.inf
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    return z + g1 / df + g2 / df ** 2 + g3 / df ** 3


def fit(xs: Sequence[float], ys: Sequence[float]) -> Trend | None:
    """Least squares ``y = a + b x`` with the slope's 95 % interval, widened for the residuals' lag-1
    autocorrelation r in the order given (effective n = n (1 - r) / (1 + r), r >= 0): a queue's
    latency changes slowly, so neighbours are alike and the plain interval is too narrow.
    None with < 3 points or one x."""
    n = len(xs)
    if n < 3 or n != len(ys):
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    intercept = my - slope * mx
    resid = [y - intercept - slope * x for x, y in zip(xs, ys)]
    ss = sum(e * e for e in resid)
    r = max(0.0, min(0.99, sum(a * b for a, b in zip(resid, resid[1:])) / ss)) if ss > 0 else 0.0
    inflate = (1 + r) / (1 - r)
    df = max(1, int(n / inflate) - 2)
    half = t_quantile_975(df) * math.sqrt(ss / (n - 2) / sxx * inflate)
    return Trend(slope, slope - half, slope + half, intercept, n)


def judge_trend(points: Sequence[tuple[float, float]], elapsed_s: float, min_s: float, *,
                in_flight: Sequence[tuple[float, float]] = (), what: str = "TTFT",
                min_requests: int = MIN_REQUESTS) -> Saturation:
    """Within a step (module docstring). ``points``: (seconds since the step began, latency ms) per
    request; ``in_flight``: (seconds since the step began, requests in flight) samples, or none."""
    if elapsed_s < min_s:
        return Saturation(False, f"{elapsed_s:.1f} s into the step (judged from {min_s:g} s)", judged=False)
    start = elapsed_s / 3
    window = sorted((x, y) for x, y in points if start <= x <= elapsed_s and y > 0)
    if len(window) < min_requests:
        return Saturation(False, f"{len(window)} requests since {start:.1f} s (judged from {min_requests})",
                       judged=False)
    xs = [x for x, _ in window]
    trend = fit(xs, [math.log(y) for _, y in window])      # multiplicative noise, growth in %/s
    if trend is None:
        return Saturation(False, "every request arrived at one time", judged=False)
    x0, x1 = xs[0], xs[-1]
    first, last = math.exp(trend.intercept + trend.slope * x0), math.exp(trend.intercept + trend.slope * x1)
    text = (f"{what} rose {first:.0f} -> {last:.0f} ms over {x1 - x0:.1f} s ({_pct(trend.slope)}/s, "
            f"95% CI [{_pct(trend.low)}, {_pct(trend.high)}]/s)")
    if not (trend.low > 0 and trend.low * (x1 - x0) > math.log1p(GROWTH_FRACTION)):
        return Saturation(False, f"not growing: {text.replace(' rose ', ' ')}")
    half = (x0 + x1) / 2
    for part in ([w for w in window if w[0] < half], [w for w in window if w[0] >= half]):
        again = fit([x for x, _ in part], [math.log(y) for _, y in part])
        if again is None or again.low <= 0:
            return Saturation(False, f"{text}, but not in each half of the window")
    medians = quarter_medians(window, x0, x1)
    early = sorted(y for x, y in window if x < x0 + (x1 - x0) / 4)
    if not all(a < b for a, b in zip(medians, medians[1:])) or medians[-1] <= early[int(0.9 * len(early))]:
        steps = " -> ".join(f"{m:.0f}" for m in medians)
        return Saturation(False, f"{text}, but not quarter after quarter above the first quarter's p90 "
                                 f"(medians {steps} ms)")
    flight = ""
    if in_flight:
        samples = [(x, n) for x, n in in_flight if start <= x <= elapsed_s]
        grows = fit([x for x, _ in samples], [n for _, n in samples])
        if grows is None or grows.low <= 0:
            return Saturation(False, f"{text}, but the requests in flight are not growing")
        flight = f"; {samples[-1][1]:.0f} requests in flight and growing ({grows.slope:+.1f}/s)"
    return Saturation(True, f"over-saturated: {text}{flight}")


def quarter_medians(window: Sequence[tuple[float, float]], x0: float, x1: float) -> list[float]:
    """The median y of each quarter of ``[x0, x1]`` (a quarter without a point repeats the last)."""
    quarters: list[list[float]] = [[], [], [], []]
    width = (x1 - x0) / 4 or 1.0
    for x, y in window:
        quarters[min(3, int((x - x0) / width))].append(y)
    out: list[float] = []
    for values in quarters:
        out.append(statistics.median(values) if values else (out[-1] if out else 0.0))
    return out


def _pct(log_slope: float) -> str:
    return f"{100 * math.expm1(log_slope):+.0f} %"


def judge_steps(previous: StepFigures, current: StepFigures,
                min_requests: int = MIN_STEP_REQUESTS) -> Saturation:
    """Between two closed-loop steps (module docstring): is ``current`` past saturation?"""
    if min(previous.requests, current.requests) < min_requests:
        fewest = min(previous.requests, current.requests)
        return Saturation(False, f"{fewest} requests in a step (judged from {min_requests})", judged=False)
    growth = current.users / previous.users if previous.users else 0.0
    if growth < USERS_GROWTH_MIN or previous.output_tps <= 0 or previous.ttft_p50_ms <= 0:
        return Saturation(False, f"users x{growth:.2f} (judged from x{USERS_GROWTH_MIN:g})", judged=False)
    gain = current.output_tps / previous.output_tps
    rise = current.ttft_p50_ms / previous.ttft_p50_ms
    text = (f"users {previous.users} -> {current.users} (x{growth:.1f}) but output tokens/s "
            f"{previous.output_tps:.0f} -> {current.output_tps:.0f} ({100 * (gain - 1):+.0f} %) "
            f"while TTFT p50 rose {previous.ttft_p50_ms:.0f} -> {current.ttft_p50_ms:.0f} ms (x{rise:.1f})")
    if gain - 1 < THROUGHPUT_GAIN_MAX * (growth - 1) and rise > TTFT_RISE_MIN:
        return Saturation(True, f"past saturation: {text}: the added users wait in the server's queue "
                             "(Little's law)")
    return Saturation(False, "not past saturation: " + text.replace(" but ", ", "))


__all__ = ["GROWTH_FRACTION", "MIN_REQUESTS", "StepFigures", "Trend", "Saturation", "fit", "judge_steps",
           "judge_trend", "min_compare_s", "min_judge_s"]
